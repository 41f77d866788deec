#pragma once
// The variant_info every variant of the fused_kokkos family starts from (fused_kokkos.cpp's first attempts,
// rung 0; fused_kokkos_tuned.cpp's rung 1): one kernel for the whole operation, the essential traffic.
#include "scoring/scoring_variant.hpp"

namespace kstudy::detail {

// Fusion full and kernels_launched 1 (scoring_variant_info's defaults): standardize, clip, weight, row sum and
// threshold in one kernel.
inline variant_info fused_info(const char* name, table_layout layout, const char* description) {
  return scoring_variant_info(name, "fused_kokkos", description, layout);
}

}  // namespace kstudy::detail
