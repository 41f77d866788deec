#pragma once
// General matrix multiply, the kernel lab's compute-bound ladder: C = A B with A m x k, B k x n, C m x n,
// accumulated in float32. Four operations share this header, one per input precision (what the multiply
// sees), so that each has a gate stated for its own rounding:
//
//   gemm        A, B float32, multiplied in float32 (CUDA cores; cuBLAS SGEMM)
//   gemm_tf32   A, B float32, multiplied as TF32 (10-bit mantissa; tensor cores; cuBLAS TF32 compute)
//   gemm_bf16   A, B bfloat16 (stored as their 16-bit patterns), products exact in float32 (tensor cores)
//   gemm_fp16   A, B IEEE binary16 (stored as their 16-bit patterns), products exact in float32 (tensor cores)
//
// Axes m x n x k: a shape's rows = m, features = n, depth = k. Layouts: row_major (LayoutRight) stores all
// three matrices row-major (A(i, l) at i * k + l), feature_major (LayoutLeft) all three column-major
// (A(i, l) at l * m + i), as BLAS does.
//
// alpha = 1, beta = 0: C is an output only. A beta != 0 makes C an in-out array that every timed trial
// would change (the gate checks one run's output; the trials would compute on their predecessors'); the
// scalars are an epilogue that costs nothing at these sizes, so the ladder times the product itself.
//
// Kokkos-free, so the handwritten CUDA variants (.cu) include it too.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/support/array_problem.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::gemm {

enum class gemm_precision { fp32, tf32, bf16, fp16 };

constexpr const char* operation_name(gemm_precision precision) {
  return precision == gemm_precision::fp32   ? "gemm"
         : precision == gemm_precision::tf32 ? "gemm_tf32"
         : precision == gemm_precision::bf16 ? "gemm_bf16"
                                             : "gemm_fp16";
}
// Whether A and B are stored as 16-bit patterns (bfloat16 or binary16) rather than float32.
constexpr bool stores_16_bit(gemm_precision precision) {
  return precision == gemm_precision::bf16 || precision == gemm_precision::fp16;
}
// Bytes of one stored input element (A and B); C is always float32.
constexpr std::int64_t input_element_bytes(gemm_precision precision) { return stores_16_bit(precision) ? 2 : 4; }

// Minimal traffic of one resident run: A and B read once, C written once.
traffic_model essential_traffic(gemm_precision precision, std::int64_t m, std::int64_t n, std::int64_t k);
// 2 m n k: one multiply and one add per term.
std::int64_t essential_flops(std::int64_t m, std::int64_t n, std::int64_t k);

// A problem: the shape and the generated A and B in the shape's layout. Float32 operations hold float
// arrays (a(), b()); gemm_bf16 and gemm_fp16 hold 16-bit patterns (a_16bit(), b_16bit(); by their format
// a_bf16() or a_fp16(), nullptr for the other) and nullptr floats. Streamed: {A, B}, in the stored precision.
class gemm_data final : public array_problem {
 public:
  gemm_data(gemm_precision precision, const table_shape& shape, std::unique_ptr<float[]> a, std::unique_ptr<float[]> b,
            std::unique_ptr<std::uint16_t[]> a16, std::unique_ptr<std::uint16_t[]> b16);
  gemm_data(const gemm_data&) = delete;  // the accessors point into its own arrays

  gemm_precision precision() const { return m_precision; }
  std::int64_t m() const { return shape().rows; }
  std::int64_t n() const { return shape().features; }
  std::int64_t k() const { return shape().depth; }
  bool row_major() const { return shape().layout == table_layout::row_major; }
  const float* a() const { return m_a; }
  const float* b() const { return m_b; }
  const std::uint16_t* a_16bit() const { return m_a16; }
  const std::uint16_t* b_16bit() const { return m_b16; }
  const std::uint16_t* a_bf16() const { return m_precision == gemm_precision::bf16 ? m_a16 : nullptr; }
  const std::uint16_t* b_bf16() const { return m_precision == gemm_precision::bf16 ? m_b16 : nullptr; }
  const std::uint16_t* a_fp16() const { return m_precision == gemm_precision::fp16 ? m_a16 : nullptr; }
  const std::uint16_t* b_fp16() const { return m_precision == gemm_precision::fp16 ? m_b16 : nullptr; }
  // A(i, l) and B(l, j) as the multiply's exact float inputs (bf16, fp16 widened; fp32 and tf32 as stored).
  float a_at(std::int64_t i, std::int64_t l) const;
  float b_at(std::int64_t l, std::int64_t j) const;

 private:
  gemm_precision m_precision;
  const float *m_a, *m_b;
  const std::uint16_t *m_a16, *m_b16;
};

// The problem as a gemm_data of the expected precision; throws std::invalid_argument for another
// operation's problem or a malformed one, before a variant touches any device memory.
const gemm_data& gemm_problem(const problem_data& problem, gemm_precision expected);

// The one output array, C (operation_info::outputs = {"c"}), float32 in the shape's layout.
inline float* c_output(const std::vector<host_span>& outputs) { return outputs.at(0).as<float>(); }

// A variant's registration fields: the precision's operation, the layout, the essential traffic as its
// model (callers with a different model replace info.traffic). Callers set backend, on_device, family,
// implementation, rung, fusion and kernels_launched.
variant_info variant_info_for(gemm_precision precision, const std::string& name, const std::string& family,
                              const std::string& description, table_layout layout);

}  // namespace kstudy::gemm
