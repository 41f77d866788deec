#pragma once
// Scaled dot-product attention, the kernel lab's last ladder: O = softmax(Q K^T / sqrt(d) + M) V per head,
// batch 1. One operation per storage precision and mask:
//
//   attention               Q, K, V, O float32, no mask
//   attention_bf16          Q, K, V, O bfloat16 (stored as their 16-bit patterns); products exact in float32,
//                           softmax and accumulation in float32 in every variant, O rounded to bfloat16 once
//   attention_fp16          the same with IEEE binary16 (fp16) storage
//   attention_bf16_causal   attention_bf16 with the causal mask
//   attention_fp16_causal   attention_fp16 with the causal mask
//   attention_causal        attention (float32) with the causal mask
//
// The causal mask is PyTorch's is_causal=True with tokens_q == tokens_k (top-left aligned): query t attends
// keys j <= t only (M_tj = -inf for j > t), so row 0 is V's row 0 and every row has at least one key.
//
// Axes heads x tokens x head_dim: a shape's rows = heads, features = tokens, depth = head_dim. Each of Q, K,
// V, O is heads x tokens x head_dim, row-major (element (h, t, d) at (h * tokens + t) * head_dim + d), the
// layout of a [B, H, T, D] tensor with B = 1. Only row_major is offered.
//
// Flops are counted as PyTorch's SDPA and FlashAttention's benchmarks count them: 4 * heads * tokens^2 *
// head_dim without a mask (two matrix products; the softmax's exponentials are not counted). With the causal
// mask exactly half of that, 2 * heads * tokens^2 * head_dim, for every T, odd T included: FlashAttention 3's
// benchmark (benchmarks/benchmark_attn.py, flops()) counts seqlen_q * avg_seqlen with avg_seqlen = seqlen_k / 2
// when seqlen_q == seqlen_k, i.e. T^2 / 2 pairs, not the T (T + 1) / 2 actually computed; the study compares
// against its numbers, so it counts the same (the diagonal's T pairs, 2 / T of the work, are not counted).
// Essential traffic: Q, K, V read once and O written once, with or without the mask. The textbook variant also
// writes and reads the tokens x tokens score matrix per head: its traffic model says so, and its peak device
// memory grows with tokens^2 while the fused kernels' does not (the runner records each variant's peak device
// memory).
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

enum class attention_precision { fp32, bf16, fp16 };
enum class attention_mask { none, causal };

constexpr const char* operation_name(attention_precision precision, attention_mask mask = attention_mask::none) {
  if (mask == attention_mask::none)
    return precision == attention_precision::fp32   ? "attention"
           : precision == attention_precision::bf16 ? "attention_bf16"
                                                    : "attention_fp16";
  return precision == attention_precision::fp32   ? "attention_causal"
         : precision == attention_precision::bf16 ? "attention_bf16_causal"
                                                  : "attention_fp16_causal";
}
constexpr std::int64_t element_bytes(attention_precision precision) {
  return precision == attention_precision::fp32 ? 4 : 2;
}

traffic_model essential_traffic(attention_precision precision, std::int64_t heads, std::int64_t tokens,
                                std::int64_t head_dim);
// 4 H T^2 D without a mask, 2 H T^2 D (exactly half, FlashAttention's count) with the causal one.
std::int64_t essential_flops(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim, attention_mask mask);

// A problem: the shape, the mask and the generated Q, K, V. Float32 problems hold float arrays (q(), k(), v())
// and nullptr bits; bfloat16 and fp16 ones hold 16-bit patterns (q_bits(), ...) and nullptr floats.
// Streamed: {Q, K, V}, in the stored precision.
class attention_data final : public array_problem {
 public:
  attention_data(attention_precision precision, attention_mask mask, const table_shape& shape,
                 std::unique_ptr<float[]> q, std::unique_ptr<float[]> k, std::unique_ptr<float[]> v,
                 std::unique_ptr<std::uint16_t[]> q_bits, std::unique_ptr<std::uint16_t[]> k_bits,
                 std::unique_ptr<std::uint16_t[]> v_bits);
  attention_data(const attention_data&) = delete;  // the accessors point into its own arrays

  attention_precision precision() const { return m_precision; }
  attention_mask mask() const { return m_mask; }
  bool causal() const { return m_mask == attention_mask::causal; }
  std::int64_t heads() const { return shape().rows; }
  std::int64_t tokens() const { return shape().features; }
  std::int64_t head_dim() const { return shape().depth; }
  std::int64_t elements() const { return heads() * tokens() * head_dim(); }  // of each of Q, K, V, O
  // 1 / sqrt(head_dim), the score scale every variant applies (as a float).
  float scale() const;
  const float* q() const { return m_q; }
  const float* k() const { return m_k; }
  const float* v() const { return m_v; }
  // bfloat16 or fp16 bit patterns (as precision() says); nullptr for float32.
  const std::uint16_t* q_bits() const { return m_q_bits; }
  const std::uint16_t* k_bits() const { return m_k_bits; }
  const std::uint16_t* v_bits() const { return m_v_bits; }
  // Element i of Q, K or V as the exact float the computation starts from (bf16 or fp16 widened).
  float q_at(std::int64_t i) const;
  float k_at(std::int64_t i) const;
  float v_at(std::int64_t i) const;

 private:
  attention_precision m_precision;
  attention_mask m_mask;
  const float *m_q, *m_k, *m_v;
  const std::uint16_t *m_q_bits, *m_k_bits, *m_v_bits;
};

// The problem as an attention_data of the expected precision and mask; throws std::invalid_argument otherwise.
const attention_data& attention_problem(const problem_data& problem, attention_precision expected,
                                        attention_mask expected_mask);

// The one output array, O (operation_info::outputs = {"o"}): float32 for the float32 operations, bfloat16 or
// fp16 bits for the others, heads x tokens x head_dim row-major.
inline void* o_output(const std::vector<host_span>& outputs) { return outputs.at(0).data; }

// A variant's registration fields: the operation of the precision and mask, row-major, the essential traffic
// as its model (the textbook variant replaces info.traffic with its own). Callers set backend, on_device,
// family, implementation, rung, fusion and kernels_launched.
variant_info variant_info_for(attention_precision precision, attention_mask mask, const std::string& name,
                              const std::string& family, const std::string& description);

}  // namespace kstudy::attention
