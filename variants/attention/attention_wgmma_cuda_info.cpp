// The declarations of attention_wgmma_cuda.cu's variants, compiled in every build
// (kstudy/support/cuda_registration.hpp): a build without CUDA or without sm_90a knows them as not in this build.
#include <string>
#include <utility>

#include "attention/attention.hpp"
#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::attention {
namespace {

void declare_wgmma(attention_precision precision, attention_mask mask, int rung) {
  const std::string type = precision == attention_precision::fp16 ? "fp16" : "bf16";
  const std::string name = std::string(operation_name(precision, mask)) + (rung == 5   ? "_wgmma"
                                                                           : rung == 6 ? "_wgmma_pipelined"
                                                                           : rung == 7 ? "_wgmma_pingpong"
                                                                                       : "_wgmma_3wg");
  std::string description =
      "one fused kernel on Hopper's own instructions: a producer warpgroup loads Q once and 128-key K/V tiles by "
      "TMA (cp.async.bulk.tensor.3d, 128-byte swizzle) into a ring of mbarrier stages; two consumer warpgroups of "
      "64 query rows each run S = Q K^T by wgmma.mma_async m64n128k16 from shared memory, the online softmax in "
      "registers (exp2) and O += P V by wgmma with P as the A operand from registers (" +
      type + "), V N-major from shared memory; setmaxnreg 40 / 232; sm_90a";
  if (rung == 8)
    description =
        "rung 6 with three consumer warpgroups at head_dim <= 64: 192 query rows a block (512 threads, setmaxnreg "
        "32 / 160, the Q box 192 rows), so that three warpgroups' softmax and wgmma interleave where the softmax "
        "of a tile takes as long as its products; at head_dim 65-128 (O's 64 and S's 64 accumulators and P's 32 "
        "registers would not fit 160) it runs rung 6's two-consumer kernel unchanged (tuned parameter "
        "consumer_warpgroups says which); " +
        description;
  if (rung == 7)
    description =
        "rung 6 with FlashAttention 3's ping-pong: the two consumer warpgroups take turns (named "
        "barriers) to issue their wgmma, so one's softmax overlaps the other's products; " +
        description;
  if (rung >= 6)
    description =
        "rung 5 with FlashAttention 3's intra-warpgroup pipelining: the scores of K/V tile j are issued "
        "before P V of tile j - 1, and tile j's softmax runs while the tensor cores do that P V; " +
        description;
  if (mask == attention_mask::causal)
    description += "; causal: only the key tiles up to a block's last query, the longest blocks first";
  auto info = cuda_variant(variant_info_for(precision, mask, name, "attention_cuda", description));
  info.rung = rung;
  info.fusion = fusion_level::full;
  info.kernels_launched = 1;  // attention_wgmma_kernel (+ row-padding copies where head_dim % 8 != 0)
  info.needs = {90, /*arch_specific=*/true, "wgmma, TMA, setmaxnreg"};
  variant_declaration{std::move(info)};
}

[[maybe_unused]] const int declared = [] {
  for (const auto precision : {attention_precision::bf16, attention_precision::fp16})
    for (const auto mask : {attention_mask::none, attention_mask::causal})
      for (const int rung : {5, 6, 7, 8}) declare_wgmma(precision, mask, rung);
  return 0;
}();

}  // namespace
}  // namespace kstudy::attention
