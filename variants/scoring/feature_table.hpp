#pragma once
// The scoring operation's per-feature vectors as Kokkos Views (the table itself is a kstudy/views/table_views.hpp
// View).
#include <Kokkos_Core.hpp>

#include <string>

#include "kstudy/views/table_views.hpp"
#include "scoring/scoring_problem.hpp"

namespace kstudy {

// Per-feature vectors on a memory space, with extents checked against the table.
template <class MemorySpace, class Value = float>
struct feature_vectors {
  Kokkos::View<Value*, MemorySpace> mean, inv_std, weight;
};

template <class MemorySpace>
feature_vectors<MemorySpace> upload_feature_vectors(const scoring_problem& problem) {
  problem.validate();
  feature_vectors<MemorySpace> v;
  const auto upload = [&](const const_float_span& src, const char* label) {
    Kokkos::View<float*, MemorySpace> dst(
        Kokkos::view_alloc(std::string("kstudy::") + label, Kokkos::WithoutInitializing), src.size);
    Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(src.data, src.size);
    Kokkos::deep_copy(dst, host);
    return dst;
  };
  v.mean = upload(problem.mean, "mean");
  v.inv_std = upload(problem.inv_std, "inv_std");
  v.weight = upload(problem.weight, "weight");
  return v;
}

}  // namespace kstudy
