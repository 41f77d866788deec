// Softmax over rows in plain CUDA: the seed's ladder, one change per rung (family softmax_cuda).
//  1 softmax_cuda_three_pass: one block per row (256 threads unless block_size says otherwise), three passes
//    over the row in global memory: the max, the sum of exp(x - max), the normalised outputs. Scalar,
//    coalesced loads; block reductions with warp shuffles and shared memory.
//  2 softmax_cuda_online: the same blocks, the max and the sum in one pass (a running max per thread, its sum
//    rescaled by exp(old - new) when the max grows; the block combines the (max, sum) pairs), then the
//    normalising pass: two reads of the row instead of three.
//  3 softmax_cuda_registers: the row read from DRAM once, into registers: a group of T threads per row
//    (T a power of two in [32, 1024]: 128 cols -> 32, a warp, eight rows per 256-thread block; 1,024 -> 64;
//    4,096 -> 256; 16,384 -> 1,024), float4 loads when cols % 4 == 0 (rows are then 16-byte aligned),
//    scalar otherwise, each thread holding ITEMS of them (a template parameter: 1 to 8 float4, or 1 to 32
//    floats). Rows of up to 32,768 columns fit (1,024 threads x 8 float4); longer rows take rung 2's kernel
//    (1,024 threads per row).
//  4 softmax_cuda_lean: rung 3 in at most 32 registers a thread (twice the rows per SM), 32-bit offsets in the
//    row, __expf and one reciprocal per row, and float4 loads on rows whose length is not a multiple of 4 (Peel:
//    a scalar head and tail around an aligned body); rows of more than 16 floats a thread (over 16,384 columns)
//    take rung 3's kernel, peeled as well.
// Every variant queues on its own non-blocking stream; run() is enqueue_run() and a synchronisation.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant.hpp"
#include "softmax/softmax.hpp"
#include "detail/cuda_arrays.hpp"

