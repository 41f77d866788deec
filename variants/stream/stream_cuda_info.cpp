// The declarations of stream_cuda.cu's variants, compiled in every build (kstudy/support/cuda_registration.hpp):
// a CPU build knows them as not in this build.
#include <utility>

#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"
#include "stream/stream.hpp"

namespace kstudy::stream {
namespace {

void declare_handwritten(stream_kind kind, const char* description) {
  auto info = cuda_variant(variant_info_for(kind, "cuda", "stream_cuda", description));
  info.tunable_block_size = true;
  info.kernels_launched = 1;  // stream_elementwise<K>, or stream_dot with its last-block combine
  variant_declaration{std::move(info)};
}

void declare_cublas(stream_kind kind, const char* description) {
  auto info = cuda_variant(variant_info_for(kind, "cublas", "cublas", description), implementation::vendor_library);
  // One cuBLAS call: copy, geam or dot (cuBLAS may split dot internally); geam takes a second for the
  // n % 1024 tail when n is not a multiple of 1024.
  info.kernels_launched = 1;
  variant_declaration{std::move(info)};
}

[[maybe_unused]] const int declared = [] {
  declare_handwritten(stream_kind::copy, "float4 grid-stride copy kernel, one resident wave, own stream");
  declare_handwritten(stream_kind::scale, "float4 grid-stride z = q x kernel, one resident wave, own stream");
  declare_handwritten(stream_kind::add, "float4 grid-stride z = x + y kernel, one resident wave, own stream");
  declare_handwritten(stream_kind::triad, "float4 grid-stride z = x + q y kernel (FMA), one resident wave, own stream");
  declare_handwritten(stream_kind::dot,
                      "float4 loads, float64 per-thread accumulation, shuffle + shared-memory block sums, last block "
                      "adds the partials in order; one kernel, own stream");
  declare_cublas(stream_kind::copy, "cublasScopy_64 on its own stream");
  declare_cublas(stream_kind::scale, "cublasSgeam_64 on 1024-row matrices: z = q x + 0 x (B not needed at beta 0)");
  declare_cublas(stream_kind::add, "cublasSgeam_64 on 1024-row matrices: z = 1 x + 1 y");
  declare_cublas(stream_kind::triad, "cublasSgeam_64 on 1024-row matrices: z = 1 x + q y");
  declare_cublas(stream_kind::dot,
                 "cublasSdot_64, float accumulation, device pointer mode (result stays on the device until download)");
  auto cub =
      cuda_variant(variant_info_for(stream_kind::dot, "cub", "cub",
                                    "cub::DeviceReduce::Sum over a thrust::transform_iterator of float64 products"),
                   implementation::vendor_library);
  cub.kernels_launched = 2;  // CUB's single-tile reduction after its per-block pass (one pass when it fits)
  variant_declaration{std::move(cub)};
  return 0;
}();

}  // namespace
}  // namespace kstudy::stream
