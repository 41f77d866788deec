#pragma once
// Building blocks of the library-composed variants: elementwise steps that walk a table in its own
// memory order, the Kokkos Kernels row reduction, and the threshold step.
#include <Kokkos_Core.hpp>
#include <KokkosBlas2_gemv.hpp>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "scoring_kokkos_variant.hpp"

namespace kstudy::detail {

// The feature of flat element e of a contiguous table.
template <class Layout, class Index>
struct feature_of_element {
  Index rows, features;
  KOKKOS_INLINE_FUNCTION Index operator()(Index e) const {
    if constexpr (std::is_same_v<Layout, Kokkos::LayoutLeft>)
      return e / rows;
    else
      return e % features;
  }
};

// out(r, f) = fn(in(r, f), f) for every element of two contiguous tables of one layout: an elementwise
// step, walked in memory order.
//
// Device spaces: teams of 256 threads (Kokkos 3.4 would pick 64-thread blocks for a RangePolicy, which
// ran these steps at 0.72 TB/s), each thread loading four elements before it stores any, and one
// resident wave of teams striding over the table. The flat index is split into (row, feature) with
// 32-bit arithmetic when the table allows it.
template <class ExecutionSpace, class Layout, class Index, class Value, class Fn>
void map_elements_indexed(const char* label, const ExecutionSpace& space, Index rows, Index features, const Value* in,
                          Value* out, const Fn& fn) {
  const Index n = rows * features;
  const feature_of_element<Layout, Index> feature_of{rows, features};
  if constexpr (is_host_space_v<ExecutionSpace>) {
    Kokkos::parallel_for(
        label, Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(space, 0, n),
        KOKKOS_LAMBDA(const Index e) { out[e] = fn(in[e], std::int64_t(feature_of(e))); });
  } else {
    constexpr int team_size = 256, per_thread = 4;
    constexpr Index chunk = Index(team_size) * per_thread;
    const Index chunks = (n + chunk - 1) / chunk;
    const int league = static_cast<int>(std::min<std::int64_t>(chunks, resident_teams(space, team_size)));
    using policy_type = Kokkos::TeamPolicy<ExecutionSpace>;
    Kokkos::parallel_for(
        label, light_weight(policy_type(space, league, team_size)),
        KOKKOS_LAMBDA(const typename policy_type::member_type& team) {
          const Index t = team.team_rank();
          for (Index c = team.league_rank(); c < chunks; c += team.league_size()) {
            const Index base = c * chunk + t;
            Value v[per_thread];
            for (int k = 0; k < per_thread; ++k) {
              const Index e = base + Index(k) * team_size;
              v[k] = e < n ? in[e] : Value(0);
            }
            for (int k = 0; k < per_thread; ++k) {
              const Index e = base + Index(k) * team_size;
              if (e < n) out[e] = fn(v[k], std::int64_t(feature_of(e)));
            }
          }
        });
  }
}

template <class ExecutionSpace, class Layout, class Table, class Fn>
void map_elements(const char* label, const ExecutionSpace& space, const Table& in, const Table& out, const Fn& fn) {
  if (!in.span_is_contiguous() || !out.span_is_contiguous() || in.extent(0) != out.extent(0) ||
      in.extent(1) != out.extent(1))
    throw std::invalid_argument(std::string(label) + ": needs two contiguous tables of one shape");
  const std::int64_t rows = in.extent(0), features = in.extent(1);
  if (rows * features <= std::int64_t(0x7fffffff))
    map_elements_indexed<ExecutionSpace, Layout>(label, space, static_cast<std::int32_t>(rows),
                                                 static_cast<std::int32_t>(features), in.data(), out.data(), fn);
  else
    map_elements_indexed<ExecutionSpace, Layout>(label, space, rows, features, in.data(), out.data(), fn);
}

// score = table * ones through KokkosBlas::gemv (cuBLAS where the TPL covers the layout).
template <class ExecutionSpace, class Table, class Vector, class Score>
void row_sums(const ExecutionSpace&, const Table& table, const Vector& ones, const Score& score) {
  KokkosBlas::gemv("N", typename Score::value_type(1), table, ones, typename Score::value_type(0), score);
}

// flag = score > threshold, and the flagged count, in one reduction kernel queued on space, the count
// reduced into the rank-0 view `flagged` (pinned host memory on CUDA: no host fence; read it after
// fencing space). Device spaces use a resident wave of 256-thread teams striding over the rows: Kokkos
// 3.4 caps a RangePolicy reduction's grid at its block size (256 blocks, 0.4 waves on an H200).
template <class ExecutionSpace, class Score, class Flag, class Count>
void threshold_step(const char* label, const ExecutionSpace& space, const Score& score, const Flag& flag,
                    typename Score::value_type threshold, const Count& flagged) {
  static_assert(Kokkos::is_view<Count>::value && Count::rank == 0, "the count goes to a rank-0 view");
  const std::int64_t rows = score.extent(0);
  if constexpr (is_host_space_v<ExecutionSpace>) {
    Kokkos::parallel_reduce(
        label, Kokkos::RangePolicy<ExecutionSpace>(space, 0, rows),
        KOKKOS_LAMBDA(const std::int64_t r, std::int64_t& count) {
          const bool flagged_row = score(r) > threshold;
          flag(r) = flagged_row;
          count += flagged_row;
        },
        flagged);
  } else {
    constexpr int team_size = 256;
    const int league = static_cast<int>(std::max<std::int64_t>(
        1, std::min<std::int64_t>((rows + team_size - 1) / team_size, resident_teams(space, team_size))));
    using policy_type = Kokkos::TeamPolicy<ExecutionSpace>;
    Kokkos::parallel_reduce(
        label, light_weight(policy_type(space, league, team_size)),
        KOKKOS_LAMBDA(const typename policy_type::member_type& team, std::int64_t& count) {
          const std::int64_t step = std::int64_t(team.league_size()) * team.team_size();
          for (std::int64_t r = std::int64_t(team.league_rank()) * team.team_size() + team.team_rank(); r < rows;
               r += step) {
            const bool flagged_row = score(r) > threshold;
            flag(r) = flagged_row;
            count += flagged_row;
          }
        },
        flagged);
  }
}

// A variant composed around the library row sum (composed, partial_fusion): its own elementwise steps write
// m_weighted, then score_weighted() queues score = m_weighted * ones (row_sums) and the threshold step. On the
// default instance (the library call queues on its stream), so never pipelined; every step queues there without
// a host fence, so device events stop right behind the threshold kernel. Its workspace is labelled
// "kstudy::<name>::<what>".
template <class ExecutionSpace, class Layout, class Value>
class gemv_scoring_variant : public queued_scoring_kokkos_variant<ExecutionSpace, Layout, Value> {
  using base = queued_scoring_kokkos_variant<ExecutionSpace, Layout, Value>;

