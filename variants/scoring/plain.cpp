// plain_kokkos_feature_major: the seed's plain feature-major kernel in Kokkos, the baseline every
// optimisation of the scoring operation must beat. A RangePolicy with one row per work item and
// a plain loop over the features: no tiling, no unrolling, no hand-sized grid. On a GPU a warp reads 32
// adjacent rows of one feature at each step (coalesced, LayoutLeft); on host spaces each thread walks its
// rows feature by feature, a stride of `rows` floats per step -- the naive mapping, kept as it is.
#include <Kokkos_Core.hpp>

#include <cstdint>

#include "detail/scoring_kokkos_variant.hpp"

namespace kstudy {
namespace {

using detail::clamp_nan_through;
using detail::write_row;

template <class ExecutionSpace, class Value = float>
class plain_kokkos final : public detail::queued_scoring_kokkos_variant<ExecutionSpace, Kokkos::LayoutLeft, Value> {
  using base = detail::queued_scoring_kokkos_variant<ExecutionSpace, Kokkos::LayoutLeft, Value>;

 public:
  plain_kokkos() : base(/*own_stream=*/true) {}
  bool queues_asynchronously() const override { return !is_host_space_v<ExecutionSpace>; }

  // Public: CUDA extended lambdas may not live in private or protected member functions.
  void launch() override {
    const auto x = this->m_x;
    const auto mean = this->m_vectors.mean, inv_std = this->m_vectors.inv_std, weight = this->m_vectors.weight;
    const auto score = this->m_score;
    const auto flag = this->m_flag;
    const Value clip = this->m_clip, threshold = this->m_threshold;
    const std::int64_t features = this->m_shape.features;
    Kokkos::parallel_reduce(
        "kstudy::plain_kokkos<feature_major>",
        Kokkos::RangePolicy<ExecutionSpace>(this->m_space, 0, this->m_shape.rows),
        KOKKOS_LAMBDA(const std::int64_t r, std::int64_t& count) {
          Value sum = 0;
          for (std::int64_t f = 0; f < features; ++f)
            sum += clamp_nan_through((x(r, f) - mean(f)) * inv_std(f), clip) * weight(f);
          write_row(score, r, sum, threshold, flag, count);
        },
        this->m_count_host);
  }
};

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  // kernels_launched 1 (the default): the whole operation, the flagged count by the RangePolicy reduction.
  register_kokkos_variant<plain_kokkos<space>>(scoring_variant_info(
      "plain_kokkos_feature_major", "plain_kokkos",
      "the seed's plain kernel in Kokkos: RangePolicy, one row per work item, a loop over the features",
      table_layout::feature_major));
});

}  // namespace
}  // namespace kstudy
