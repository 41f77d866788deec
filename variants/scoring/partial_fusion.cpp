// partial_fusion: standardize + clip + weight fused into one kernel writing one intermediate, then
// the library row sum (KokkosBlas::gemv) and a threshold kernel: the seed's partially fused CuPy.
#include <Kokkos_Core.hpp>

#include <cstdint>

#include "detail/scoring_kokkos_variant.hpp"
#include "detail/library_steps.hpp"

namespace kstudy {
namespace {

template <class ExecutionSpace, class Layout, class Value = float>
class partial_fusion final : public detail::gemv_scoring_variant<ExecutionSpace, Layout, Value> {
  using base = detail::gemv_scoring_variant<ExecutionSpace, Layout, Value>;

 public:
  partial_fusion() : base("partial_fusion") {}

  // Public for nvcc's extended lambdas.
  void launch() override {
    const auto mean = this->m_vectors.mean, inv_std = this->m_vectors.inv_std, weight = this->m_vectors.weight;
    const Value clip = this->m_clip;
    // clang-format 14 takes KOKKOS_LAMBDA(...) for a call and would write its trailing return type as ")->Value".
    // clang-format off
    detail::map_elements<ExecutionSpace, Layout>(
        "kstudy::partial_fusion::standardize_clip_weight", this->m_space, this->m_x, this->m_weighted,
        KOKKOS_LAMBDA(Value v, std::int64_t f) -> Value {
          return detail::clamp_nan_through((v - mean(f)) * inv_std(f), clip) * weight(f);
        });
    // clang-format on
    this->score_weighted();
  }
};

traffic_model partial_fusion_traffic(const table_shape& s) {
  const std::int64_t n = s.rows * s.features * 4, f = s.features * 4, r = s.rows;
  return {n + 3 * f + n + f + 4 * r, n + 4 * r + r};
}

variant_info partial_fusion_info(const std::string& name, table_layout layout) {
  auto info = scoring_variant_info(name, "partial_fusion",
                                   "fused standardize+clip+weight kernel, KokkosBlas::gemv row sum, threshold kernel",
                                   layout, partial_fusion_traffic);
  info.fusion = fusion_level::partial;
  info.implementation = implementation::kokkos_mixed;  // its own fused kernels around one Kokkos Kernels gemv
  info.kernels_launched = 3;                           // standardize+clip+weight, gemv, threshold
  return info;
}

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  detail::register_both_layouts<partial_fusion, typename decltype(tag)::type>("partial_fusion", partial_fusion_info);
});

}  // namespace
}  // namespace kstudy
