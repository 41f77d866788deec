// reduce_sum in plain CUDA: the seed's ladder, one change per rung, and the vendor baseline. Rungs 2-4 and CUB
// accumulate in float32 (as the seed's kernels) into a float s on the device; download widens it.
//  1 reduce_sum_atomic       one thread per element, atomicAdd(s, x_i): n atomics on one address, which
//                            the L2 serialises (the seed's 16.7M-atomic kernel), into a float64 s: a float32
//                            one cannot hold a sum of 2^26 terms of [0, 2) (sum_atomic says why).
//  2 reduce_sum_block_tree   each thread sums its elements in a register (grid stride), the block adds the
//                            threads' sums by a shared-memory tree (log2(block) steps, a barrier each), one
//                            atomicAdd per block.
//  3 reduce_sum_warp_shuffle as 2, but warps reduce with __shfl_down_sync and only the 8 warp sums go
//                            through shared memory: 2 barriers instead of 8.
//  4 reduce_sum_float4_wave  float4 loads (4 independent ones in flight per thread), one resident wave of
//                            blocks (SMs x blocks per SM), and no atomics: each block writes a partial and
//                            a one-block kernel adds the partials in block order - deterministic: the same
//                            s on every run on one device and n.
//  reduce_sum_cub            cub::DeviceReduce::Sum (float in, float out), temporary storage allocated in
//                            prepare.
// Rungs 1-3 zero s (cudaMemsetAsync, 8 or 4 bytes) before their kernel; that is part of the timed run. Rungs 2
// and 3 launch ceil(n / (256 x 16)) blocks (16 elements per thread, at most 65,535 blocks, then the grid
// strides), rung 4 one resident wave. Every variant queues on its own non-blocking stream, so CUDA events
// around enqueue_run() time only its work.
#include <cuda_runtime.h>

#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant.hpp"
#include "reduce/reduce_sum.hpp"
#include "detail/cuda_arrays.hpp"

namespace kstudy::reduce {
namespace {

using kstudy::detail::occupancy_of;

constexpr int block_size = 256;          // every rung; a power of two for rung 2's tree
constexpr int elements_per_thread = 16;  // rungs 2 and 3: the grid they launch
constexpr std::int64_t max_spread_blocks = 65535;

// ---------------------------------------------------------------------------------------------------------
// Kernels

// Rung 1: every element is one atomic on s, in float64. A float32 running sum over all n elements of a sum that
// does not cancel swallows its terms once it passes 2^25 (the float spacing there, 4, exceeds every x_i in
// [0, 2)): at n >= 2^26 a float s is wrong, not slow, and the gate rejects it. float64 atomics keep what the rung
// is on the ladder for (n atomics on one address, which the L2 serialises) with a sum the gate accepts.
__global__ void sum_atomic(const float* __restrict__ x, double* __restrict__ s, std::int64_t n) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(s, double(x[i]));
}

// Rung 2: register accumulation over a grid stride, then a shared-memory tree (blockDim.x a power of two).
__global__ void sum_block_tree(const float* __restrict__ x, float* __restrict__ s, std::int64_t n) {
  __shared__ float partial[block_size];
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  float sum = 0.0f;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) sum += x[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(s, partial[0]);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of v over the block (blockDim.x a multiple of 32, at most 1,024), valid in thread 0.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) v = warp_sum(lane < int(blockDim.x >> 5) ? warp_sums[lane] : 0.0f);
  return v;
}

// Rung 3: rung 2 with the tree replaced by warp shuffles.
__global__ void sum_warp_shuffle(const float* __restrict__ x, float* __restrict__ s, std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  float sum = 0.0f;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) sum += x[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) atomicAdd(s, sum);
}

// Rung 4, stage 1: float4 loads, four in flight per thread per step, then the scalar tail (n % 4 and the
// quads past the last full step); one partial per block. cudaMalloc aligns x to 256 bytes.
__global__ void sum_float4_partials(const float* __restrict__ x, float* __restrict__ partials, std::int64_t n) {
  const std::int64_t threads = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t quads = n / 4;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  float a = 0.0f, b = 0.0f, c = 0.0f, d = 0.0f;
  std::int64_t q = t;
  for (; q + 3 * threads < quads; q += 4 * threads) {
    const float4 v0 = x4[q], v1 = x4[q + threads], v2 = x4[q + 2 * threads], v3 = x4[q + 3 * threads];
    a += (v0.x + v0.y) + (v0.z + v0.w);
    b += (v1.x + v1.y) + (v1.z + v1.w);
    c += (v2.x + v2.y) + (v2.z + v2.w);
    d += (v3.x + v3.y) + (v3.z + v3.w);
  }
  for (; q < quads; q += threads) {
    const float4 v = x4[q];
    a += (v.x + v.y) + (v.z + v.w);
  }
  for (std::int64_t i = 4 * quads + t; i < n; i += threads) b += x[i];
  const float sum = block_sum((a + b) + (c + d));
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// Rung 4, stage 2: one block adds the partials, each thread a fixed subset, in a fixed order.
__global__ void sum_partials(const float* __restrict__ partials, int count, float* __restrict__ s) {
  float sum = 0.0f;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *s = sum;
}

// ---------------------------------------------------------------------------------------------------------
// Buffers and transfers shared by the variants

// x and the float s on the variant's own stream; a variant implements plan() (sizes its launch and
// workspace after x is allocated) and enqueue_run().
class reduce_cuda_base : public kstudy::detail::cuda_converting_variant {
 public:
  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = reduce_problem(problem);
    reset_arrays("reduce_sum", options);
    m_n = data.n();
    m_x = input_array<float>(m_n);
    m_s = output_array<float>(1);
    plan();
    upload(data.streamed_inputs());
  }

  // s is a device float; the host output a double: copied, waited for, widened.
  void download(const std::vector<host_span>& outputs) override {
    float s = 0.0f;
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(&s, m_s, sizeof s, cudaMemcpyDeviceToHost, m_stream));
    wait();
    *s_output(outputs) = double(s);
  }

  // The run queues on m_stream; the download converts on the host after a wait, so it does not queue.
  bool enqueues_run() const override { return true; }

 protected:
  // After x is allocated: the launch and its workspace (device_array(), freed with x).
  virtual void plan() {}

  std::int64_t m_n = 0;
  float* m_x = nullptr;
  float* m_s = nullptr;
};

