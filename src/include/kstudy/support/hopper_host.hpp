#pragma once
// The host side of the Hopper (sm_90a) rungs: the driver's tensor-map encoder, reached through the runtime so
// that nothing links against libcuda, a cluster launch's configuration, and the check that a translation unit's
// sm_90a image is what runs.
// For CUDA translation units only.
#if defined(__CUDACC__)
#include <cuda.h>  // CUtensorMap and its enums
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <cstddef>

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

// The launch configuration of a kernel in clusters of `cluster_x` x 1 x 1 blocks (grid.x a multiple of it), for
// cudaLaunchKernelEx and cudaOccupancyMaxActiveClusters. Not copyable: m_config points at m_attribute.
struct cluster_launch {
  cluster_launch(dim3 grid, dim3 block, std::size_t dynamic_shared_bytes, cudaStream_t stream, unsigned cluster_x) {
    m_attribute.id = cudaLaunchAttributeClusterDimension;
    m_attribute.val.clusterDim.x = cluster_x;
    m_attribute.val.clusterDim.y = 1;
    m_attribute.val.clusterDim.z = 1;
    m_config.gridDim = grid;
    m_config.blockDim = block;
    m_config.dynamicSmemBytes = dynamic_shared_bytes;
    m_config.stream = stream;
    m_config.attrs = &m_attribute;
    m_config.numAttrs = 1;
  }
  cluster_launch(const cluster_launch&) = delete;
  cluster_launch& operator=(const cluster_launch&) = delete;

  cudaLaunchAttribute m_attribute{};
  cudaLaunchConfig_t m_config{};
};

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
