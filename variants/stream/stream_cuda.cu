// The STREAM operations in plain CUDA (no Kokkos): the handwritten kernels and the vendor baselines.
//  - stream_cuda (copy, scale, add, triad, dot): grid-stride kernels over float4 loads and stores with a
//    scalar tail (n need not be a multiple of 4 or of the block), one resident wave of blocks. dot
//    accumulates each thread's products in float64 (exact products), reduces warps with shuffles and the
//    block through shared memory, writes one partial per block, and the last block to finish (a ticket)
//    adds the partials in block order: one kernel, the same d on every run.
//  - cublas (copy, scale, add, triad, dot): cublasScopy; cublasSgeam, C = a A + b B, on the vector seen as
//    a 1024-row matrix (plus a one-column call for the n % 1024 tail: an n x 1 matrix ran 16x slower),
//    for add (a = b = 1), triad (a = 1, b = q) and scale (a = q, b = 0, B = x: cuBLAS need not read B when
//    b == 0, and if it did it would read the addresses A just read, so no extra DRAM traffic);
//    cublasSdot in device pointer mode (float accumulation; the float result stays on the device until
//    download, so the run only queues).
//  - cub (dot): cub::DeviceReduce::Sum over a thrust::transform_iterator of a counting iterator that
//    yields double(x_i) * double(y_i) (CCCL 3.0 has neither cub::TransformInputIterator nor
//    cuda::transform_iterator; thrust's is in every CCCL), temporary storage allocated in prepare.
// Every variant queues on its own non-blocking stream, so CUDA events recorded around enqueue_run() time
// only its kernels; run() is enqueue_run() and a stream synchronisation.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant.hpp"
#include "stream/stream.hpp"
#include "kstudy/support/cublas_check.hpp"
#include "detail/cuda_arrays.hpp"

