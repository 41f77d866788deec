#pragma once
// The host side of the Hopper (sm_90a) rungs: the driver's tensor-map encoder, reached through the runtime so
// that nothing links against libcuda, and the check that a translation unit's sm_90a image is what runs.
// For CUDA translation units only.
#if defined(__CUDACC__)
#include <cuda.h>  // CUtensorMap and its enums
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant_unavailable.hpp"

namespace kstudy::hopper {

// cuTensorMapEncodeTiled from the driver the runtime has loaded; variant_unavailable where it has none.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    KSTUDY_CUDA_CHECK(
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found));
#else
    KSTUDY_CUDA_CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &function, cudaEnableDefault, &found));
#endif
    if (found != cudaDriverEntryPointSuccess || function == nullptr)
      throw variant_unavailable("the CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12.0 or later)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encoder;
}

// Whether `probe`, a kernel of the caller's translation unit that writes 1 where it was compiled for sm_90a
// (__CUDA_ARCH_FEAT_SM90_ALL) and 0 elsewhere, runs its sm_90a image on the current device. The driver may
// load the unit's plain sm_90 image instead, or none at all on another GPU; neither is an error here.
inline bool sm90a_image_runs(void (*probe)(int*)) {
  int* flag = nullptr;
  KSTUDY_CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
  int host = -1;
  probe<<<1, 1>>>(flag);
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) status = cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(flag);
  if (status != cudaSuccess && status != cudaErrorNoKernelImageForDevice) KSTUDY_CUDA_CHECK(status);
  return status == cudaSuccess && host == 1;
}

}  // namespace kstudy::hopper
#endif  // __CUDACC__
