// The declarations of reduce_cuda.cu's variants, compiled in every build (kstudy/support/cuda_registration.hpp):
// a CPU build knows them as not in this build.
#include <string>
#include <utility>

#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"
#include "reduce/reduce_sum.hpp"

namespace kstudy::reduce {
namespace {

void declare_cuda(const std::string& suffix, const std::string& family, int rung, int kernels_launched,
                  const std::string& description) {
  auto info = cuda_variant(variant_info_for(suffix, family, description),
                           family == "cub" ? implementation::vendor_library : implementation::handwritten_cuda);
  info.rung = rung;
  info.kernels_launched = kernels_launched;
  variant_declaration{std::move(info)};
}

[[maybe_unused]] const int declared = [] {
  declare_cuda("atomic", "reduce_cuda", 1, /*kernels_launched=*/1,  // sum_atomic (after a 4-byte memset of s)
               "one thread per element, atomicAdd on one float64 address");
  declare_cuda("block_tree", "reduce_cuda", 2, /*kernels_launched=*/1,  // sum_block_tree (after a 4-byte memset)
               "grid-stride register accumulation, shared-memory tree per block, one atomicAdd per block");
  declare_cuda("warp_shuffle", "reduce_cuda", 3, /*kernels_launched=*/1,  // sum_warp_shuffle (after a memset)
               "grid-stride register accumulation, warp shuffles then shared warp sums, one atomicAdd per block");
  declare_cuda("float4_wave", "reduce_cuda", 4, /*kernels_launched=*/2,  // partials, final
               "float4 loads (4 in flight per thread), one resident wave, per-block partials summed in order by a "
               "second kernel: deterministic, no atomics");
  // CUB's per-block pass and single-tile pass (one when the input fits a tile).
  declare_cuda("cub", "cub", 0, /*kernels_launched=*/2,
               "cub::DeviceReduce::Sum, float accumulation, temporary storage from prepare");
  return 0;
}();

}  // namespace
}  // namespace kstudy::reduce
