#pragma once
// LayerNorm over the rows of a row-major float32 matrix, and the fused residual + LayerNorm of the kernel lab:
//
//   layernorm            y = (x - mean) / sqrt(var + eps) * gamma + beta        (per row; biased variance)
//   residual_layernorm   h = x + r,  y = LayerNorm(h)                           (outputs y and h)
//
// Axes rows x hidden; x (and r) are rows x hidden, gamma and beta hold `hidden` floats (parameters: uploaded
// once in prepare, not streamed). residual_layernorm writes h as well as y, as a transformer's pre-norm
// block does (h is the residual stream the next block adds to) and as the kernel lab's design counts it: "a residual
// add followed by LayerNorm costs 5 passes over memory as two kernels and 4 as one" -- the add kernel reads x and r and
// writes h (3 passes), the LayerNorm kernel reads h and writes y (2); one fused kernel reads x and r and writes h and y
// (4). The 5 : 4 pass model is the expected unfused/fused time ratio.
//
// One kind enum parameterises both operations (operation.cpp) and every variant. Kokkos-free, so the
// handwritten CUDA variants (.cu) include it too.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/support/array_problem.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::layernorm {

enum class layernorm_kind { plain, residual };

// The epsilon added to the variance, as PyTorch's F.layer_norm default.
inline constexpr float epsilon = 1e-5f;

constexpr const char* operation_name(layernorm_kind kind) {
  return kind == layernorm_kind::plain ? "layernorm" : "residual_layernorm";
}
constexpr bool has_residual(layernorm_kind kind) { return kind == layernorm_kind::residual; }
// Streamed input matrices: x, or x and r.
constexpr int input_count(layernorm_kind kind) { return has_residual(kind) ? 2 : 1; }
// Output matrices: y, or y and h.
constexpr int output_count(layernorm_kind kind) { return has_residual(kind) ? 2 : 1; }

// Minimal traffic of one resident run: every input matrix read once, every output matrix written once,
// gamma and beta read once.
traffic_model essential_traffic(layernorm_kind kind, std::int64_t rows, std::int64_t hidden);
// Traffic of a kernel sequence that reads the input matrices `matrix_reads` times and writes
// `matrix_writes` matrices of rows x hidden floats (plus gamma and beta once): the variants' models.
traffic_model pass_traffic(std::int64_t rows, std::int64_t hidden, int matrix_reads, int matrix_writes);

// The handwritten CUDA register kernel (layernorm_cuda.cu, rung 3): 128 threads a row, each holding up to
// 16 float4s. Here rather than in the .cu file because its traffic model (layernorm_cuda_info.cpp, every
// build) reads the longest row it holds: longer rows take the Welford kernel, which reads them twice.
inline constexpr int register_threads = 128;
inline constexpr int max_register_vectors = 16;
inline constexpr std::int64_t max_register_hidden = std::int64_t(register_threads) * 4 * max_register_vectors;
// Per element: 1 (sum for the mean) + 3 (subtract, square, accumulate) + 4 (subtract, times rstd, times
// gamma, plus beta); per row 4 (mean and variance divisions, + eps, rsqrt); the residual add 1 per element.
std::int64_t essential_flops(layernorm_kind kind, std::int64_t rows, std::int64_t hidden);

// A problem: the shape and the generated x (r), gamma, beta. Inputs are never NaN or Inf.
// Streamed: {x} or {x, r}; gamma and beta are parameters, not streamed.
class layernorm_data final : public array_problem {
 public:
  layernorm_data(layernorm_kind kind, const table_shape& shape, std::unique_ptr<float[]> x, std::unique_ptr<float[]> r,
                 std::unique_ptr<float[]> gamma, std::unique_ptr<float[]> beta);
  layernorm_data(const layernorm_data&) = delete;  // the accessors point into its own arrays

  layernorm_kind kind() const { return m_kind; }
  std::int64_t rows() const { return shape().rows; }
  std::int64_t hidden() const { return shape().features; }
  std::int64_t elements() const { return rows() * hidden(); }
  const float* x() const { return m_x; }
  const float* r() const { return m_r; }  // nullptr for layernorm
  const float* gamma() const { return m_gamma; }
  const float* beta() const { return m_beta; }

 private:
  layernorm_kind m_kind;
  const float *m_x, *m_r, *m_gamma, *m_beta;
};

// The problem as a layernorm_data of the expected kind; throws std::invalid_argument for another
// operation's problem or a malformed one, before a variant touches any device memory.
const layernorm_data& layernorm_problem(const problem_data& problem, layernorm_kind expected);

// Output arrays, operation_info::outputs order: y, then h (residual_layernorm).
inline float* y_output(const std::vector<host_span>& outputs) { return outputs.at(0).as<float>(); }
inline float* h_output(const std::vector<host_span>& outputs) { return outputs.at(1).as<float>(); }

// A variant's registration fields: the kind's operation, row-major, the given traffic model in passes
// (matrix reads and writes). Callers set backend, on_device, fusion, rung and kernels_launched.
variant_info variant_info_for(layernorm_kind kind, const std::string& name, const std::string& family,
                              const std::string& description, int matrix_reads, int matrix_writes);

}  // namespace kstudy::layernorm
