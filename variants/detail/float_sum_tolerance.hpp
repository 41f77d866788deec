#pragma once
// The tolerance of a float32 sum of n nonnegative-scale terms that reduce_sum and stream_dot share (the
// derivation is at the top of variants/reduce/operation.cpp). Kokkos-free.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kstudy::detail {

// The longest serial chain of float32 additions the model admits at each of two levels (a thread's or a
// block's running sum; the chain that adds the partials).
constexpr double float_sum_chain = 1048576.0;  // 2^20
// Hoeffding's lambda: a correct sum fails with probability at most 2 exp(-lambda^2 / 2) = 2.5e-14.
constexpr double float_sum_lambda = 8.0;

// The number of first-order rounding terms, each at most u sum|x|, whose squares bound the error's
// variance: n - 1 additions for a single chain, at most 2 chains of float_sum_chain plus log2(n) tree levels
// otherwise, plus `extra` (stream_dot: the n products, whose squares sum to at most (sum|x y|)^2).
inline double float_sum_terms(std::int64_t n, double extra) {
  const double additions = std::min(double(n) - 1.0, 2.0 * float_sum_chain + std::ceil(std::log2(double(n))));
  return std::max(0.0, additions) + extra;
}

// |s - ref| <= rtol * sum_i |x_i|: u (lambda sqrt(terms) + 1), the 1 for the final rounding to float.
inline double float_sum_rtol(std::int64_t n, double extra) {
  return 0x1.0p-24 * (float_sum_lambda * std::sqrt(float_sum_terms(n, extra)) + 1.0);
}

}  // namespace kstudy::detail