namespace kstudy::softmax {
namespace {

constexpr int default_block_size = 256;
constexpr std::int64_t max_grid = std::int64_t(1) << 30;  // blocks; more rows are strided over

// ---------------------------------------------------------------------------------------------------------
// Reductions over a group of consecutive threads: a warp (32) or several whole warps of one block.

struct max_op {
  static __device__ __forceinline__ float identity() { return -INFINITY; }
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct sum_op {
  static __device__ __forceinline__ float identity() { return 0.0f; }
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

template <class Op>
__device__ __forceinline__ float warp_all_reduce(float v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The reduction of v over the group of `group_warps` warps this thread's warp belongs to, on every thread
// of the group. Every thread of the block calls it (it synchronises the block when groups span warps);
// `slots` holds 32 floats and may be reused by the next call.
template <class Op>
__device__ float group_all_reduce(float v, Op op, float* slots, int group_warps) {
  v = warp_all_reduce(v, op);
  if (group_warps == 1) return v;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // the previous call's readers are done with the slots
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  const int first = warp - warp % group_warps;
  return warp_all_reduce(lane < group_warps ? slots[first + lane] : Op::identity(), op);
}

// (m, s) <- the pair for the union of two partial rows: s is a sum of exp(x - m). An empty partial has
// m = -inf and s = 0.
__device__ __forceinline__ void combine(float& m, float& s, float other_m, float other_s) {
  const float both = fmaxf(m, other_m);
  if (both == -INFINITY) return;
  s = (m == -INFINITY ? 0.0f : s * expf(m - both)) + (other_m == -INFINITY ? 0.0f : other_s * expf(other_m - both));
  m = both;
}

// The block's combined (m, s), on every thread. blockDim.x is a multiple of 32.
__device__ void block_combine(float& m, float& s, float* slots_m, float* slots_s) {
  for (int offset = 16; offset > 0; offset /= 2)
    combine(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
  const int warps = blockDim.x >> 5;
  if (warps == 1) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) {
    slots_m[warp] = m;
    slots_s[warp] = s;
  }
  __syncthreads();
  m = lane < warps ? slots_m[lane] : -INFINITY;
  s = lane < warps ? slots_s[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2)
    combine(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
}

// ---------------------------------------------------------------------------------------------------------
// Kernels

// Rung 1: three passes over the row in global memory, one block per row.
__global__ void __launch_bounds__(1024)
    softmax_three_pass(const float* __restrict__ x, float* __restrict__ y, std::int64_t rows, std::int64_t cols) {
  __shared__ float slots[32];
  const int warps = blockDim.x >> 5;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float m = -INFINITY;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = group_all_reduce(m, max_op{}, slots, warps);
    float s = 0.0f;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
    s = group_all_reduce(s, sum_op{}, slots, warps);
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) / s;
  }
}

// Rung 2: the max and the sum in one online pass, then the normalising pass.
__global__ void __launch_bounds__(1024)
    softmax_online(const float* __restrict__ x, float* __restrict__ y, std::int64_t rows, std::int64_t cols) {
  __shared__ float slots_m[32], slots_s[32];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float m = -INFINITY, s = 0.0f;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = xr[c];
      if (v > m) {
        s = s * expf(m - v) + 1.0f;  // expf(-inf) = 0 on the first element
        m = v;
      } else {
        s += expf(v - m);
      }
    }
    block_combine(m, s, slots_m, slots_s);
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) / s;
  }
}

template <int VEC>
struct vector_of;
template <>
struct vector_of<4> {
  using type = float4;
  static __device__ __forceinline__ void load(const float4* p, std::int64_t i, float (&v)[4]) {
    const float4 q = p[i];
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
  }
  static __device__ __forceinline__ void store(float4* p, std::int64_t i, const float (&v)[4]) {
    p[i] = make_float4(v[0], v[1], v[2], v[3]);
  }
};
template <>
struct vector_of<1> {
  using type = float;
  static __device__ __forceinline__ void load(const float* p, std::int64_t i, float (&v)[1]) { v[0] = p[i]; }
  static __device__ __forceinline__ void store(float* p, std::int64_t i, const float (&v)[1]) { p[i] = v[0]; }
};

// Rungs 3 and 4: groups of `group` threads per row (a power of two, 32..1,024), the row in registers: ITEMS
// vectors of VEC floats per thread, vector i of the thread at lane t is the row's vector t + i * group.
// Rung 4 (Lean) is rung 3 made light enough for twice the rows per SM. Rung 3 at 16 floats a thread takes 45
// registers: one 1,024-thread block per SM at 16,384 columns, two 512-thread blocks at 8,192, five 256-thread
// blocks at 4,096 (half the SM's threads), so an SM holds one or two rows and idles while they reduce. Lean caps
// a thread at 32 registers (__launch_bounds__(1024, 2): two 1,024-thread blocks, four of 512, eight of 256: every
// thread slot filled), which 32-bit offsets within the row make room for; its exp is __expf (ex2.approx of
// (x - max) log2(e), two instructions where expf takes about ten) and each row takes one reciprocal where rung 3
// divides every element (the gate's bound covers both: operation.cpp).
// (A minimum of 0 blocks is no minimum: rung 3 compiles as it did before rung 4 joined it, 45 registers at 16
// float4s, where a minimum of 1 gives it 56.) Two 1,024-thread blocks fill an SM of 2,048 thread slots (compute
// capability 7.0, 8.0, 9.0, 10.x); an SM of 1,024 (7.5) or 1,536 (8.6, 8.7, 8.9, 12.x) cannot hold two, ptxas
// would ignore the request with a warning, so there Lean asks for no minimum: the cheaper exp and division only,
// its occupancy measured nowhere yet.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 750 || __CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 870 || \
                               __CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1200)
