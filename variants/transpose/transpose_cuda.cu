// transpose in plain CUDA: the seed's ladder, one change per rung, and the vendor baseline. x is row-major
// rows x cols, t row-major cols x rows; every kernel handles any shape (edge tiles are guarded, vector
// widths are chosen so no vector straddles a row end).
//  1 transpose_naive      one element per thread, blocks of 32 x 8 threads: reads of x coalesced (a warp
//                         takes 32 consecutive columns of one row), writes to t strided by rows (each
//                         thread of a warp writes its own row of t: 32 sectors per store).
//  2 transpose_tiled      32 x 32 tiles staged in shared memory [32][32], 32 x 8 threads each moving 4
//                         elements: both global sides coalesced, but the column reads of the tile hit one
//                         bank 32 times (32-way bank conflicts).
//  3 transpose_padded     as 2 with the tile padded to [32][33]: a column walks all 32 banks.
//  4 transpose_tile64_vector
//                         64 x 64 tiles [64][65], 256 threads each moving 16 elements with V-wide loads of
//                         x and W-wide stores of t (V, W in {4, 2, 1}: the widest dividing cols, rows, so
//                         every vector is aligned and inside its row). A warp covers 32/V vectors of V rows
//                         (and 32/W of W rows on the way out), which keeps the scalar shared-memory accesses
//                         of both phases conflict-free with the 65-float pitch.
//  transpose_cublas       cublasSgeam_64: in column-major terms x is A (cols x rows, lda = cols) and t is C
//                         (rows x cols, ldc = rows), so C = 1 * op(A) + 0 * B with op = T. B is x again
//                         (valid, finite memory of the right size) at beta 0, which cuBLAS need not read.
// Grids over tile rows are capped at 65,535 blocks in y and stride beyond it. Every variant queues on its own
// non-blocking stream, so CUDA events around enqueue_run() time only its kernel.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant.hpp"
#include "transpose/transpose.hpp"
#include "kstudy/support/cublas_check.hpp"
#include "detail/cuda_arrays.hpp"

namespace kstudy::transpose {
namespace {

using kstudy::detail::occupancy_of;

constexpr std::int64_t max_grid_y = 65535;
constexpr std::int64_t max_grid_x = 2147483647;

// ---------------------------------------------------------------------------------------------------------
// Kernels

// Rung 1: blockDim (32, 8); thread (tx, ty) of block (bx, by) moves x(r, c), r = by * 8 + ty (striding by
// gridDim.y * 8), c = bx * 32 + tx.
__global__ void transpose_naive_kernel(const float* __restrict__ x, float* __restrict__ t, std::int64_t rows,
                                       std::int64_t cols) {
  const std::int64_t c = std::int64_t(blockIdx.x) * 32 + threadIdx.x;
  if (c >= cols) return;
  for (std::int64_t r = std::int64_t(blockIdx.y) * 8 + threadIdx.y; r < rows; r += std::int64_t(gridDim.y) * 8)
    t[c * rows + r] = x[r * cols + c];
}

// Rungs 2 and 3: a 32 x 32 tile of pitch P (32: conflicts, 33: none), blockDim (32, 8), 4 rows per thread.
template <int P>
__global__ void transpose_tile32_kernel(const float* __restrict__ x, float* __restrict__ t, std::int64_t rows,
                                        std::int64_t cols) {
  __shared__ float tile[32][P];
  const std::int64_t c0 = std::int64_t(blockIdx.x) * 32;
  for (std::int64_t r0 = std::int64_t(blockIdx.y) * 32; r0 < rows; r0 += std::int64_t(gridDim.y) * 32) {
    const std::int64_t c = c0 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
      const std::int64_t r = r0 + j;
      if (r < rows && c < cols) tile[j][threadIdx.x] = x[r * cols + c];
    }
    __syncthreads();
    // Thread (tx, ty) writes t(c0 + j, r0 + tx): a warp writes 32 consecutive floats of one row of t and
    // reads one column of the tile.
    const std::int64_t r = r0 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
      const std::int64_t cc = c0 + j;
      if (r < rows && cc < cols) t[cc * rows + r] = tile[threadIdx.x][j];
    }
    __syncthreads();  // the tile is reused by the next tile row
  }
}

