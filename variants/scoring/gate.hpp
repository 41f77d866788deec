#pragma once
// The correctness gate: a float64 reference of the scoring operation and the comparison that every
// variant's output must pass before any of its timings is accepted.
//
// Tolerance. A float32 evaluation of score[r] rounds each of the F terms a few times (subtract,
// multiply, clamp, multiply: <= 4 roundings) and then sums F terms in some order; to first order its
// error is bounded by (F + 4) * u * sum_f |z_f * w_f| with u = 2^-24. We allow
//     |s - ref| <= rtol * sum_f |z_f * w_f| + atol,   rtol = (F + 4) * 2^-23,  atol = 1e-6,
// i.e. twice the first-order worst case, whatever summation order the variant uses. A flag must
// match the reference unless the reference score lies within that same bound of the threshold (then
// either answer is right in float32 and the row is counted as ambiguous). NaN reference scores
// (NaN inputs) must be NaN with flag 0.
#include <cstdint>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "scoring/scoring_problem.hpp"

namespace kstudy {

struct reference_result {
  std::vector<double> score;
  std::vector<double> magnitude;  // sum_f |z_f * w_f|, the scale of the tolerance
  std::vector<std::uint8_t> flag;
  std::int64_t flagged = 0;
};

// float64 evaluation of the operation on the problem's float32 inputs (OpenMP threads, untimed).
reference_result compute_reference(const scoring_problem& problem);

struct scoring_gate_result {
  bool passed = false;
  double max_abs_error = 0.0;
  double max_relative_error = 0.0;  // |s - ref| / (sum_f |z_f w_f| + atol), the tolerance's own scale
  double rtol = 0.0;
  double atol = 0.0;
  std::int64_t score_failures = 0;       // rows outside the tolerance (or not written: poison left)
  std::int64_t flag_mismatches = 0;      // non-ambiguous rows whose flag differs
  std::int64_t ambiguous_rows = 0;       // reference within tolerance of the threshold
  std::int64_t flagged_count_error = 0;  // |variant count - reference count| beyond ambiguous rows
  std::int64_t rows = 0;
  std::string message;  // empty when passed; otherwise the first failing row and why

  // In the runner's terms: score failures are value failures; flag mismatches and a wrong count are
  // discrete mismatches; ambiguous rows stay ambiguous.
  gate_result generic() const;
};

double gate_rtol(std::int64_t features);
constexpr double gate_atol = 1e-6;
// The bound check_results allows row's score: rtol * sum_f |z_f w_f| + atol, from the problem's inputs.
double score_tolerance(const scoring_problem& problem, std::int64_t row);

scoring_gate_result check_results(const scoring_problem& problem, const reference_result& reference, const float* score,
                                  const std::uint8_t* flag, std::int64_t flagged_count);

}  // namespace kstudy
