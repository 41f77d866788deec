#pragma once
// Planning and launching the row kernels of kokkos_rows.hpp, and the host path's row loops, as the tuned
// Kokkos rungs that use them (softmax_kokkos_tuned, layernorm_kokkos_tuned) run them: on a device the plan's
// kernel over a TeamPolicy with the kernels' LaunchBounds (its rows mapped onto the team by run_team_rows), on
// a host one row per index of a RangePolicy, each row's sums taken in SIMD lanes over short chunks folded into
// a double.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "detail/kokkos_rows.hpp"
#include "kstudy/support/kokkos_support.hpp"

namespace kstudy::detail::rows {

// The plan for rows x cols floats launched over Policy (a TeamPolicy): on a device vector_length_max()
// lanes a thread (a warp on CUDA) and at most max_threads threads a team (the kernels' LaunchBounds); on a
// host one thread of one lane.
template <class Policy>
plan plan_launch(std::int64_t rows, std::int64_t cols, bool vec4, int max_threads, int lane_floats) {
  int vector_length = 1, max_team_size = 1;
  if constexpr (!is_host_space_v<typename Policy::execution_space>) {
    vector_length = Policy::vector_length_max();
    max_team_size = std::max(1, max_threads / vector_length);
  }
  return plan_rows(rows, cols, vec4, vector_length, max_team_size, lane_floats);
}

// A plan's kernel on its team: with vector_rows a row per team thread (the league's last team may have
// fewer rows than threads), with team_rows the team's row, each kernel.resident_row(member, row); with
// team_rows_streamed kernel.streamed_row(member, row).
template <shape Shape, class Member, class Kernel>
KOKKOS_FORCEINLINE_FUNCTION void run_team_rows(const Member& member, const std::int64_t row_count,
                                               const Kernel& kernel) {
  if constexpr (Shape == shape::vector_rows) {
    const std::int64_t first = std::int64_t(member.league_rank()) * member.team_size();
    const std::int64_t left = row_count - first;
    const int count = left < member.team_size() ? static_cast<int>(left) : member.team_size();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(member, count),
                         [&](const int i) { kernel.resident_row(member, first + i); });
  } else if constexpr (Shape == shape::team_rows) {
    kernel.resident_row(member, member.league_rank());
  } else {
    kernel.streamed_row(member, member.league_rank());
  }
}

// The planned team must launch: the kernels' LaunchBounds cap their registers so that max_threads always
// fit; this says so, in `name`, if a compiler or a Kokkos version disagrees. make(shape_c, vec_c, items_c)
// returns the plan's kernel (dispatch's arguments).
template <class Policy, int TeamFloats, class ExecutionSpace, class Make>
void check_team_size(const ExecutionSpace& space, const plan& p, const std::string& name, const Make& make) {
  dispatch<true, TeamFloats>(p, [&](auto shape_c, auto vec_c, auto items_c) {
    const Policy probe(space, 1, 1, p.vector_length);
    const int limit = probe.team_size_max(make(shape_c, vec_c, items_c), Kokkos::ParallelForTag());
    if (limit < p.team_size)
      throw std::runtime_error(name + ": a team of " + std::to_string(p.team_size) +
                               " threads does not launch (at most " + std::to_string(limit) + ")");
  });
}

// Launches the plan's kernel, make(shape_c, vec_c, items_c), over Policy on `space`, labelled `label` and
// the shape's name.
template <class Policy, int TeamFloats, class ExecutionSpace, class Make>
void launch_plan(const ExecutionSpace& space, const plan& p, const std::string& label, const Make& make) {
  dispatch<true, TeamFloats>(p, [&](auto shape_c, auto vec_c, auto items_c) {
    const Policy policy(space, static_cast<int>(p.league), p.team_size, p.vector_length);
    Kokkos::parallel_for(label + shape_name(p.shape), policy, make(shape_c, vec_c, items_c));
  });
}

// Runs row_functor(row) for rows [0, rows) of a host space, in contiguous blocks per thread (a static
// schedule: each core streams its own part of the matrix).
template <class ExecutionSpace, class RowFunctor>
void launch_host_rows(const ExecutionSpace& space, std::int64_t rows, const std::string& label,
                      const RowFunctor& row_functor) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(space, 0, rows),
                       row_functor);
}

// Floats per partial sum of a host row (16 terms a lane of an AVX-512 vector, 64 of an SSE one: a short
// sequential chunk, then a tree).
constexpr std::int64_t host_fold = 256;

// The sum of term(i) over i in [0, n) (term returns a float and may write element i on the way), in SIMD
// lanes over host_fold terms at a time, each partial folded into a double: no float total of a whole row
// swamps the small terms next to outliers.
template <class Term>
inline double folded_sum(const std::int64_t n, const Term& term) {
  double sum = 0.0;
  for (std::int64_t start = 0; start < n; start += host_fold) {
    const std::int64_t end = start + host_fold < n ? start + host_fold : n;
    float chunk = 0.0f;
#pragma omp simd reduction(+ : chunk)
    for (std::int64_t i = start; i < end; ++i) chunk += term(i);
    sum += chunk;
  }
  return sum;
}

}  // namespace kstudy::detail::rows