template <int V>
struct vec;
template <>
struct vec<1> {
  using type = float;
};
template <>
struct vec<2> {
  using type = float2;
};
template <>
struct vec<4> {
  using type = float4;
};

template <int V>
__device__ __forceinline__ float lane_of(const typename vec<V>::type& v, int k) {
  if constexpr (V == 1) {
    (void)k;
    return v;
  } else {
    return reinterpret_cast<const float*>(&v)[k];
  }
}
template <int V>
__device__ __forceinline__ void set_lane(typename vec<V>::type& v, int k, float value) {
  if constexpr (V == 1) {
    (void)k;
    v = value;
  } else {
    reinterpret_cast<float*>(&v)[k] = value;
  }
}

constexpr int tile64 = 64, tile64_threads = 256;

// Rung 4: a 64 x 64 tile [64][65]; V divides cols, W divides rows. Loads: lane l of a warp takes vector
// l % (32/V) of tile row (l / (32/V)) in its warp's V rows; stores likewise over t's rows with W. Every
// thread moves 16 elements per phase.
template <int V, int W>
__global__ void __launch_bounds__(tile64_threads)
    transpose_tile64_kernel(const float* __restrict__ x, float* __restrict__ t, std::int64_t rows, std::int64_t cols) {
  __shared__ float tile[tile64][tile64 + 1];
  using load_t = typename vec<V>::type;
  using store_t = typename vec<W>::type;
  constexpr int load_lanes = 32 / V, load_rows = tile64_threads / load_lanes;     // per pass: 8V rows
  constexpr int store_lanes = 32 / W, store_rows = tile64_threads / store_lanes;  // per pass: 8W rows of t
  const int lane_v = threadIdx.x % load_lanes, row_v = threadIdx.x / load_lanes;
  const int lane_w = threadIdx.x % store_lanes, row_w = threadIdx.x / store_lanes;
  const std::int64_t c0 = std::int64_t(blockIdx.x) * tile64;
  for (std::int64_t r0 = std::int64_t(blockIdx.y) * tile64; r0 < rows; r0 += std::int64_t(gridDim.y) * tile64) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int tc = V * (lane_v + half * load_lanes);  // first tile column of this thread's vector
      const std::int64_t c = c0 + tc;
#pragma unroll
      for (int tr = row_v; tr < tile64; tr += load_rows) {
        const std::int64_t r = r0 + tr;
        if (r < rows && c < cols) {  // V divides cols: the whole vector is in the row
          const load_t v = *reinterpret_cast<const load_t*>(x + r * cols + c);
#pragma unroll
          for (int k = 0; k < V; ++k) tile[tr][tc + k] = lane_of<V>(v, k);
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int tr = W * (lane_w + half * store_lanes);  // first tile row = first column of t's vector
      const std::int64_t r = r0 + tr;
#pragma unroll
      for (int tc = row_w; tc < tile64; tc += store_rows) {
        const std::int64_t c = c0 + tc;
        if (r < rows && c < cols) {  // W divides rows: the whole vector is in t's row
          store_t v;
#pragma unroll
          for (int k = 0; k < W; ++k) set_lane<W>(v, k, tile[tr + k][tc]);
          *reinterpret_cast<store_t*>(t + c * rows + r) = v;
        }
      }
    }
    __syncthreads();  // the tile is reused by the next tile row
  }
}

// ---------------------------------------------------------------------------------------------------------
// Buffers and transfers

// x and t on the variant's own stream; a variant implements enqueue_run() (and plan() for its setup).
class transpose_cuda_base : public kstudy::detail::cuda_buffers_variant<> {
 public:
  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = transpose_problem(problem);
    reset_arrays("transpose", options);
    m_rows = data.rows();
    m_cols = data.cols();
    m_x = input_array<float>(data.elements());
    m_t = output_array<float>(data.elements());
    plan();
    upload(data.streamed_inputs());
  }

 protected:
  virtual void plan() {}
  // A grid of ceil(cols / tile_cols) x min(ceil(rows / tile_rows), 65,535) blocks.
  dim3 grid(std::int64_t tile_rows, std::int64_t tile_cols) const {
    const std::int64_t gx = (m_cols + tile_cols - 1) / tile_cols;
    if (gx > max_grid_x) throw std::invalid_argument("transpose: too many columns for one grid");
    const std::int64_t gy = std::min<std::int64_t>(max_grid_y, (m_rows + tile_rows - 1) / tile_rows);
    return dim3(static_cast<unsigned int>(gx), static_cast<unsigned int>(gy), 1);
  }

  std::int64_t m_rows = 0, m_cols = 0;
  float *m_x = nullptr, *m_t = nullptr;
};

