// The declarations of attention_cuda.cu's variants, compiled in every build (kstudy/support/cuda_registration.hpp):
// a CPU build knows them as not in this build.
#include <cstdint>
#include <string>
#include <utility>

#include "attention/attention.hpp"
#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::attention {
namespace {

// The textbook's traffic: the essential Q, K, V, O plus the score matrix's round trips: the first GEMM
// writes S (float32), the softmax reads S and writes P (float32 in place; bf16 or fp16 over S), the second
// GEMM reads P. The causal textbook computes and moves the full matrices too (P is 0 above the diagonal).
traffic_model textbook_traffic(attention_precision precision, const table_shape& shape) {
  auto traffic = essential_traffic(precision, shape.rows, shape.features, shape.depth);
  const std::int64_t scores = shape.rows * shape.features * shape.features;
  const std::int64_t p_bytes = precision == attention_precision::fp32 ? 4 : 2;
  traffic.bytes_written += scores * (4 + p_bytes);
  traffic.bytes_read += scores * (4 + p_bytes);
  return traffic;
}

void declare_cuda(attention_precision precision, attention_mask mask, const std::string& name, int rung,
                  fusion_level fusion, int kernels_launched, const std::string& description, bool textbook,
                  gpu_requirement needs = {}) {
  // The textbook's GEMMs are cuBLAS calls around kstudy's softmax kernel: mixed, not handwritten alone.
  auto info = cuda_variant(variant_info_for(precision, mask, name, "attention_cuda", description),
                           textbook ? implementation::mixed : implementation::handwritten_cuda);
  info.rung = rung;
  info.fusion = fusion;
  info.kernels_launched = kernels_launched;
  info.needs = std::move(needs);
  if (textbook) info.traffic = [precision](const table_shape& shape) { return textbook_traffic(precision, shape); };
  variant_declaration{std::move(info)};
}

[[maybe_unused]] const int declared = [] {
  constexpr auto fp32 = attention_precision::fp32;
  constexpr auto bf16 = attention_precision::bf16;
  constexpr auto fp16 = attention_precision::fp16;
  constexpr auto none = attention_mask::none;
  constexpr auto causal = attention_mask::causal;
  // The tensor-core and copy-pipeline rungs (sm_80); the textbooks' cuBLAS calls and rung 2 run on any GPU.
  const gpu_requirement mma{80, false, "mma.sync m16n8k16 on 16-bit inputs"};
  const gpu_requirement copies{80, false, "cp.async"};
  const gpu_requirement mma_and_copies{80, false, "mma.sync m16n8k16 on 16-bit inputs, cp.async"};
  declare_cuda(
      fp32, none, "attention_textbook", 1, fusion_level::none,
      /*kernels_launched=*/3,  // SGEMM S, textbook_softmax, SGEMM O
      "the textbook: S = scale Q K^T by cublasSgemmStridedBatched (heads x tokens^2 float32 in device memory, no "
      "TF32), a block-per-row softmax in place, O = P V by a second strided-batched SGEMM",
      true);
  declare_cuda(
      fp32, none, "attention_fused", 2, fusion_level::full, /*kernels_launched=*/1,  // attention_fused_f32
      "one fused kernel, CUDA cores: 64 query rows per 128-thread block, 64-key K/V tiles in shared memory, "
      "4 x 8 register tiles of S and of O per thread (float4 shared-memory reads), online softmax: no tokens^2 "
      "matrix",
      false);
  declare_cuda(bf16, none, "attention_bf16_textbook", 1, fusion_level::none,
               /*kernels_launched=*/3,  // GemmEx S, textbook_softmax, GemmEx O
               "the textbook in bf16: S = scale Q K^T float32 by cublasGemmStridedBatchedEx (bf16 in, fp32 compute), a "
               "block-per-row softmax writing bf16 P over S, O = P V by a second GemmEx with bf16 output",
               true);
  declare_cuda(
      bf16, none, "attention_bf16_fused", 2, fusion_level::full, /*kernels_launched=*/1,  // attention_fused_bf16
      "one fused kernel on tensor cores: mma.sync m16n8k16 bf16 -> fp32, 16 query rows per warp, 128 per block, "
      "online softmax on the fragments, P re-packed to bf16 in registers, V transposed in shared memory",
      false, mma);
  declare_cuda(fp32, none, "attention_fused_pipelined", 3, fusion_level::full,
               /*kernels_launched=*/1,  // attention_pipelined_f32
               "rung 2 with the K/V copies off the critical path: 16-byte cp.async into three rotating shared-memory "
               "tiles (K of tile j + 1 copied during tile j's math, V of j + 1 during j + 1's scores), no staging "
               "registers; same 4 x 8 register tiles, 3 blocks per SM",
               false, copies);
  declare_cuda(
      bf16, none, "attention_bf16_fused_pipelined", 3, fusion_level::full,
      /*kernels_launched=*/1,  // attention_pipelined_bf16
      "rung 2 with a copy pipeline and ldmatrix: K/V tiles by 16-byte cp.async into a 2-stage shared-memory ring "
      "(tile j + 1 in flight during tile j's math, one barrier per tile), V kept row-major and read with "
      "ldmatrix.x4.trans instead of transposing stores, Q and K fragments by ldmatrix.x4, padded rows",
      false, mma_and_copies);
  declare_cuda(bf16, none, "attention_bf16_fused_autotuned", 4, fusion_level::full,
               /*kernels_launched=*/1,  // chosen candidate
               "rung 3 autotuned: rung 3's kernel and its template over 4 or 8 warps (64 or 128 query rows per block, "
               "4 or 2 blocks per SM) and a 2- or 3-stage cp.async K/V ring, each timed in prepare() on the prepared "
               "problem (CUDA events, fastest of 1 warm-up + 2 launches); tuned_parameters() reports the choice",
               false, mma_and_copies);
  declare_cuda(fp16, none, "attention_fp16_textbook", 1, fusion_level::none,
               /*kernels_launched=*/3,  // GemmEx S, textbook_softmax, GemmEx O
               "the textbook in fp16: S = scale Q K^T float32 by cublasGemmStridedBatchedEx (CUDA_R_16F in, fp32 "
               "compute), a block-per-row softmax writing fp16 P over S, O = P V by a second GemmEx with fp16 output",
               true);
  declare_cuda(
      fp16, none, "attention_fp16_fused", 2, fusion_level::full,
      /*kernels_launched=*/1,  // attention_fused_bf16<DMAX, true>
      "attention_bf16_fused's kernel in fp16: mma.sync m16n8k16 f16 -> fp32, 16 query rows per warp, 128 per "
      "block, online softmax on the fragments, P re-packed to fp16 in registers, V transposed in shared memory",
      false, mma);
  declare_cuda(fp16, none, "attention_fp16_fused_pipelined", 3, fusion_level::full,
               /*kernels_launched=*/1,  // attention_pipelined_bf16<DMAX, true>
               "attention_bf16_fused_pipelined's kernel in fp16 (mma.sync f16 -> fp32, fp16 P): 2-stage cp.async K/V "
               "ring, ldmatrix.x4 Q and K fragments, V row-major read by ldmatrix.x4.trans",
               false, mma_and_copies);
  declare_cuda(fp32, causal, "attention_causal_textbook", 1, fusion_level::none,
               /*kernels_launched=*/3,  // SGEMM S, textbook_softmax (causal), SGEMM O
               "the float32 textbook with the causal mask: both SGEMMs over the full tokens^2 (no work skipped), the "
               "softmax's max and sum over keys j <= t and P = 0 beyond",
               true);
  declare_cuda(bf16, causal, "attention_bf16_causal_textbook", 1, fusion_level::none,
               /*kernels_launched=*/3,  // GemmEx S, textbook_softmax (causal), GemmEx O
               "the bf16 textbook with the causal mask: both GemmEx over the full tokens^2 (no work skipped), the "
               "softmax's max and sum over keys j <= t and bf16 P = 0 beyond",
               true);
  declare_cuda(fp16, causal, "attention_fp16_causal_textbook", 1, fusion_level::none,
               /*kernels_launched=*/3,  // GemmEx S, textbook_softmax (causal), GemmEx O
               "the fp16 textbook with the causal mask: both GemmEx (CUDA_R_16F) over the full tokens^2 (no work "
               "skipped), the softmax's max and sum over keys j <= t and fp16 P = 0 beyond",
               true);
  return 0;
}();

}  // namespace
}  // namespace kstudy::attention
