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

template <class ExecutionSpace, class Value = float>
class plain_kokkos final : public detail::pipelined_scoring_kokkos_variant<ExecutionSpace, Kokkos::LayoutLeft, Value> {
 public:
  // Public: CUDA extended lambdas may not live in private or protected member functions.
  void launch() override {
    const auto args = this->kernel_args();
    const std::int64_t features = this->m_shape.features;
    Kokkos::parallel_reduce(
        "kstudy::plain_kokkos<feature_major>",
        Kokkos::RangePolicy<ExecutionSpace>(this->m_space, 0, this->m_shape.rows),
        KOKKOS_LAMBDA(const std::int64_t r, std::int64_t& count) {
          Value sum = 0;
          for (std::int64_t f = 0; f < features; ++f) sum += args.term(r, f);
          args.write(r, sum, count);
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
