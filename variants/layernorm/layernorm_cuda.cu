// LayerNorm and residual + LayerNorm in plain CUDA (no Kokkos): the kernel lab's ladder, one change a rung.
// LayerNorm (family layernorm_cuda), one block per row:
//  1 layernorm_cuda_two_pass: a mean pass, a variance pass and a normalise pass, each reading the row from
//    global memory (3 reads of x, which L1/L2 may catch for short rows);
//  2 layernorm_cuda_welford: one statistics pass merging per-thread Welford states (count, mean, M2) across
//    the warp with shuffles and across warps through shared memory (Chan's formula), then the normalise
//    pass (2 reads);
//  3 layernorm_cuda_registers: the row read once into registers with float4 loads (scalar loads where hidden
//    is not a multiple of 4), mean and variance (two passes over the registers) and y from them: 1 read.
//    Templated on the float4s per thread (1..16 of 128 threads: rows up to 8,192); longer rows fall back to
//    the Welford kernel.
// Residual + LayerNorm (family residual_layernorm_cuda):
//  1 residual_layernorm_cuda_unfused: a float4 grid-stride add kernel writing h, then the register kernel on
//    h: 5 passes (read x, r; write h; read h; write y);
//  2 residual_layernorm_cuda_fused: the register kernel loading x and r, writing h = x + r and y: 4 passes
//    (the Welford kernel with the add folded in for rows over 8,192).
// Statistics accumulate in float, the rstd is 1 / sqrtf (two correctly rounded operations). Every variant
// queues on its own non-blocking stream; run() is enqueue_run() and a stream synchronisation.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant.hpp"
#include "layernorm/layernorm.hpp"
#include "detail/cuda_arrays.hpp"

namespace kstudy::layernorm {
namespace {

constexpr int stats_threads = 256;  // rungs 1 and 2
constexpr int add_threads = 256;    // the unfused residual's add kernel
// register_threads, max_register_vectors and max_register_hidden (rung 3): layernorm.hpp.

// ---------------------------------------------------------------------------------------------------------
// Block reductions

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of v over the block, in every thread. Synchronises on entry, so `scratch` (32 floats) may be
// reused by consecutive calls.
template <int Threads>
__device__ float block_all_sum(float v, float* scratch) {
  v = warp_sum(v);
  if constexpr (Threads > 32) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = warp_sum(lane < Threads / 32 ? scratch[lane] : 0.0f);
  }
  return v;
}

// A Welford state: count, mean and sum of squared deviations M2 of the values seen.
struct welford {
  float count, mean, m2;
};

__device__ __forceinline__ void welford_add(welford& w, float v) {
  w.count += 1.0f;
  const float d = v - w.mean;
  w.mean += d / w.count;
  w.m2 += d * (v - w.mean);
}

// Chan et al.'s merge of two states (either may be empty: threads past the end of a short row).
__device__ __forceinline__ welford welford_merge(const welford& a, const welford& b) {
  if (b.count == 0.0f) return a;
  if (a.count == 0.0f) return b;
  const float count = a.count + b.count, d = b.mean - a.mean, wb = b.count / count;
  return welford{count, a.mean + d * wb, a.m2 + b.m2 + d * d * a.count * wb};
}

__device__ __forceinline__ welford warp_merge(welford w) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const welford other{__shfl_xor_sync(0xffffffffu, w.count, offset), __shfl_xor_sync(0xffffffffu, w.mean, offset),
                        __shfl_xor_sync(0xffffffffu, w.m2, offset)};
    w = welford_merge(w, other);
  }
  return w;
}

// ---------------------------------------------------------------------------------------------------------
// Kernels