// ---------------------------------------------------------------------------------------------------------
// The rungs

class transpose_naive final : public transpose_cuda_base {
 public:
  void enqueue_run() override {
    transpose_naive_kernel<<<grid(8, 32), dim3(32, 8), 0, m_stream>>>(m_x, m_t, m_rows, m_cols);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  double calculated_occupancy() const override { return occupancy_of(transpose_naive_kernel, 256); }
};

template <int P>
class transpose_tile32 final : public transpose_cuda_base {
 public:
  void enqueue_run() override {
    transpose_tile32_kernel<P><<<grid(32, 32), dim3(32, 8), 0, m_stream>>>(m_x, m_t, m_rows, m_cols);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  double calculated_occupancy() const override { return occupancy_of(transpose_tile32_kernel<P>, 256); }
};

// The widest of 4, 2, 1 dividing n.
int vector_width(std::int64_t n) { return n % 4 == 0 ? 4 : (n % 2 == 0 ? 2 : 1); }

class transpose_tile64_vector final : public transpose_cuda_base {
 public:
  void enqueue_run() override {
    launch_with_load_width();
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  double calculated_occupancy() const override { return occupancy_of(transpose_tile64_kernel<4, 4>, tile64_threads); }

 private:
  template <int V, int W>
  void launch() {
    transpose_tile64_kernel<V, W><<<grid(tile64, tile64), tile64_threads, 0, m_stream>>>(m_x, m_t, m_rows, m_cols);
  }
  template <int V>
  void launch_with_store_width() {
    switch (vector_width(m_rows)) {
      case 4:
        return launch<V, 4>();
      case 2:
        return launch<V, 2>();
      default:
        return launch<V, 1>();
    }
  }
  void launch_with_load_width() {
    switch (vector_width(m_cols)) {
      case 4:
        return launch_with_store_width<4>();
      case 2:
        return launch_with_store_width<2>();
      default:
        return launch_with_store_width<1>();
    }
  }
};

class transpose_cublas final : public transpose_cuda_base {
 public:
  ~transpose_cublas() override {
    if (m_handle != nullptr) cublasDestroy(m_handle);
  }
  void enqueue_run() override {
    const float alpha = 1.0f, beta = 0.0f;
    KSTUDY_CUBLAS_CHECK(cublasSgeam_64(m_handle, CUBLAS_OP_T, CUBLAS_OP_N, m_rows, m_cols, &alpha, m_x, m_cols, &beta,
                                       m_x, m_rows, m_t, m_rows));
  }

 protected:
  void plan() override {
    if (m_handle == nullptr) KSTUDY_CUBLAS_CHECK(cublasCreate(&m_handle));
    KSTUDY_CUBLAS_CHECK(cublasSetStream(m_handle, m_stream));
    KSTUDY_CUBLAS_CHECK(cublasSetPointerMode(m_handle, CUBLAS_POINTER_MODE_HOST));
  }

 private:
  cublasHandle_t m_handle = nullptr;
};

// ---------------------------------------------------------------------------------------------------------
// Registration

// Declared with their fields in transpose_cuda_info.cpp, which every build compiles.
[[maybe_unused]] const int registered = [] {
  variant_binding<transpose_naive>{"transpose_naive@cuda"};
  variant_binding<transpose_tile32<32>>{"transpose_tiled@cuda"};
  variant_binding<transpose_tile32<33>>{"transpose_padded@cuda"};
  variant_binding<transpose_tile64_vector>{"transpose_tile64_vector@cuda"};
  variant_binding<transpose_cublas>{"transpose_cublas@cuda"};
  return 0;
}();

}  // namespace
}  // namespace kstudy::transpose
