// composed: one Kokkos kernel per step with every intermediate in memory, the way composed array
// code (the seed's composed CuPy) runs: standardize -> clip -> weight -> row sum (Kokkos Kernels
// gemv against a ones vector) -> threshold + count.
#include <Kokkos_Core.hpp>

#include <cstdint>

#include "detail/scoring_kokkos_variant.hpp"
#include "detail/library_steps.hpp"

namespace kstudy {
namespace {

template <class ExecutionSpace, class Layout, class Value = float>
class composed final : public detail::queued_scoring_kokkos_variant<ExecutionSpace, Layout, Value> {
  using base = detail::queued_scoring_kokkos_variant<ExecutionSpace, Layout, Value>;
  using table = typename base::table_type;

 public:
  // On the default instance (the library row sum queues on its stream), so not pipelined; but every
  // step queues there without a host fence, so device events stop right behind the threshold kernel.
  // Public: nvcc refuses extended lambdas in a private or protected member function.
  void launch() override {
    const auto mean = this->m_vectors.mean, inv_std = this->m_vectors.inv_std, weight = this->m_vectors.weight;
    const Value clip = this->m_clip;
    // clang-format 14 takes KOKKOS_LAMBDA(...) for a call and would write its trailing return type as ")->Value".
    // clang-format off
    detail::map_elements<ExecutionSpace, Layout>(
        "kstudy::composed::standardize", this->m_space, this->m_x, m_standardized,
        KOKKOS_LAMBDA(Value v, std::int64_t f) -> Value { return (v - mean(f)) * inv_std(f); });
    detail::map_elements<ExecutionSpace, Layout>(
        "kstudy::composed::clip", this->m_space, m_standardized, m_clipped,
        KOKKOS_LAMBDA(Value v, std::int64_t) -> Value { return detail::clamp_nan_through(v, clip); });
    detail::map_elements<ExecutionSpace, Layout>(
        "kstudy::composed::weight", this->m_space, m_clipped, m_weighted,
        KOKKOS_LAMBDA(Value v, std::int64_t f) -> Value { return v * weight(f); });
    // clang-format on
    detail::row_sums(this->m_space, m_weighted, m_ones, this->m_score);
    detail::threshold_step("kstudy::composed::threshold", this->m_space, this->m_score, this->m_flag, this->m_threshold,
                           this->m_count_host);
  }

 protected:
  void allocate_workspace() override {
    m_standardized =
        make_table<Layout, typename base::memory_space, Value>("kstudy::composed::standardized", this->m_shape);
    m_clipped = make_table<Layout, typename base::memory_space, Value>("kstudy::composed::clipped", this->m_shape);
    m_weighted = make_table<Layout, typename base::memory_space, Value>("kstudy::composed::weighted", this->m_shape);
    m_ones =
        Kokkos::View<Value*, Layout, typename base::memory_space>("kstudy::composed::ones", this->m_shape.features);
    Kokkos::deep_copy(m_ones, Value(1));
  }

 private:
  table m_standardized, m_clipped, m_weighted;
  Kokkos::View<Value*, Layout, typename base::memory_space> m_ones;
};

traffic_model composed_traffic(const table_shape& s) {
  const std::int64_t n = s.rows * s.features * 4, f = s.features * 4, r = s.rows;
  // x -> standardized -> clipped -> weighted (each read once, written once), gemv reads weighted,
  // threshold reads the scores.
  return {n + 3 * f + n + n + n + f + 4 * r, n + n + n + 4 * r + r};
}

variant_info composed_info(const char* name, table_layout layout) {
  auto info = scoring_variant_info(name, "composed", "5 steps, intermediates in memory; row sum by KokkosBlas::gemv",
                                   layout, composed_traffic);
  // Its own standardize, clip, weight and threshold kernels around one library call (KokkosBlas::gemv; cuBLAS
  // through the TPL on CUDA where it covers the layout): not Kokkos Kernels calls only.
  info.implementation = implementation::kokkos_mixed;
  info.fusion = fusion_level::none;
  info.kernels_launched = 5;  // standardize, clip, weight, gemv, threshold
  return info;
}

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  register_kokkos_variant<composed<space, Kokkos::LayoutLeft>>(
      composed_info("composed_feature_major", table_layout::feature_major));
  register_kokkos_variant<composed<space, Kokkos::LayoutRight>>(
      composed_info("composed_row_major", table_layout::row_major));
});

}  // namespace
}  // namespace kstudy
