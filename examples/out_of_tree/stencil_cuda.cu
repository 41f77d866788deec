// stencil_cuda: the stencil in plain CUDA, compiled only when kstudy is the cuda flavour (kstudy_add_study
// leaves .cu sources out otherwise). One thread per element in a grid-stride loop over a resident wave of
// blocks; the block size is tunable (block_size experiments). Everything queues on the variant's own
// non-blocking stream (kstudy's CUDA stream base), so CUDA events recorded around enqueue_run() time only its
// kernel; every CUDA call is checked (KSTUDY_CUDA_CHECK throws with the call, file, line and CUDA's message).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/support/cuda_variant.hpp"
#include "stencil.hpp"

namespace stencil {
namespace {

constexpr int default_block_size = 256;

__global__ void stencil3_kernel(const float* __restrict__ x, float* __restrict__ y, float w, float c, std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float left = i > 0 ? x[i - 1] : 0.0f;
    const float right = i + 1 < n ? x[i + 1] : 0.0f;
    y[i] = w * (left + right) + c * x[i];
  }
}

// kstudy/support/cuda_variant.hpp (installed with kstudy) owns the stream: created by create_stream() on the
// first prepare, reported by stream() for CUDA event timing, drained by wait(), destroyed after this class's
// destructor has freed the buffers; queued_variant turns enqueue_* + wait() into run/upload/download.
class stencil_cuda final : public kstudy::detail::cuda_stream_variant<> {
 public:
  stencil_cuda() = default;
  ~stencil_cuda() override {
    // Destructors must not throw: the stream's work ends before its buffers go, errors are dropped.
    if (m_stream != nullptr) cudaStreamSynchronize(m_stream);
    release(/*checked=*/false);
  }

  void prepare(const kstudy::problem_data& problem, const kstudy::run_options& options) override {
    const auto& data = stencil_problem(problem);
    const int block = options.block_size == 0 ? default_block_size : options.block_size;
    if (block < 32 || block > 1024 || block % 32 != 0)
      throw std::invalid_argument("block_size must be a multiple of 32 in [32, 1024], got " +
                                  std::to_string(options.block_size));
    release(/*checked=*/true);
    create_stream();
    m_n = data.n();
    KSTUDY_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_x), bytes()));
    KSTUDY_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_y), bytes()));
    // One resident wave of blocks, or fewer when n needs fewer.
    int per_sm = 0;
    KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stencil3_kernel, block, 0));
    const std::int64_t resident =
        std::int64_t(std::max(1, per_sm)) * kstudy::detail::device_attribute(cudaDevAttrMultiProcessorCount);
    m_block = block;
    m_grid = int(std::max<std::int64_t>(1, std::min<std::int64_t>(resident, (m_n + block - 1) / block)));
    upload(data.streamed_inputs());
  }
  void poison() override {
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_y, 0xFF, bytes(), m_stream));  // all-ones bytes: a float NaN
    wait();
  }

  void enqueue_run() override {
    stencil3_kernel<<<m_grid, m_block, 0, m_stream>>>(m_x, m_y, side_weight, centre_weight, m_n);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  void enqueue_upload(const std::vector<kstudy::host_span>& inputs) override {
    if (inputs.size() != 1) throw std::invalid_argument("stencil3: expected one input array");
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_x, inputs[0].data, bytes(), cudaMemcpyHostToDevice, m_stream));
  }
  void enqueue_download(const std::vector<kstudy::host_span>& outputs) override {
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(outputs.at(0).data, m_y, bytes(), cudaMemcpyDeviceToHost, m_stream));
  }

  double calculated_occupancy() const override {
    int per_sm = 0;
    KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stencil3_kernel, m_block, 0));
    return double(per_sm * (m_block / 32)) /
           double(kstudy::detail::device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor) / 32);
  }

 private:
  std::size_t bytes() const { return std::size_t(m_n) * sizeof(float); }
  // Checked when preparing again; unchecked in the destructor, which must not throw.
  void release(bool checked) {
    for (float** p : {&m_x, &m_y}) {
      if (*p == nullptr) continue;
      const cudaError_t status = cudaFree(*p);
      *p = nullptr;
      if (checked) KSTUDY_CUDA_CHECK(status);
    }
  }

  std::int64_t m_n = 0;
  int m_block = default_block_size, m_grid = 1;
  float *m_x = nullptr, *m_y = nullptr;
};

const int registered = [] {
  auto info = variant_info_for("stencil_cuda", "stencil_cuda", "CUDA kernel, grid-stride, one element per thread");
  info.backend = "cuda";
  info.on_device = true;
  info.implementation = kstudy::implementation::handwritten_cuda;  // what the report compares Kokkos against
  info.tunable_block_size = true;
  kstudy::variant_registration<stencil_cuda>{info};
  return 0;
}();

}  // namespace
}  // namespace stencil
