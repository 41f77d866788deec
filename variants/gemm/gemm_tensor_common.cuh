// What the tensor-core GEMM variants share (gemm_tensor_cuda.cu's WMMA / mma.sync ladder and
// gemm_wgmma_cuda.cu's Hopper rungs): the stored precisions, the A / B / C buffers on the variant's own
// stream, and the guarded accumulator-pair store. CUDA sources only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemm/gemm.hpp"
#include "detail/cuda_arrays.hpp"
#include "kstudy/support/cuda_arch.hpp"
#include "kstudy/support/cuda_buffers.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::gemm::tensor {

using kstudy::detail::occupancy_of;
namespace wmma = nvcuda::wmma;

constexpr std::int64_t max_grid_y = 65535;
constexpr std::int64_t max_grid_x = 2147483647;

// ---------------------------------------------------------------------------------------------------------
// Precisions: what the host stores and uploads (storage), what wmma loads (element), the fragment shape.

template <gemm_precision P>
struct tc_traits;

template <>
struct tc_traits<gemm_precision::tf32> {
  using storage = float;
  using element = float;
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)
  using fragment_precision = wmma::precision::tf32;
#else
  using fragment_precision = float;  // no TF32 wmma before sm_80: the kernels that use it are traps there
#endif
  static constexpr int frag_k = 8;  // m16n16k8
  static constexpr int vector = 4;  // elements per 16 bytes
  static constexpr int stages = 2;  // rung 2: double buffering
};

template <>
struct tc_traits<gemm_precision::bf16> {
  using storage = std::uint16_t;  // bf16 bit patterns; 0 is +0.0
  using element = __nv_bfloat16;
  using fragment_precision = __nv_bfloat16;
  static constexpr int frag_k = 16;  // m16n16k16
  static constexpr int vector = 8;
  static constexpr int stages = 4;  // rung 2: 3 tiles in flight while one multiplies
};

// gemm_fp16 runs only the cuBLAS and wgmma rungs, which read storage, vector and (through the pipelines) nothing
// else; element and fragment_precision complete the set as for BF16.
template <>
struct tc_traits<gemm_precision::fp16> {
  using storage = std::uint16_t;  // binary16 bit patterns; 0 is +0.0
  using element = __half;
  using fragment_precision = __half;
  static constexpr int frag_k = 16;
  static constexpr int vector = 8;
  static constexpr int stages = 4;
};

// C(row, col) and C(row, col + 1) from an accumulator pair, guarded; one 8-byte store where n is even (the
// pair then lies in one row, 8-byte aligned, as col is even).
__device__ __forceinline__ void store_pair(float* __restrict__ c, std::int64_t m, std::int64_t n, std::int64_t row,
                                           std::int64_t col, float x, float y, bool even_n) {
  if (row >= m) return;
  if (even_n && col + 1 < n) {
    *reinterpret_cast<float2*>(c + row * n + col) = make_float2(x, y);
  } else {
    if (col < n) c[row * n + col] = x;
    if (col + 1 < n) c[row * n + col + 1] = y;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Buffers and transfers

// A, B (stored precision) and C (float32) on the variant's own stream; a variant implements enqueue_run()
// (and plan() for its setup). Handwritten variants take row-major problems only.
template <gemm_precision P>
class gemm_tc_base : public kstudy::detail::cuda_buffers_variant<> {
 public:
  using storage = typename tc_traits<P>::storage;

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = gemm_problem(problem, P);
    if (data.shape().layout != layout())
      throw std::invalid_argument(std::string(operation_name(P)) + ": this variant takes " +
                                  std::string(to_string(layout())) + " problems only");
    reset_arrays(std::string(operation_name(P)), options);
    m_m = data.m();
    m_n = data.n();
    m_k = data.k();
    m_row_major = data.row_major();
    m_a = input_array<storage>(m_m * m_k);
    m_b = input_array<storage>(m_k * m_n);
    m_c = output_array<float>(m_m * m_n);
    plan();
    upload(data.streamed_inputs());
  }

 protected:
  virtual void plan() {}
  // The layout the variant is registered for (its problems must come in it).
  virtual table_layout layout() const { return table_layout::row_major; }
  bool empty() const { return m_m == 0 || m_n == 0; }
  // Whole 16-byte vectors per row of A and B (k and n multiples of the vector), and C's rows a multiple of
  // 4 floats (wmma's store rule).
  bool vector_ab() const { return m_k % tc_traits<P>::vector == 0 && m_n % tc_traits<P>::vector == 0; }
  bool vector_c() const { return m_n % 4 == 0; }
  // ceil(n / tile_cols) x min(ceil(m / tile_rows), limit_y) blocks; kernels that do not stride over rows
  // pass limit_y = 65,535 and need every row tile in the grid.
  dim3 grid(std::int64_t tile_rows, std::int64_t tile_cols, bool strides_rows) const {
    const std::int64_t gx = (m_n + tile_cols - 1) / tile_cols;
    const std::int64_t gy_needed = (m_m + tile_rows - 1) / tile_rows;
    if (gx > max_grid_x || (!strides_rows && gy_needed > max_grid_y))
      throw std::invalid_argument(std::string(operation_name(P)) + ": too large a matrix for one grid");
    const std::int64_t gy = gy_needed < max_grid_y ? gy_needed : max_grid_y;
    return dim3(static_cast<unsigned int>(gx), static_cast<unsigned int>(gy), 1);
  }
  const storage* a() const { return m_a; }
  const storage* b() const { return m_b; }

  std::int64_t m_m = 0, m_n = 0, m_k = 0;
  bool m_row_major = true;
  storage *m_a = nullptr, *m_b = nullptr;
  float* m_c = nullptr;
};

}  // namespace kstudy::gemm::tensor
