#pragma once
// The families of an operation's CUDA escape-path variants (handwritten CUDA, a vendor library, or the two
// mixed), from the registry: those this build compiled and those it only declares, so a CPU build and a CUDA
// build give the same answer.
#include <set>
#include <string>

#include "kstudy/variant.hpp"

namespace kstudy::test {

inline bool written_without_kokkos(const variant_info& info) {
  return info.implementation == implementation::handwritten_cuda ||
         info.implementation == implementation::vendor_library || info.implementation == implementation::mixed;
}

inline std::set<std::string> escape_families(const std::string& operation) {
  const auto& registry = variant_registry::instance();
  std::set<std::string> out;
  for (const auto* v : registry.of_operation(operation))
    if (written_without_kokkos(v->info)) out.insert(v->info.family);
  for (const auto* info : registry.declared_elsewhere())
    if (info->operation == operation && written_without_kokkos(*info)) out.insert(info->family);
  return out;
}

}  // namespace kstudy::test