namespace kstudy::stream {
namespace {

constexpr int default_block_size = 256;

// ---------------------------------------------------------------------------------------------------------
// Kernels

// has_y() is a host constexpr function; device code reads its value through this constant.
template <stream_kind K>
inline constexpr bool reads_y = has_y(K);

template <stream_kind K>
__device__ __forceinline__ float apply(float x, float y, float q) {
  if constexpr (K == stream_kind::copy)
    return x;
  else if constexpr (K == stream_kind::scale)
    return q * x;
  else if constexpr (K == stream_kind::add)
    return x + y;
  else
    return x + q * y;  // triad; nvcc contracts it to one FMA, which the gate allows
}

template <stream_kind K>
__device__ __forceinline__ float4 apply4(float4 a, float4 b, float q) {
  return make_float4(apply<K>(a.x, b.x, q), apply<K>(a.y, b.y, q), apply<K>(a.z, b.z, q), apply<K>(a.w, b.w, q));
}

// z = op(x, y): each thread strides over float4 quads, then over the last n % 4 elements. cudaMalloc
// aligns to 256 bytes, so every quad is a 16-byte aligned load.
template <stream_kind K>
__global__ void stream_elementwise(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z,
                                   float q, std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t first = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t quads = n / 4;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  const auto* y4 = reinterpret_cast<const float4*>(y);
  auto* z4 = reinterpret_cast<float4*>(z);
  // One float4 per step: unrolling two steps (both loaded before either store) measured the same on an
  // H200 (4.07 TB/s for add at n = 2^28).
  for (std::int64_t i = first; i < quads; i += stride) {
    const float4 a = x4[i];
    float4 b = a;
    if constexpr (reads_y<K>) b = y4[i];
    z4[i] = apply4<K>(a, b, q);
  }
  for (std::int64_t i = 4 * quads + first; i < n; i += stride) z[i] = apply<K>(x[i], reads_y<K> ? y[i] : 0.0f, q);
}

// The sum of v over the block (blockDim.x a multiple of 32), valid in thread 0. Synchronises on entry, so
// `warp_sums` may be reused by consecutive calls.
__device__ double block_sum(double v, double* warp_sums) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x >> 5) ? warp_sums[lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

// d = sum_i x_i * y_i in float64. Each block writes its partial; the last block to take a ticket adds the
// partials in block order, writes d and resets the ticket for the next run.
__global__ void stream_dot(const float* __restrict__ x, const float* __restrict__ y, double* __restrict__ partials,
                           unsigned int* __restrict__ ticket, double* __restrict__ d, std::int64_t n) {
  __shared__ double warp_sums[32];
  __shared__ bool last_block;
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t first = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t quads = n / 4;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  const auto* y4 = reinterpret_cast<const float4*>(y);
  double sum = 0.0;
  for (std::int64_t i = first; i < quads; i += stride) {
    const float4 a = x4[i], b = y4[i];
    sum = fma(double(a.x), double(b.x), sum);
    sum = fma(double(a.y), double(b.y), sum);
    sum = fma(double(a.z), double(b.z), sum);
    sum = fma(double(a.w), double(b.w), sum);
  }
  for (std::int64_t i = 4 * quads + first; i < n; i += stride) sum = fma(double(x[i]), double(y[i]), sum);
  sum = block_sum(sum, warp_sums);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum;
    __threadfence();  // the partial is visible device-wide before the ticket says so
    last_block = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  double total = 0.0;
  // In block order, bypassing L1 (other blocks wrote these through L2).
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x) total += __ldcg(&partials[b]);
  total = block_sum(total, warp_sums);
  if (threadIdx.x == 0) {
    *d = total;
    *ticket = 0;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Buffers and transfers shared by the CUDA variants

// x, y, z (or the device result of dot) on the variant's own stream. A family implements plan() (checks
// options, sizes its launch and workspace; called after the vectors are allocated) and enqueue_run().
// The dot result is a float64 on the device unless the family's library returns a float (cuBLAS).
template <stream_kind K>
class stream_cuda_base : public kstudy::detail::cuda_converting_variant {
 public:
  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = stream_problem(problem, K);
    check_options(data.n(), options);
    reset_arrays(std::string(operation_name(K)), options);
    m_n = data.n();
    m_q = data.q();
    m_x = input_array<float>(m_n);
    if constexpr (has_y(K)) m_y = input_array<float>(m_n);
    if constexpr (is_reduction(K)) {
      if (float_result())
        m_result_float = output_array<float>(1);
      else
        m_result = output_array<double>(1);
    } else {
      m_z = output_array<float>(m_n);
    }
    plan(options);
    upload(data.streamed_inputs());
  }

  void download(const std::vector<host_span>& outputs) override {
    if constexpr (is_reduction(K)) {
      if (float_result()) {
        float d = 0.0f;
        KSTUDY_CUDA_CHECK(cudaMemcpyAsync(&d, m_result_float, sizeof d, cudaMemcpyDeviceToHost, m_stream));
        wait();
        *d_output(outputs) = d;
        return;
      }
    }
    enqueue_download(outputs);
    wait();
  }

  // Everything queues on m_stream; only a float dot result needs the host to convert it after a wait.
  bool queues_asynchronously() const override { return !float_result(); }
  bool enqueues_run() const override { return true; }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    if constexpr (is_reduction(K)) {
      if (float_result()) return download(outputs);
    }
    cuda_buffers_variant::enqueue_download(outputs);
  }

 protected:
  // Throws std::invalid_argument for options or an n the family cannot take (before any allocation).
  // The library variants take no block size and ignore it (tunable_block_size is false).
  virtual void check_options(std::int64_t n, const run_options& options) const {
    (void)n;
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
  }
  // After the vectors are allocated: the launch and its workspace (device_array(), freed with the vectors).
  virtual void plan(const run_options& options) = 0;
  // Whether the dot result is a device float (cuBLAS) rather than a double.
  virtual bool float_result() const { return false; }

  std::int64_t m_n = 0;
  float m_q = 0.0f;
  float *m_x = nullptr, *m_y = nullptr, *m_z = nullptr;
  double* m_result = nullptr;
  float* m_result_float = nullptr;
};

// ---------------------------------------------------------------------------------------------------------
// stream_cuda: the handwritten kernels

template <stream_kind K>
class stream_cuda final : public stream_cuda_base<K> {
  using base = stream_cuda_base<K>;

