#pragma once
// The attribution pass: which step of a multi-kernel variant costs what. Kokkos' profiling callbacks
// bracket every labelled kernel; the device is synchronised at each boundary, so the pass is never
// mixed with timed trials. Time outside any Kokkos kernel (library calls such as cuBLAS through Kokkos
// Kernels, transfers) is reported as "(outside Kokkos kernels)".
#include <vector>

#include "kstudy/records.hpp"
#include "kstudy/variant.hpp"

namespace kstudy {

// Runs the (prepared) variant `runs` times under the callbacks; seconds and calls are per run.
std::vector<attribution_record> attribute_kernels(variant& variant, const std::string& experiment,
                                                  const std::string& variant_id, const table_shape& shape, int runs);

}  // namespace kstudy
