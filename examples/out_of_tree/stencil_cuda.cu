// stencil_cuda: the stencil in plain CUDA, compiled only when kstudy is the cuda flavour (kstudy_add_study
// leaves .cu sources out otherwise). One thread per element in a grid-stride loop; the block size is tunable
// (block_size experiments). The thin base (kstudy/support/cuda_arrays.hpp) owns the device arrays and the
// variant's non-blocking stream, so CUDA events time only this kernel; every CUDA call is checked.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/support/cuda_arrays.hpp"
#include "stencil.hpp"

namespace stencil {
namespace {

__global__ void stencil3_kernel(const float* __restrict__ x, float* __restrict__ y, std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = side_weight * ((i > 0 ? x[i - 1] : 0.0f) + (i + 1 < n ? x[i + 1] : 0.0f)) + centre_weight * x[i];
}

class stencil_cuda final : public kstudy::cuda_array_variant<> {
 public:
  void enqueue_run() override {
    const int block = block_size(256);
    const std::int64_t n = output_elements(0), grid = std::min<std::int64_t>((n + block - 1) / block, 65535);
    stencil3_kernel<<<int(grid), block, 0, cuda_stream()>>>(input(0), output(0), n);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
};

const int registered = kstudy::register_cuda_array_variant<stencil_cuda>(
    variant_info_for("stencil_cuda", "CUDA kernel, grid-stride, one element per thread"));

}  // namespace
}  // namespace stencil
