// The declarations of transpose_cuda.cu's variants, compiled in every build (kstudy/support/cuda_registration.hpp):
// a CPU build knows them as not in this build.
#include <string>

#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"
#include "transpose/transpose.hpp"

namespace kstudy::transpose {
namespace {

void declare_cuda(const std::string& suffix, const std::string& family, const std::string& description, int rung) {
  auto info = cuda_variant(variant_info_for(suffix, family, description),
                           family == "cublas" ? implementation::vendor_library : implementation::handwritten_cuda);
  info.rung = rung;
  info.kernels_launched = 1;  // one kernel (or one cuBLAS call)
  variant_declaration{std::move(info)};
}

[[maybe_unused]] const int declared = [] {
  declare_cuda("naive", "transpose_cuda", "one element per thread, 32 x 8 blocks: coalesced reads, strided writes", 1);
  declare_cuda("tiled", "transpose_cuda",
               "32 x 32 shared-memory tile [32][32]: coalesced both ways, 32-way bank conflicts", 2);
  declare_cuda("padded", "transpose_cuda", "32 x 32 shared-memory tile padded to [32][33]: no bank conflicts", 3);
  declare_cuda("tile64_vector", "transpose_cuda",
               "64 x 64 tile [64][65], 256 threads x 16 elements, float4/float2 loads and stores where cols/rows allow",
               4);
  declare_cuda("cublas", "cublas", "cublasSgeam_64, C = A^T (column-major: A cols x rows, C rows x cols), beta 0", 0);
  return 0;
}();

}  // namespace
}  // namespace kstudy::transpose