 protected:
  using table_type = typename base::table_type;

  explicit gemv_scoring_variant(const std::string& name)
      : m_name(name), m_threshold_label("kstudy::" + name + "::threshold") {}

  // A workspace table of the problem's shape.
  table_type make_workspace(const char* what) const {
    return make_table<Layout, typename base::memory_space, Value>(label(what), this->m_shape);
  }
  // m_weighted and the ones vector; a variant with more intermediates allocates them after calling this.
  void allocate_workspace() override {
    m_weighted = make_workspace("weighted");
    m_ones = ones_type(label("ones"), this->m_shape.features);
    Kokkos::deep_copy(m_ones, Value(1));
  }
  void score_weighted() {
    row_sums(this->m_space, m_weighted, m_ones, this->m_score);
    threshold_step(m_threshold_label.c_str(), this->m_space, this->m_score, this->m_flag, this->m_threshold,
                   this->m_count_host);
  }

  table_type m_weighted;

 private:
  using ones_type = Kokkos::View<Value*, Layout, typename base::memory_space>;
  std::string label(const char* what) const { return "kstudy::" + m_name + "::" + what; }

  std::string m_name;
  std::string m_threshold_label;  // built once: launch() passes it on every run
  ones_type m_ones;
};

// Registers Variant<Space, Layout> for the feature-major and the row-major table, as <family>_feature_major and
// <family>_row_major, info(name, layout) describing each.
template <template <class, class, class> class Variant, class Space>
void register_both_layouts(const std::string& family, variant_info (*info)(const std::string&, table_layout)) {
  register_kokkos_variant<Variant<Space, Kokkos::LayoutLeft, float>>(
      info(family + "_feature_major", table_layout::feature_major));
  register_kokkos_variant<Variant<Space, Kokkos::LayoutRight, float>>(
      info(family + "_row_major", table_layout::row_major));
}

}  // namespace kstudy::detail
