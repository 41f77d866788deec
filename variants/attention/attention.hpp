#pragma once
// Scaled dot-product attention, the kernel lab's last ladder: O = softmax(Q K^T / sqrt(d)) V per head, batch 1,
// no mask. Two operations share this header, one per storage precision:
//
//   attention        Q, K, V, O float32
//   attention_bf16   Q, K, V, O bfloat16 (stored as their 16-bit patterns); products exact in float32,
//                    softmax and accumulation in float32 in every variant, O rounded to bfloat16 once
//
// Axes heads x tokens x head_dim: a shape's rows = heads, features = tokens, depth = head_dim. Each of Q, K,
// V, O is heads x tokens x head_dim, row-major (element (h, t, d) at (h * tokens + t) * head_dim + d), the
// layout of a [B, H, T, D] tensor with B = 1. Only row_major is offered.
//
// Flops are counted as the issue and PyTorch's SDPA benchmarks count them: 4 * heads * tokens^2 * head_dim
// (two matrix products; the softmax's exponentials are not counted). Essential traffic: Q, K, V read once
// and O written once. The textbook variant also writes and reads the tokens x tokens score matrix per head:
// its traffic model says so, and its peak device memory grows with tokens^2 while the fused kernels' does
// not (the runner records each variant's peak device memory).
//
// Kokkos-free, so the handwritten CUDA variants (.cu) include it too.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/support/array_problem.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::attention {

enum class attention_precision { fp32, bf16 };

constexpr const char* operation_name(attention_precision precision) {
  return precision == attention_precision::fp32 ? "attention" : "attention_bf16";
}
constexpr std::int64_t element_bytes(attention_precision precision) {
  return precision == attention_precision::bf16 ? 2 : 4;
}

traffic_model essential_traffic(attention_precision precision, std::int64_t heads, std::int64_t tokens,
                                std::int64_t head_dim);
std::int64_t essential_flops(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim);

// A problem: the shape and the generated Q, K, V. Float32 problems hold float arrays (q(), k(), v());
// bfloat16 ones hold bit patterns (q_bf16(), ...) and nullptr floats.
// Streamed: {Q, K, V}, in the stored precision.
class attention_data final : public array_problem {
 public:
  attention_data(attention_precision precision, const table_shape& shape, std::unique_ptr<float[]> q,
                 std::unique_ptr<float[]> k, std::unique_ptr<float[]> v, std::unique_ptr<std::uint16_t[]> q_bf16,
                 std::unique_ptr<std::uint16_t[]> k_bf16, std::unique_ptr<std::uint16_t[]> v_bf16);
  attention_data(const attention_data&) = delete;  // the accessors point into its own arrays

  attention_precision precision() const { return m_precision; }
  std::int64_t heads() const { return shape().rows; }
  std::int64_t tokens() const { return shape().features; }
  std::int64_t head_dim() const { return shape().depth; }
  std::int64_t elements() const { return heads() * tokens() * head_dim(); }  // of each of Q, K, V, O
  // 1 / sqrt(head_dim), the score scale every variant applies (as a float).
  float scale() const;
  const float* q() const { return m_q; }
  const float* k() const { return m_k; }
  const float* v() const { return m_v; }
  const std::uint16_t* q_bf16() const { return m_q_bf16; }
  const std::uint16_t* k_bf16() const { return m_k_bf16; }
  const std::uint16_t* v_bf16() const { return m_v_bf16; }
  // Element i of Q, K or V as the exact float the computation starts from (bf16 widened).
  float q_at(std::int64_t i) const;
  float k_at(std::int64_t i) const;
  float v_at(std::int64_t i) const;

 private:
  attention_precision m_precision;
  const float *m_q, *m_k, *m_v;
  const std::uint16_t *m_q_bf16, *m_k_bf16, *m_v_bf16;
};

// The problem as an attention_data of the expected precision; throws std::invalid_argument otherwise.
const attention_data& attention_problem(const problem_data& problem, attention_precision expected);

// The one output array, O (operation_info::outputs = {"o"}): float32 for attention, bfloat16 bits for
// attention_bf16, heads x tokens x head_dim row-major.
inline void* o_output(const std::vector<host_span>& outputs) { return outputs.at(0).data; }

// A variant's registration fields: the precision's operation, row-major, the essential traffic as its
// model (the textbook variant replaces info.traffic with its own). Callers set backend, on_device, family,
// implementation, rung, fusion and kernels_launched.
variant_info variant_info_for(attention_precision precision, const std::string& name, const std::string& family,
                              const std::string& description);

}  // namespace kstudy::attention