 public:
  void enqueue_run() override {
    if constexpr (is_reduction(K)) {
      stream_dot<<<m_grid, m_block, 0, this->m_stream>>>(this->m_x, this->m_y, m_partials, m_ticket, this->m_result,
                                                         this->m_n);
    } else {
      stream_elementwise<K>
          <<<m_grid, m_block, 0, this->m_stream>>>(this->m_x, this->m_y, this->m_z, this->m_q, this->m_n);
    }
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }

  double calculated_occupancy() const override {
    const int warps = resident_blocks_per_sm(m_block) * (m_block / 32);
    return double(warps) / double(device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor) / 32);
  }

 protected:
  void check_options(std::int64_t, const run_options& options) const override {
    kstudy::detail::warp_multiple_block(options, default_block_size);
  }

  // One resident wave of blocks, or fewer when there are fewer quads than resident threads.
  void plan(const run_options& options) override {
    m_block = kstudy::detail::warp_multiple_block(options, default_block_size);
    const int per_sm = resident_blocks_per_sm(m_block);
    if (per_sm < 1)
      throw std::runtime_error("stream_cuda: a block of " + std::to_string(m_block) + " threads does not fit an SM");
    const std::int64_t resident = std::int64_t(per_sm) * device_attribute(cudaDevAttrMultiProcessorCount);
    const std::int64_t quads = this->m_n / 4;
    const std::int64_t work_blocks = std::max<std::int64_t>(1, (quads + m_block - 1) / m_block);
    m_grid = static_cast<int>(std::min(resident, work_blocks));
    if constexpr (is_reduction(K)) {
      m_partials = this->template device_array<double>(m_grid);
      m_ticket = this->template device_array<unsigned int>(1);
      KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_ticket, 0, sizeof(unsigned int), this->m_stream));
    }
  }

 private:
  static int resident_blocks_per_sm(int block) {
    int blocks = 0;
    if constexpr (is_reduction(K))
      KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, stream_dot, block, 0));
    else
      KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, stream_elementwise<K>, block, 0));
    return blocks;
  }

  int m_block = default_block_size;
  int m_grid = 1;
  double* m_partials = nullptr;
  unsigned int* m_ticket = nullptr;
};

// ---------------------------------------------------------------------------------------------------------
// cublas: the vendor BLAS calls (64-bit-index API)

// Rows of the column-major matrix geam sees the vectors as.
constexpr std::int64_t geam_rows = 1024;

template <stream_kind K>
class stream_cublas final : public stream_cuda_base<K> {
 public:
  ~stream_cublas() override {
    if (m_handle != nullptr) cublasDestroy(m_handle);
  }

  void enqueue_run() override {
    const auto n = static_cast<std::int64_t>(this->m_n);
    if constexpr (K == stream_kind::copy) {
      KSTUDY_CUBLAS_CHECK(cublasScopy_64(m_handle, n, this->m_x, 1, this->m_z, 1));
    } else if constexpr (K == stream_kind::dot) {
      KSTUDY_CUBLAS_CHECK(cublasSdot_64(m_handle, n, this->m_x, 1, this->m_y, 1, this->m_result_float));
    } else {
      // C = alpha A + beta B with the vector seen as a column-major geam_rows x (n / geam_rows) matrix, and
      // the last n % geam_rows elements as one more column. On an H200 at n = 2^28, geam on an n x 1 (or
      // 1 x n) matrix ran at 0.27 (0.14) TB/s for triad; on 1024-row matrices at 4.4 TB/s.
      const float alpha = K == stream_kind::scale ? this->m_q : 1.0f;
      const float beta = K == stream_kind::add ? 1.0f : (K == stream_kind::triad ? this->m_q : 0.0f);
      const float* b = has_y(K) ? this->m_y : this->m_x;
      const std::int64_t columns = n / geam_rows, body = columns * geam_rows, tail = n - body;
      if (columns > 0)
        KSTUDY_CUBLAS_CHECK(cublasSgeam_64(m_handle, CUBLAS_OP_N, CUBLAS_OP_N, geam_rows, columns, &alpha, this->m_x,
                                           geam_rows, &beta, b, geam_rows, this->m_z, geam_rows));
      if (tail > 0)
        KSTUDY_CUBLAS_CHECK(cublasSgeam_64(m_handle, CUBLAS_OP_N, CUBLAS_OP_N, tail, 1, &alpha, this->m_x + body, tail,
                                           &beta, b + body, tail, this->m_z + body, tail));
    }
  }

