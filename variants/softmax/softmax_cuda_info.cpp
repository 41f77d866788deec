// The declarations of softmax_cuda.cu's variants, compiled in every build (kstudy/support/cuda_registration.hpp):
// a CPU build knows them as not in this build.
#include <string>
#include <utility>

#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"
#include "softmax/softmax.hpp"

namespace kstudy::softmax {
namespace {

void declare_cuda(const std::string& suffix, int rung, bool tunable_block_size, const std::string& description) {
  auto info = cuda_variant(variant_info_for(suffix, "softmax_cuda", description));
  info.rung = rung;
  info.kernels_launched = 1;  // the softmax kernel
  info.tunable_block_size = tunable_block_size;
  variant_declaration{std::move(info)};
}

[[maybe_unused]] const int declared = [] {
  declare_cuda("cuda_three_pass", 1, /*tunable_block_size=*/true,
               "one block per row, three passes over the row in global memory (max, sum of exp, "
               "normalise), scalar coalesced loads, shuffle + shared-memory block reductions");
  declare_cuda("cuda_online", 2, /*tunable_block_size=*/true,
               "one block per row, online max and rescaled sum in one pass ((max, sum) pairs "
               "combined across the block), then the normalising pass: two reads of the row");
  declare_cuda("cuda_registers", 3, /*tunable_block_size=*/false,
               "the row read once into registers by a power-of-two group of 32..1,024 threads (float4 when cols % 4 == "
               "0), up to 32,768 columns; longer rows take the online kernel");
  declare_cuda("cuda_lean", 4, /*tunable_block_size=*/false,
               "rung 3 in at most 32 registers a thread, so twice the rows fit an SM (32-bit offsets in the row), "
               "__expf and one reciprocal per row, float4 on every row of 8 columns or more (a row not 16-byte "
               "aligned peels a scalar head and tail); over 16,384 columns rung 3's kernel");
  return 0;
}();

}  // namespace
}  // namespace kstudy::softmax