constexpr int lean_min_blocks = 0;
#else
constexpr int lean_min_blocks = 2;
#endif
// Peel (rung 4 on rows whose length is not a multiple of 4): a row then starts 0-3 floats past a 16-byte boundary
// (rows are cols floats apart, the buffers 256-byte aligned), so it is read as a head of up to 3 floats to that
// boundary, a float4 body and a tail of up to 3: lanes 0 .. head + tail - 1 of the group hold one of those
// scalars each beside their share of the body. Without it such rows take one float per load.
template <bool Lean, int VEC, int ITEMS, bool Peel = false>
__global__ void __launch_bounds__(1024, Lean ? lean_min_blocks : 0)
    softmax_registers(const float* __restrict__ x, float* __restrict__ y, std::int64_t rows, std::int64_t cols,
                      int group) {
  static_assert(!Peel || VEC == 4, "only float4 rows peel");
  using access = vector_of<VEC>;
  using vec_t = typename access::type;
  using offset_t = std::conditional_t<Lean, int, std::int64_t>;  // a vector's offset within the row
  __shared__ float slots[32];
  const int groups = blockDim.x / group, group_warps = group >> 5;
  const int lane = threadIdx.x % group, which = threadIdx.x / group;
  const offset_t row_vectors = static_cast<offset_t>(cols / VEC);  // without Peel cols % VEC == 0
  // The loop's bounds depend on the block alone: every thread reaches every group_all_reduce.
  for (std::int64_t first = std::int64_t(blockIdx.x) * groups; first < rows;
       first += std::int64_t(gridDim.x) * groups) {
    const std::int64_t row = first + which;
    const bool active = row < rows;
    // Without Peel these are constants (head 0, no tail) and the code is what it was before Peel (same PTX).
    const std::int64_t start = (active ? row : 0) * cols;
    const int head = Peel ? int(min(std::int64_t((4 - (start & 3)) & 3), cols)) : 0;
    const offset_t vectors = Peel ? static_cast<offset_t>((cols - head) / VEC) : row_vectors;
    const int tail = Peel ? int(cols - head - std::int64_t(vectors) * VEC) : 0;
    const auto* xr = reinterpret_cast<const vec_t*>(Peel ? x + start + head : x + (active ? row : 0) * cols);
    // This lane's scalar of the head or the tail, where it has one: its index in the row, else -1.
    const std::int64_t edge = !Peel || lane >= head + tail ? -1
                              : lane < head                ? lane
                                                           : head + std::int64_t(vectors) * VEC + (lane - head);
    float e = active && edge >= 0 ? x[start + edge] : -INFINITY;
    float v[ITEMS][VEC];
    float m = Peel ? e : -INFINITY;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const offset_t k = lane + offset_t(i) * group;
      if (active && k < vectors) {
        access::load(xr, k, v[i]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) v[i][j] = -INFINITY;
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) m = fmaxf(m, v[i][j]);
    }
    m = group_all_reduce(m, max_op{}, slots, group_warps);
    float s = 0.0f;
    if (active) {
      // The edge scalar's exp joins the sum and is not kept: its output is recomputed from x below, which frees
      // the register that rows of 16 floats a thread would otherwise spill (ptxas -v, sm_90: 16 bytes kept, 8
      // recomputed).
      if (Peel) s = Lean ? __expf(e - m) : expf(e - m);  // 0 for a lane without one (-inf)
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          v[i][j] = Lean ? __expf(v[i][j] - m) : expf(v[i][j] - m);  // 0 for the padding's -inf
          s += v[i][j];
        }
    }
    s = group_all_reduce(s, sum_op{}, slots, group_warps);
    if (!active) continue;
    const float r = 1.0f / s;  // Lean's one division per row
    if (Peel && edge >= 0) y[start + edge] = Lean ? __expf(x[start + edge] - m) * r : expf(x[start + edge] - m) / s;
    auto* yr = reinterpret_cast<vec_t*>(Peel ? y + start + head : y + row * cols);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const offset_t k = lane + offset_t(i) * group;
      if (k >= vectors) break;
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[i][j] = Lean ? v[i][j] * r : v[i][j] / s;
      access::store(yr, k, v[i]);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Buffers and transfers shared by the rungs

// x and y on the variant's own stream; a rung implements plan() (after allocation) and enqueue_run().
class softmax_cuda_base : public kstudy::detail::cuda_buffers_variant<> {
 public:
  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = softmax_problem(problem);
    check_options(options);
    reset_arrays("softmax", options);
    m_rows = data.rows();
    m_cols = data.cols();
    m_x = input_array<float>(m_rows * m_cols);
    m_y = output_array<float>(m_rows * m_cols);
    plan(options);
    upload(data.streamed_inputs());
  }

  double calculated_occupancy() const override {
    if (m_kernel == nullptr) return 0.0;
    int blocks = 0;
    KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, m_kernel, m_block, 0));
    return double(blocks * m_block) / double(device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor));
  }

 protected:
  virtual void check_options(const run_options& options) const {
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
  }
  virtual void plan(const run_options& options) = 0;

  std::int64_t m_rows = 0, m_cols = 0;
  float *m_x = nullptr, *m_y = nullptr;
  const void* m_kernel = nullptr;  // the kernel the plan launches, for the occupancy
  int m_block = default_block_size;
  int m_grid = 1;
};

// Rungs 1 and 2: one block per row, block_size threads (a multiple of 32 in [32, 1024]; default 256).
template <bool Online>
class softmax_block_per_row final : public softmax_cuda_base {
 public:
  void enqueue_run() override {
    if constexpr (Online)
      softmax_online<<<m_grid, m_block, 0, m_stream>>>(m_x, m_y, m_rows, m_cols);
    else
      softmax_three_pass<<<m_grid, m_block, 0, m_stream>>>(m_x, m_y, m_rows, m_cols);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }

 protected:
  void check_options(const run_options& options) const override {
    kstudy::detail::warp_multiple_block(options, default_block_size);
  }
  void plan(const run_options& options) override {
    m_block = kstudy::detail::warp_multiple_block(options, default_block_size);
    m_grid = static_cast<int>(std::min(m_rows, max_grid));
    m_kernel =
        Online ? reinterpret_cast<const void*>(softmax_online) : reinterpret_cast<const void*>(softmax_three_pass);
  }
};

