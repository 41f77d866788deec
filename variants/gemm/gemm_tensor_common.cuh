// What the tensor-core GEMM variants share (gemm_tensor_cuda.cu's WMMA / mma.sync ladder and
// gemm_wgmma_cuda.cu's Hopper rungs): the stored precisions, the A / B / C buffers on the variant's own
// stream, and the guarded accumulator-pair store. CUDA sources only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemm/gemm.hpp"
#include "kstudy/support/cuda_buffers.hpp"
#include "kstudy/support/cuda_variant.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::gemm::tensor {

using kstudy::detail::device_alloc;
using kstudy::detail::device_attribute;
using kstudy::detail::device_free;
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
  using fragment_precision = wmma::precision::tf32;
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
class gemm_tc_base : public kstudy::detail::cuda_stream_variant<> {
 public:
  using storage = typename tc_traits<P>::storage;

  ~gemm_tc_base() override {
    device_free(m_a);
    device_free(m_b);
    device_free(m_c);
  }

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = gemm_problem(problem, P);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    if (data.shape().layout != layout())
      throw std::invalid_argument(std::string(operation_name(P)) + ": this variant takes " +
                                  std::string(to_string(layout())) + " problems only");
    device_free(m_a);
    device_free(m_b);
    device_free(m_c);
    create_stream();
    m_m = data.m();
    m_n = data.n();
    m_k = data.k();
    m_row_major = data.row_major();
    device_alloc(m_a, m_m * m_k);
    device_alloc(m_b, m_k * m_n);
    device_alloc(m_c, m_m * m_n);
    plan();
    upload(data.streamed_inputs());
  }

  void poison() override {
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_c, 0xFF, c_bytes(), m_stream));  // all-ones bytes: a NaN
    wait();
  }

  void enqueue_upload(const std::vector<host_span>& inputs) override {
    const std::size_t a_bytes = static_cast<std::size_t>(m_m * m_k) * sizeof(storage);
    const std::size_t b_bytes = static_cast<std::size_t>(m_k * m_n) * sizeof(storage);
    if (inputs.size() != 2 || inputs[0].bytes < std::int64_t(a_bytes) || inputs[1].bytes < std::int64_t(b_bytes))
      throw std::invalid_argument(std::string(operation_name(P)) + ": expected the input arrays A and B");
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_a, inputs[0].data, a_bytes, cudaMemcpyHostToDevice, m_stream));
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_b, inputs[1].data, b_bytes, cudaMemcpyHostToDevice, m_stream));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(c_output(outputs), m_c, c_bytes(), cudaMemcpyDeviceToHost, m_stream));
  }

 protected:
  virtual void plan() {}
  // The layout the variant is registered for (its problems must come in it).
  virtual table_layout layout() const { return table_layout::row_major; }
  std::size_t c_bytes() const { return static_cast<std::size_t>(m_m * m_n) * sizeof(float); }
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

template <class Kernel>
double occupancy_of(Kernel kernel, int threads, std::size_t dynamic_shared_bytes) {
  int blocks = 0;
  KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic_shared_bytes));
  return double(blocks * (threads / 32)) / double(device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor) / 32);
}

}  // namespace kstudy::gemm::tensor