// ---------------------------------------------------------------------------------------------------------
// The rungs

// Its s is a device double (sum_atomic's comment says why), downloaded as it is.
class reduce_atomic final : public reduce_cuda_base {
 public:
  void enqueue_run() override {
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_sum, 0, sizeof(double), m_stream));
    const std::int64_t blocks = (m_n + block_size - 1) / block_size;  // 2^22 at n = 2^30: below 2^31 - 1
    sum_atomic<<<static_cast<unsigned int>(blocks), block_size, 0, m_stream>>>(m_x, m_sum, m_n);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  void download(const std::vector<host_span>& outputs) override {
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(s_output(outputs), m_sum, sizeof(double), cudaMemcpyDeviceToHost, m_stream));
    wait();
  }
  void poison() override {
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_sum, 0xFF, sizeof(double), m_stream));  // all-ones bytes: a NaN
    wait();
  }
  double calculated_occupancy() const override { return occupancy_of(sum_atomic, block_size); }

 protected:
  void plan() override { m_sum = device_array<double>(1); }

 private:
  double* m_sum = nullptr;
};

// ceil(n / (block x 16)) blocks, at most max_spread_blocks.
unsigned int spread_grid(std::int64_t n) {
  const std::int64_t per_block = std::int64_t(block_size) * elements_per_thread;
  return static_cast<unsigned int>(std::clamp<std::int64_t>((n + per_block - 1) / per_block, 1, max_spread_blocks));
}

// Rungs 2 and 3: s zeroed, then one grid-stride kernel that adds each block's sum to s atomically.
template <void (*Kernel)(const float*, float*, std::int64_t)>
class reduce_spread final : public reduce_cuda_base {
 public:
  void enqueue_run() override {
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_s, 0, sizeof(float), m_stream));
    Kernel<<<spread_grid(m_n), block_size, 0, m_stream>>>(m_x, m_s, m_n);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  double calculated_occupancy() const override { return occupancy_of(Kernel, block_size); }
};

class reduce_float4_wave final : public reduce_cuda_base {
 public:
  void enqueue_run() override {
    sum_float4_partials<<<m_grid, block_size, 0, m_stream>>>(m_x, m_partials, m_n);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
    sum_partials<<<1, 1024, 0, m_stream>>>(m_partials, m_grid, m_s);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  double calculated_occupancy() const override { return occupancy_of(sum_float4_partials, block_size); }

 protected:
  // One resident wave, or fewer blocks when there are fewer quads than resident threads.
  void plan() override {
    int per_sm = 0;
    KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sum_float4_partials, block_size, 0));
    if (per_sm < 1) throw std::runtime_error("reduce_sum_float4_wave: a block does not fit an SM");
    const std::int64_t resident = std::int64_t(per_sm) * device_attribute(cudaDevAttrMultiProcessorCount);
    const std::int64_t work_blocks = std::max<std::int64_t>(1, (m_n / 4 + block_size - 1) / block_size);
    m_grid = static_cast<int>(std::min(resident, work_blocks));
    m_partials = device_array<float>(m_grid);
  }

 private:
  int m_grid = 1;
  float* m_partials = nullptr;
};

class reduce_cub final : public reduce_cuda_base {
 public:
  void enqueue_run() override {
    std::size_t bytes = m_temp_bytes;
    KSTUDY_CUDA_CHECK(cub::DeviceReduce::Sum(m_temp, bytes, m_x, m_s, m_n, m_stream));
  }

 protected:
  void plan() override {
    m_temp_bytes = 0;
    KSTUDY_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, m_temp_bytes, m_x, m_s, m_n, m_stream));
    m_temp = device_array<unsigned char>(static_cast<std::int64_t>(m_temp_bytes));
  }

 private:
  unsigned char* m_temp = nullptr;
  std::size_t m_temp_bytes = 0;
};

// ---------------------------------------------------------------------------------------------------------
// Registration

// Declared with their fields in reduce_cuda_info.cpp, which every build compiles.
[[maybe_unused]] const int registered = [] {
  variant_binding<reduce_atomic>{"reduce_sum_atomic@cuda"};
  variant_binding<reduce_spread<sum_block_tree>>{"reduce_sum_block_tree@cuda"};
  variant_binding<reduce_spread<sum_warp_shuffle>>{"reduce_sum_warp_shuffle@cuda"};
  variant_binding<reduce_float4_wave>{"reduce_sum_float4_wave@cuda"};
  variant_binding<reduce_cub>{"reduce_sum_cub@cuda"};
  return 0;
}();

}  // namespace
}  // namespace kstudy::reduce
