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
class composed final : public detail::gemv_scoring_variant<ExecutionSpace, Layout, Value> {
  using base = detail::gemv_scoring_variant<ExecutionSpace, Layout, Value>;

 public:
  composed() : base("composed") {}

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
        "kstudy::composed::weight", this->m_space, m_clipped, this->m_weighted,
        KOKKOS_LAMBDA(Value v, std::int64_t f) -> Value { return v * weight(f); });
    // clang-format on
    this->score_weighted();
  }

 protected:
  void allocate_workspace() override {
    base::allocate_workspace();
    m_standardized = this->make_workspace("standardized");
    m_clipped = this->make_workspace("clipped");
  }

 private:
  typename base::table_type m_standardized, m_clipped;
};

traffic_model composed_traffic(const table_shape& s) {
  const std::int64_t n = s.rows * s.features * 4, f = s.features * 4, r = s.rows;
  // x -> standardized -> clipped -> weighted (each read once, written once), gemv reads weighted,
  // threshold reads the scores.
  return {n + 3 * f + n + n + n + f + 4 * r, n + n + n + 4 * r + r};
}

variant_info composed_info(const std::string& name, table_layout layout) {
  auto info = scoring_variant_info(name, "composed", "5 steps, intermediates in memory; row sum by KokkosBlas::gemv",
                                   layout, composed_traffic);
  // Its own standardize, clip, weight and threshold kernels around one library call (KokkosBlas::gemv; cuBLAS
  // through the TPL on CUDA where it covers the layout): not Kokkos Kernels calls only.
  info.implementation = implementation::kokkos_mixed;
  info.fusion = fusion_level::none;
  info.kernels_launched = 5;  // standardize, clip, weight, gemv, threshold
  return info;
}

[[maybe_unused]] const int registered = for_each_enabled_space(
    [](auto tag) { detail::register_both_layouts<composed, typename decltype(tag)::type>("composed", composed_info); });

}  // namespace
}  // namespace kstudy
