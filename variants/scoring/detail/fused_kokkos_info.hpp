#pragma once
// The variant_info every variant of the fused_kokkos family starts from (fused_kokkos.cpp's first attempts,
// rung 0; fused_kokkos_tuned.cpp's rung 1): one kernel for the whole operation, the essential traffic.
#include "scoring/scoring_variant.hpp"

namespace kstudy::detail {

inline variant_info fused_info(const char* name, table_layout layout, const char* description) {
  variant_info info;
  info.name = name;
  info.operation = scoring_operation_name;
  info.family = "fused_kokkos";
  info.fusion = fusion_level::full;
  info.description = description;
  info.layout = layout;
  info.kernels_launched = 1;  // standardize, clip, weight, row sum and threshold in one kernel
  info.traffic = scoring_essential_traffic;
  return info;
}

}  // namespace kstudy::detail
