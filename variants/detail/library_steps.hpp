#pragma once
// Building blocks of the library-composed variants: elementwise steps that walk a table in its own
// memory order, the Kokkos Kernels row reduction, and the threshold step.
#include <Kokkos_Core.hpp>
#include <KokkosBlas2_gemv.hpp>

#include <cstdint>
#include <type_traits>

namespace kstudy::detail {

// Calls op(r, f) for every element with consecutive work items on consecutive addresses. The flat
// index is split with 32-bit arithmetic whenever the table allows it: a 64-bit division costs several
// times more instructions per element on a GPU than the element's own work.
template <class ExecutionSpace, class Layout, class Index, class Op>
void for_each_element_indexed(const char* label, const ExecutionSpace& space, Index rows, Index features, const Op& op) {
  Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>> policy(space, 0, rows * features);
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutLeft>) {
    Kokkos::parallel_for(
        label, policy, KOKKOS_LAMBDA(const Index i) {
          const Index f = i / rows;
          op(i - f * rows, f);
        });
  } else {
    Kokkos::parallel_for(
        label, policy, KOKKOS_LAMBDA(const Index i) {
          const Index r = i / features;
          op(r, i - r * features);
        });
  }
}

template <class ExecutionSpace, class Layout, class Op>
void for_each_element(const char* label, const ExecutionSpace& space, std::int64_t rows, std::int64_t features,
                      const Op& op) {
  if (rows * features <= std::int64_t(0x7fffffff))
    for_each_element_indexed<ExecutionSpace, Layout>(label, space, static_cast<std::int32_t>(rows),
                                                     static_cast<std::int32_t>(features), op);
  else
    for_each_element_indexed<ExecutionSpace, Layout>(label, space, rows, features, op);
}

// score = table * ones through KokkosBlas::gemv (cuBLAS where the TPL covers the layout).
template <class ExecutionSpace, class Table, class Vector, class Score>
void row_sums(const ExecutionSpace&, const Table& table, const Vector& ones, const Score& score) {
  KokkosBlas::gemv("N", typename Score::value_type(1), table, ones, typename Score::value_type(0), score);
}

// flag = score > threshold, and the flagged count, in one reduction kernel.
template <class ExecutionSpace, class Score, class Flag>
std::int64_t threshold_step(const char* label, const ExecutionSpace& space, const Score& score, const Flag& flag,
                            typename Score::value_type threshold) {
  std::int64_t flagged = 0;
  Kokkos::parallel_reduce(
      label, Kokkos::RangePolicy<ExecutionSpace>(space, 0, score.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t r, std::int64_t& count) {
        const bool flagged_row = score(r) > threshold;
        flag(r) = flagged_row;
        count += flagged_row;
      },
      flagged);
  return flagged;
}

}  // namespace kstudy::detail