// Rung 1: three passes over the row in global memory.
__global__ void __launch_bounds__(stats_threads)
    layernorm_two_pass(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                       float* __restrict__ y, int hidden, float epsilon) {
  __shared__ float scratch[32];
  const float* row = x + std::int64_t(blockIdx.x) * hidden;
  float* out = y + std::int64_t(blockIdx.x) * hidden;
  float sum = 0.0f;
  for (int j = threadIdx.x; j < hidden; j += stats_threads) sum += row[j];
  const float mean = block_all_sum<stats_threads>(sum, scratch) / float(hidden);
  float squares = 0.0f;
  for (int j = threadIdx.x; j < hidden; j += stats_threads) {
    const float d = row[j] - mean;
    squares += d * d;
  }
  const float rstd = 1.0f / sqrtf(block_all_sum<stats_threads>(squares, scratch) / float(hidden) + epsilon);
  for (int j = threadIdx.x; j < hidden; j += stats_threads) out[j] = (row[j] - mean) * rstd * gamma[j] + beta[j];
}

// Rung 2: Welford statistics in one pass, then the normalise pass. With Residual, the statistics pass reads
// x and r and writes h = x + r, which the normalise pass reads back (each thread its own elements).
template <bool Residual>
__global__ void __launch_bounds__(stats_threads)
    layernorm_welford(const float* __restrict__ x, const float* __restrict__ r, const float* __restrict__ gamma,
                      const float* __restrict__ beta, float* __restrict__ y, float* __restrict__ h, int hidden,
                      float epsilon) {
  __shared__ welford warps[stats_threads / 32];
  __shared__ float statistics[2];
  const std::int64_t base = std::int64_t(blockIdx.x) * hidden;
  const float* row = Residual ? h + base : x + base;
  welford w{0.0f, 0.0f, 0.0f};
  for (int j = threadIdx.x; j < hidden; j += stats_threads) {
    float v = x[base + j];
    if constexpr (Residual) {
      v += r[base + j];
      h[base + j] = v;
    }
    welford_add(w, v);
  }
  w = warp_merge(w);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = w;
  __syncthreads();
  if (warp == 0) {
    w = lane < stats_threads / 32 ? warps[lane] : welford{0.0f, 0.0f, 0.0f};
    w = warp_merge(w);
    if (lane == 0) {
      statistics[0] = w.mean;
      statistics[1] = 1.0f / sqrtf(w.m2 / float(hidden) + epsilon);
    }
  }
  __syncthreads();
  const float mean = statistics[0], rstd = statistics[1];
  float* out = y + base;
  for (int j = threadIdx.x; j < hidden; j += stats_threads) out[j] = (row[j] - mean) * rstd * gamma[j] + beta[j];
}

