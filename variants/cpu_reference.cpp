// cpu_reference: the CPU baseline speedups are quoted against, like the seed's NumPy baseline:
// float32 arithmetic on a row-major table, parallel over rows on a host execution space
// (OpenMP; Serial too). One fused pass, since a tuned CPU implementation would not materialise
// intermediates either.
#include <Kokkos_Core.hpp>

#include <cstdint>

#include "detail/kokkos_variant.hpp"

namespace kstudy {
namespace {

using detail::clamp_nan_through;

template <class ExecutionSpace, class Value = float>
class cpu_reference final : public detail::kokkos_variant<ExecutionSpace, Kokkos::LayoutRight, Value> {
 public:
  void run() override {
    const auto x = this->m_x;
    const auto mean = this->m_vectors.mean, inv_std = this->m_vectors.inv_std, weight = this->m_vectors.weight;
    const auto score = this->m_score;
    const auto flag = this->m_flag;
    const Value clip = this->m_clip, threshold = this->m_threshold;
    const std::int64_t features = this->m_shape.features;
    std::int64_t flagged = 0;
    Kokkos::parallel_reduce(
        "kstudy::cpu_reference", Kokkos::RangePolicy<ExecutionSpace>(this->m_space, 0, this->m_shape.rows),
        [=](const std::int64_t r, std::int64_t& count) {
          const Value* row = &x(r, 0);
          Value sum = 0;
          // SIMD across the row's features (reassociates the sum; the gate's bound allows any order).
#pragma omp simd reduction(+ : sum)
          for (std::int64_t f = 0; f < features; ++f)
            sum += clamp_nan_through((row[f] - mean(f)) * inv_std(f), clip) * weight(f);
          score(r) = sum;
          const bool flagged_row = sum > threshold;
          flag(r) = flagged_row;
          count += flagged_row;
        },
        flagged);
    this->m_flagged = flagged;
  }
};

[[maybe_unused]] const int registered = detail::for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  if constexpr (detail::is_host_space_v<space>) {
    detail::register_kokkos_variant<cpu_reference<space>>(
        {"cpu_reference", "cpu_reference", "full", "", "CPU baseline: float32, row-major, rows split over host threads",
         table_layout::row_major, false, 1, false, essential_traffic});
  }
});

}  // namespace
}  // namespace kstudy
