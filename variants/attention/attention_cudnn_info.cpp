// The declarations of attention_cudnn.cu's variants, compiled in every build (kstudy/support/cuda_registration.hpp):
// a CPU build knows them as not in this build. They share the attention_cuda family with the handwritten
// kernels, as the vendor rung of that ladder (rung 0, like gemm's cuBLAS rungs).
#include <string>
#include <utility>

#include "attention/attention.hpp"
#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::attention {
namespace {

void declare_cudnn(attention_precision precision, attention_mask mask) {
  const std::string op = operation_name(precision, mask);
  const char* type = precision == attention_precision::bf16 ? "CUDNN_DATA_BFLOAT16" : "CUDNN_DATA_HALF";
  const std::string masking =
      mask == attention_mask::causal ? ", causal mask as GEN_INDEX rows >= columns and BINARY_SELECT with -inf" : "";
  auto info = cuda_variant(
      variant_info_for(precision, mask, op + "_cudnn", "attention_cuda",
                       "cuDNN's fused flash attention (backend graph API, inference): bmm1 Q K^T, scale" + masking +
                           ", softmax as max / sub / exp / sum / div, bmm2 P V; " + type +
                           " Q, K, V, O, float32 compute; engine from cuDNN's heuristics (mode A, then fallback), "
                           "head_dim zero-padded to a multiple of 8 (at most 256); libcudnn.so.9 opened at run time"),
      implementation::vendor_library);
  info.rung = 0;  // a vendor library, not a ladder rung
  info.fusion = fusion_level::full;
  info.kernels_launched = 1;  // one cudnnBackendExecute (its kernel count is cuDNN's choice: one fused kernel)
  variant_declaration{std::move(info)};
}

[[maybe_unused]] const int declared = [] {
  for (const auto precision : {attention_precision::bf16, attention_precision::fp16})
    for (const auto mask : {attention_mask::none, attention_mask::causal}) declare_cudnn(precision, mask);
  return 0;
}();

}  // namespace
}  // namespace kstudy::attention
