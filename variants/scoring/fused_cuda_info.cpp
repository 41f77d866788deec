// The declarations of fused_cuda.cu's variants, compiled in every build (kstudy/support/cuda_registration.hpp):
// a CPU build knows them as not in this build.
#include <utility>

#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"
#include "scoring/scoring_variant.hpp"

namespace kstudy {
namespace {

// kernels_launched 1: the whole operation, the count reduced by the last block.
variant_info cuda_info(const char* name, const char* description, table_layout layout, int rung = 0,
                       const char* family = "fused_cuda", int kernels_launched = 1) {
  auto info = scoring_variant_info(name, family, description, layout);
  info.rung = rung;
  info.kernels_launched = kernels_launched;
  info.tunable_block_size = true;
  return cuda_variant(std::move(info));
}

[[maybe_unused]] const int declared = [] {
  variant_declaration{cuda_info("fused_cuda_row_major",
                                "handwritten CUDA, one thread per row: the seed's strided row-major reads",
                                table_layout::row_major)};
  // Rung 2, after plain_cuda_feature_major: resident-wave grid, loads in flight, quads.
  variant_declaration{cuda_info("fused_cuda_feature_major",
                                "handwritten CUDA, one resident wave striding over the rows, eight loads in flight "
                                "per thread (four rows per thread with 16-byte loads where rows allow)",
                                table_layout::feature_major, 2)};
  variant_declaration{cuda_info("fused_cuda_padded", "handwritten CUDA, one thread per row over a padded row pitch",
                                table_layout::padded_row_major)};
  // The feature-major ladder's first rung, the seed's kernel as written: two kernels, the rows, then
  // kstudy_count_flags (the flagged count, to the host).
  variant_declaration{cuda_info("plain_cuda_feature_major",
                                "the seed's plain kernel: one thread per row, ceil(rows / block) blocks, a loop over "
                                "the features",
                                table_layout::feature_major, 1, "plain_cuda", 2)};
  // A reference beside the ladder's first rung, not a rung of its own: the rows, then kstudy_count_flags.
  variant_declaration{cuda_info("plain_minimal_cuda_feature_major",
                                "plain_cuda_feature_major's kernel as a user writes it: individual __restrict__ "
                                "arguments, int indices; the same grid, carveout and flag-count kernel",
                                table_layout::feature_major, 0, "plain_cuda", 2)};
  variant_declaration{
      cuda_info("fused_cuda_row_major_tiled",
                "handwritten CUDA, coalesced tile copy of whole rows to shared memory, then a thread (or warp) per row",
                table_layout::row_major)};
  return 0;
}();

}  // namespace
}  // namespace kstudy