// Rungs 3 and 4: the register-resident row (Lean: rung 4's kernel for rows of up to 16 floats a thread, 4
// when the row is scalar; rung 3's beyond), or rung 2's kernel for rows of more than 32,768 columns.
template <bool Lean>
class softmax_registers_variant final : public softmax_cuda_base {
 public:
  void enqueue_run() override {
    if (m_launch == nullptr)
      softmax_online<<<m_grid, m_block, 0, m_stream>>>(m_x, m_y, m_rows, m_cols);
    else
      m_launch(m_grid, m_block, m_stream, m_x, m_y, m_rows, m_cols, m_group);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }

 protected:
  using launcher = void (*)(int, int, cudaStream_t, const float*, float*, std::int64_t, std::int64_t, int);

  template <int VEC, int ITEMS, bool L, bool Peel>
  static void launch(int grid, int block, cudaStream_t stream, const float* x, float* y, std::int64_t rows,
                     std::int64_t cols, int group) {
    softmax_registers<L, VEC, ITEMS, Peel><<<grid, block, 0, stream>>>(x, y, rows, cols, group);
  }

  // The kernel for `items` vectors per thread: ITEMS, or a power of two up to MAX_ITEMS (8 float4, 32 floats:
  // a register-resident row of at most 32 floats a thread); none (m_launch stays null) past MAX_ITEMS. Rung
  // 4's kernel holds at most 16 floats a thread (4 scalar) in its 32 registers; rung 3's takes longer rows.
  template <int VEC, int MAX_ITEMS, bool Peel = false, int ITEMS = 1>
  void choose(std::int64_t items) {
    if (items == ITEMS) {
      // Scalar rows (columns not a multiple of 4) spill under Lean's 32-register cap past 4 floats a thread
      // (ptxas -v, sm_90: 36 bytes at 8, 24 at 16), so from there they take rung 3's kernel too. Peeled rows
      // stay lean up to 16 floats a thread with 8 bytes of spill (two registers stored and loaded once a row,
      // in L1) where rung 3's peeled kernel takes 64 registers: one row per SM at 16,383 columns.
      constexpr bool lean = Lean && ITEMS * VEC <= (VEC == 4 ? 16 : 4);
      m_launch = &launch<VEC, ITEMS, lean, Peel>;
      m_kernel = reinterpret_cast<const void*>(softmax_registers<lean, VEC, ITEMS, Peel>);
    } else if constexpr (ITEMS < MAX_ITEMS) {
      choose<VEC, MAX_ITEMS, Peel, ITEMS * 2>(items);
    }
  }

  // The group: the smallest power of two from 32 whose threads hold the row with 16 floats each (or 1,024);
  // ITEMS: the smallest power of two of vectors per thread that covers the row.
  void plan(const run_options&) override {
    // Rung 4 reads every row of at least 8 floats as float4s, peeling a misaligned row's head and tail (Peel);
    // rung 3 reads rows whose length is not a multiple of 4 a float at a time.
    const bool peel = Lean && m_cols % 4 != 0 && m_cols >= 8;
    const int vec = m_cols % 4 == 0 || peel ? 4 : 1;
    m_group = 32;
    while (m_group < 1024 && std::int64_t(m_group) * 16 < m_cols) m_group *= 2;
    const std::int64_t vectors = m_cols / vec;
    const std::int64_t needed = (vectors + m_group - 1) / m_group;
    std::int64_t items = 1;
    while (items < needed) items *= 2;
    m_launch = nullptr;
    if (peel)
      choose<4, 8, true>(items);
    else if (vec == 4)
      choose<4, 8>(items);
    else
      choose<1, 32>(items);
    if (m_launch == nullptr) {  // too long for registers: rung 2's kernel, a block of 1,024 per row
      m_block = 1024;
      m_grid = static_cast<int>(std::min(m_rows, max_grid));
      m_kernel = reinterpret_cast<const void*>(softmax_online);
      return;
    }
    m_block = std::max(m_group, default_block_size);
    const std::int64_t rows_per_block = m_block / m_group;
    m_grid = static_cast<int>(std::min((m_rows + rows_per_block - 1) / rows_per_block, max_grid));
  }

 private:
  launcher m_launch = nullptr;
  int m_group = 32;
};

// ---------------------------------------------------------------------------------------------------------
// Registration

// Declared with their fields in softmax_cuda_info.cpp, which every build compiles.
[[maybe_unused]] const int registered = [] {
  variant_binding<softmax_block_per_row<false>>{"softmax_cuda_three_pass@cuda"};
  variant_binding<softmax_block_per_row<true>>{"softmax_cuda_online@cuda"};
  variant_binding<softmax_registers_variant<false>>{"softmax_cuda_registers@cuda"};
  variant_binding<softmax_registers_variant<true>>{"softmax_cuda_lean@cuda"};
  return 0;
}();

}  // namespace
}  // namespace kstudy::softmax