// Rung 3: the row in registers. Vectors float4s per thread (element j of quad q = k * 128 + thread, or with
// scalar loads element j = (4k + c) * 128 + thread: consecutive threads take consecutive addresses either
// way). Elements past the row's end hold 0 and are masked out of the variance.
template <int Vectors, bool Vec4, bool Residual>
__global__ void __launch_bounds__(register_threads)
    layernorm_registers(const float* __restrict__ x, const float* __restrict__ r, const float* __restrict__ gamma,
                        const float* __restrict__ beta, float* __restrict__ y, float* __restrict__ h, int hidden,
                        float epsilon) {
  constexpr int per_thread = 4 * Vectors;
  __shared__ float scratch[32];
  const std::int64_t base = std::int64_t(blockIdx.x) * hidden;
  float v[per_thread];
  // Element index of register slot i (Vec4: quad k = i / 4, lane c = i % 4).
  auto index = [](int i) {
    return Vec4 ? ((i / 4) * register_threads + int(threadIdx.x)) * 4 + i % 4 : i * register_threads + int(threadIdx.x);
  };
  if constexpr (Vec4) {
    const auto* x4 = reinterpret_cast<const float4*>(x + base);
    const auto* r4 = reinterpret_cast<const float4*>(r + base);
    auto* h4 = reinterpret_cast<float4*>(h + base);
#pragma unroll
    for (int k = 0; k < Vectors; ++k) {
      const int q = k * register_threads + threadIdx.x;
      float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (4 * q < hidden) {
        a = x4[q];
        if constexpr (Residual) {
          const float4 b = r4[q];
          a = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
          h4[q] = a;
        }
      }
      v[4 * k] = a.x;
      v[4 * k + 1] = a.y;
      v[4 * k + 2] = a.z;
      v[4 * k + 3] = a.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < per_thread; ++i) {
      const int j = index(i);
      float a = 0.0f;
      if (j < hidden) {
        a = x[base + j];
        if constexpr (Residual) {
          a += r[base + j];
          h[base + j] = a;
        }
      }
      v[i] = a;
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < per_thread; ++i) sum += v[i];
  const float mean = block_all_sum<register_threads>(sum, scratch) / float(hidden);
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < per_thread; ++i) {
    const float d = index(i) < hidden ? v[i] - mean : 0.0f;
    squares += d * d;
  }
  const float rstd = 1.0f / sqrtf(block_all_sum<register_threads>(squares, scratch) / float(hidden) + epsilon);
  if constexpr (Vec4) {
    const auto* g4 = reinterpret_cast<const float4*>(gamma);
    const auto* b4 = reinterpret_cast<const float4*>(beta);
    auto* y4 = reinterpret_cast<float4*>(y + base);
#pragma unroll
    for (int k = 0; k < Vectors; ++k) {
      const int q = k * register_threads + threadIdx.x;
      if (4 * q < hidden) {
        const float4 g = g4[q], b = b4[q];
        y4[q] = make_float4((v[4 * k] - mean) * rstd * g.x + b.x, (v[4 * k + 1] - mean) * rstd * g.y + b.y,
                            (v[4 * k + 2] - mean) * rstd * g.z + b.z, (v[4 * k + 3] - mean) * rstd * g.w + b.w);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < per_thread; ++i) {
      const int j = index(i);
      if (j < hidden) y[base + j] = (v[i] - mean) * rstd * gamma[j] + beta[j];
    }
  }
}

// h = x + r over n floats: float4 grid-stride loop, then the n % 4 tail.
__global__ void residual_add(const float* __restrict__ x, const float* __restrict__ r, float* __restrict__ h,
                             std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t first = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t quads = n / 4;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  const auto* r4 = reinterpret_cast<const float4*>(r);
  auto* h4 = reinterpret_cast<float4*>(h);
  for (std::int64_t i = first; i < quads; i += stride) {
    const float4 a = x4[i], b = r4[i];
    h4[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
  for (std::int64_t i = 4 * quads + first; i < n; i += stride) h[i] = x[i] + r[i];
}

// ---------------------------------------------------------------------------------------------------------
// Launchers

struct row_arguments {
  const float *x, *r, *gamma, *beta;
  float *y, *h;
  int rows, hidden;
  cudaStream_t stream;
};

template <int Vectors, bool Residual>
void launch_registers_with(const row_arguments& a) {
  if (a.hidden % 4 == 0)
    layernorm_registers<Vectors, true, Residual>
        <<<a.rows, register_threads, 0, a.stream>>>(a.x, a.r, a.gamma, a.beta, a.y, a.h, a.hidden, epsilon);
  else
    layernorm_registers<Vectors, false, Residual>
        <<<a.rows, register_threads, 0, a.stream>>>(a.x, a.r, a.gamma, a.beta, a.y, a.h, a.hidden, epsilon);
}

template <bool Residual>
void launch_welford(const row_arguments& a) {
  layernorm_welford<Residual>
      <<<a.rows, stats_threads, 0, a.stream>>>(a.x, a.r, a.gamma, a.beta, a.y, a.h, a.hidden, epsilon);
}

// The register kernel with the fewest float4s per thread that hold the row; Welford for longer rows.
template <bool Residual>
void launch_registers(const row_arguments& a) {
  const std::int64_t vectors = (a.hidden + 4 * register_threads - 1) / (4 * register_threads);
  if (vectors <= 1)
    launch_registers_with<1, Residual>(a);
  else if (vectors <= 2)
    launch_registers_with<2, Residual>(a);
  else if (vectors <= 4)
    launch_registers_with<4, Residual>(a);
  else if (vectors <= 8)
    launch_registers_with<8, Residual>(a);
  else if (vectors <= max_register_vectors)
    launch_registers_with<max_register_vectors, Residual>(a);
  else
    launch_welford<Residual>(a);
}

// ---------------------------------------------------------------------------------------------------------
// Variants

enum class algorithm { two_pass, welford, registers, add_then_registers, fused_registers };

template <layernorm_kind K, algorithm A>
class layernorm_cuda final : public kstudy::detail::cuda_buffers_variant<> {
 public:
  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = layernorm_problem(problem, K);
    if (data.rows() > INT_MAX || data.hidden() > INT_MAX)
      throw std::invalid_argument(std::string(operation_name(K)) + ": rows and hidden must fit a 32-bit int");
    reset_arrays(std::string(operation_name(K)), options);
    m_rows = data.rows();
    m_hidden = data.hidden();
    m_x = input_array<float>(data.elements());
    m_y = output_array<float>(data.elements());
    if constexpr (has_residual(K)) {
      m_r = input_array<float>(data.elements());
      m_h = output_array<float>(data.elements());
    }
    m_gamma = device_array<float>(m_hidden);
    m_beta = device_array<float>(m_hidden);
    const std::size_t parameter_bytes = static_cast<std::size_t>(m_hidden) * sizeof(float);
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_gamma, data.gamma(), parameter_bytes, cudaMemcpyHostToDevice, m_stream));
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_beta, data.beta(), parameter_bytes, cudaMemcpyHostToDevice, m_stream));
    if constexpr (A == algorithm::add_then_registers) {
      int per_sm = 0;
      KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, residual_add, add_threads, 0));
      const std::int64_t resident =
          std::int64_t(std::max(per_sm, 1)) * device_attribute(cudaDevAttrMultiProcessorCount);
      const std::int64_t work = std::max<std::int64_t>(1, (data.elements() / 4 + add_threads - 1) / add_threads);
      m_add_grid = static_cast<int>(std::min(resident, work));
    }
    upload(data.streamed_inputs());
  }

  void enqueue_run() override {
    row_arguments a{m_x,     m_r, m_gamma, m_beta, m_y, m_h, static_cast<int>(m_rows), static_cast<int>(m_hidden),
                    m_stream};
    if constexpr (A == algorithm::two_pass) {
      layernorm_two_pass<<<a.rows, stats_threads, 0, m_stream>>>(m_x, m_gamma, m_beta, m_y, a.hidden, epsilon);
    } else if constexpr (A == algorithm::welford) {
      launch_welford<false>(a);
    } else if constexpr (A == algorithm::registers) {
      launch_registers<false>(a);
    } else if constexpr (A == algorithm::add_then_registers) {
      residual_add<<<m_add_grid, add_threads, 0, m_stream>>>(m_x, m_r, m_h, m_rows * m_hidden);
      KSTUDY_CUDA_CHECK(cudaGetLastError());
      a.x = m_h;
      launch_registers<false>(a);
    } else {
      launch_registers<true>(a);
    }
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }

 private:
  std::int64_t m_rows = 0, m_hidden = 0;
  int m_add_grid = 1;
  float *m_x = nullptr, *m_r = nullptr, *m_gamma = nullptr, *m_beta = nullptr, *m_y = nullptr, *m_h = nullptr;
};

// ---------------------------------------------------------------------------------------------------------
// Registration

// Declared with their fields in layernorm_cuda_info.cpp, which every build compiles.
[[maybe_unused]] const int registered = [] {
  using P = layernorm_kind;
  variant_binding<layernorm_cuda<P::plain, algorithm::two_pass>>{"layernorm_cuda_two_pass@cuda"};
  variant_binding<layernorm_cuda<P::plain, algorithm::welford>>{"layernorm_cuda_welford@cuda"};
  variant_binding<layernorm_cuda<P::plain, algorithm::registers>>{"layernorm_cuda_registers@cuda"};
  variant_binding<layernorm_cuda<P::residual, algorithm::add_then_registers>>{"residual_layernorm_cuda_unfused@cuda"};
  variant_binding<layernorm_cuda<P::residual, algorithm::fused_registers>>{"residual_layernorm_cuda_fused@cuda"};
  return 0;
}();

}  // namespace
}  // namespace kstudy::layernorm
