// cpu_reference: the CPU baseline speedups are quoted against, like the seed's NumPy baseline:
// float32 arithmetic on a row-major table, parallel over rows on a host execution space
// (OpenMP; Serial too). One fused pass, since a tuned CPU implementation would not materialise
// intermediates either.
#include <Kokkos_Core.hpp>

#include <cstdint>

#include "detail/scoring_kokkos_variant.hpp"

namespace kstudy {
namespace {

using detail::clamp_nan_through;

// Rows [begin, end) of a row-major float32 table with row pitch `pitch`; returns how many were flagged.
// Built for AVX-512, AVX2 and the baseline and chosen when the program loads (GCC's ifunc), so one
// portable binary still uses the host's widest vectors: the baseline SSE2 build runs far below the
// host's read bandwidth with 16 threads. SIMD across a row's features reassociates the sum; the gate's
// bound allows any order.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
std::int64_t
score_rows(const float* x, std::int64_t pitch, std::int64_t begin, std::int64_t end, std::int64_t features,
           const float* mean, const float* inv_std, const float* weight, float clip, float threshold, float* score,
           std::uint8_t* flag) {
  std::int64_t count = 0;
  for (std::int64_t r = begin; r < end; ++r) {
    const float* row = x + r * pitch;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t f = 0; f < features; ++f)
      sum += clamp_nan_through((row[f] - mean[f]) * inv_std[f], clip) * weight[f];
    score[r] = sum;
    const bool flagged_row = sum > threshold;
    flag[r] = flagged_row;
    count += flagged_row;
  }
  return count;
}

// Rows per work item: enough to amortise the call, few enough to balance 16 threads at 1,024 rows.
constexpr std::int64_t rows_per_item = 64;

template <class ExecutionSpace>
class cpu_reference final : public detail::scoring_kokkos_variant<ExecutionSpace, Kokkos::LayoutRight, float> {
 public:
  void run() override {
    const float* x = this->m_x.data();
    const std::int64_t pitch = this->m_x.stride(0);
    const float *mean = this->m_vectors.mean.data(), *inv_std = this->m_vectors.inv_std.data(),
                *weight = this->m_vectors.weight.data();
    float* score = this->m_score.data();
    std::uint8_t* flag = this->m_flag.data();
    const float clip = this->m_clip, threshold = this->m_threshold;
    const std::int64_t rows = this->m_shape.rows, features = this->m_shape.features;
    const std::int64_t items = (rows + rows_per_item - 1) / rows_per_item;
    std::int64_t flagged = 0;
    Kokkos::parallel_reduce(
        "kstudy::cpu_reference", Kokkos::RangePolicy<ExecutionSpace>(this->m_space, 0, items),
        [=](const std::int64_t item, std::int64_t& count) {
          const std::int64_t begin = item * rows_per_item;
          const std::int64_t end = begin + rows_per_item < rows ? begin + rows_per_item : rows;
          count += score_rows(x, pitch, begin, end, features, mean, inv_std, weight, clip, threshold, score, flag);
        },
        flagged);
    this->m_flagged = flagged;
  }
};

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  if constexpr (is_host_space_v<space>) {
    // kernels_launched 1 (the default): one parallel loop over the rows.
    auto info =
        scoring_variant_info("cpu_reference", "cpu_reference",
                             "CPU baseline: float32, row-major, rows split over host threads", table_layout::row_major);
    info.implementation = implementation::reference;
    register_kokkos_variant<cpu_reference<space>>(info);
  }
});

}  // namespace
}  // namespace kstudy