 protected:
  void plan(const run_options&) override {
    if (m_handle == nullptr) KSTUDY_CUBLAS_CHECK(cublasCreate(&m_handle));
    KSTUDY_CUBLAS_CHECK(cublasSetStream(m_handle, this->m_stream));
    // dot writes its result to device memory, so the call only queues; geam's scalars are host values.
    KSTUDY_CUBLAS_CHECK(
        cublasSetPointerMode(m_handle, is_reduction(K) ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST));
  }
  bool float_result() const override { return true; }

 private:
  cublasHandle_t m_handle = nullptr;
};

// ---------------------------------------------------------------------------------------------------------
// cub: DeviceReduce::Sum of the float64 products

struct product_at {
  const float* x;
  const float* y;
  __host__ __device__ double operator()(std::int64_t i) const { return double(x[i]) * double(y[i]); }
};

class stream_cub_dot final : public stream_cuda_base<stream_kind::dot> {
  using product_iterator = thrust::transform_iterator<product_at, thrust::counting_iterator<std::int64_t>>;

 public:
  void enqueue_run() override {
    std::size_t bytes = m_temp_bytes;
    KSTUDY_CUDA_CHECK(cub::DeviceReduce::Sum(m_temp, bytes, products(), m_result, m_n, m_stream));
  }

 protected:
  void plan(const run_options&) override {
    m_temp_bytes = 0;
    KSTUDY_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, m_temp_bytes, products(), m_result, m_n, m_stream));
    m_temp = device_array<unsigned char>(static_cast<std::int64_t>(m_temp_bytes));
  }

 private:
  product_iterator products() const {
    return product_iterator(thrust::counting_iterator<std::int64_t>(0), product_at{m_x, m_y});
  }

  unsigned char* m_temp = nullptr;
  std::size_t m_temp_bytes = 0;
};

// ---------------------------------------------------------------------------------------------------------
// Registration

// Declared with their fields in stream_cuda_info.cpp, which every build compiles.
[[maybe_unused]] const int registered = [] {
  variant_binding<stream_cuda<stream_kind::copy>>{"copy_cuda@cuda"};
  variant_binding<stream_cuda<stream_kind::scale>>{"scale_cuda@cuda"};
  variant_binding<stream_cuda<stream_kind::add>>{"add_cuda@cuda"};
  variant_binding<stream_cuda<stream_kind::triad>>{"triad_cuda@cuda"};
  variant_binding<stream_cuda<stream_kind::dot>>{"dot_cuda@cuda"};
  variant_binding<stream_cublas<stream_kind::copy>>{"copy_cublas@cuda"};
  variant_binding<stream_cublas<stream_kind::scale>>{"scale_cublas@cuda"};
  variant_binding<stream_cublas<stream_kind::add>>{"add_cublas@cuda"};
  variant_binding<stream_cublas<stream_kind::triad>>{"triad_cublas@cuda"};
  variant_binding<stream_cublas<stream_kind::dot>>{"dot_cublas@cuda"};
  variant_binding<stream_cub_dot>{"dot_cub@cuda"};
  return 0;
}();

}  // namespace
}  // namespace kstudy::stream
