// The declaration of softmax_cudnn.cu's variant, compiled in every build (kstudy/support/cuda_registration.hpp):
// a build without CUDA, or without cudnn.h, knows it as not in this build.
#include <utility>

#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"
#include "softmax/softmax.hpp"

namespace kstudy::softmax {
namespace {

[[maybe_unused]] const int declared = [] {
  auto info = cuda_variant(
      variant_info_for("cudnn", "cudnn",
                       "cudnnSoftmaxForward, CUDNN_SOFTMAX_ACCURATE, MODE_INSTANCE on an rows x cols x 1 x 1 "
                       "NCHW tensor, own stream (libcudnn.so.9 opened at run time)"),
      implementation::vendor_library);
  info.kernels_launched = 1;  // one cuDNN call (its kernel count is cuDNN's choice)
  variant_declaration{std::move(info)};
  return 0;
}();

}  // namespace
}  // namespace kstudy::softmax
