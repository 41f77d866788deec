#include "scoring/gate.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace kstudy {

namespace {

struct row_reference {
  double score = 0.0;
  double magnitude = 0.0;  // sum_f |z_f * w_f|
};

// One row of the operation in float64 on the float32 inputs.
row_reference reference_row(const scoring_problem& problem, std::int64_t r) {
  const auto& shape = problem.shape;
  const double clip = problem.clip;
  row_reference row;
  for (std::int64_t f = 0; f < shape.features; ++f) {
    const double x = problem.x[shape.offset(r, f)];
    double z = (x - static_cast<double>(problem.mean.data[f])) * static_cast<double>(problem.inv_std.data[f]);
    // Same clamp semantics as the variants: NaN passes through.
    z = z < -clip ? -clip : (z > clip ? clip : z);
    const double term = z * static_cast<double>(problem.weight.data[f]);
    row.score += term;
    row.magnitude += std::fabs(term);
  }
  return row;
}

}  // namespace

reference_result compute_reference(const scoring_problem& problem) {
  problem.validate();
  const std::int64_t rows = problem.shape.rows;
  reference_result ref;
  ref.score.resize(rows);
  ref.magnitude.resize(rows);
  ref.flag.resize(rows);
  const double threshold = problem.threshold;
  std::int64_t flagged = 0;
#pragma omp parallel for reduction(+ : flagged) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = reference_row(problem, r);
    ref.score[r] = row.score;
    ref.magnitude[r] = row.magnitude;
    ref.flag[r] = row.score > threshold ? 1 : 0;
    flagged += ref.flag[r];
  }
  ref.flagged = flagged;
  return ref;
}

double gate_rtol(std::int64_t features) { return static_cast<double>(features + 4) * 0x1.0p-23; }

double score_tolerance(const scoring_problem& problem, std::int64_t row) {
  return gate_rtol(problem.shape.features) * reference_row(problem, row).magnitude + gate_atol;
}

gate_result scoring_gate_result::generic() const {
  gate_result g;
  g.passed = passed;
  g.max_abs_error = max_abs_error;
  g.max_relative_error = max_relative_error;
  g.rtol = rtol;
  g.atol = atol;
  g.value_failures = score_failures;
  g.discrete_mismatches = flag_mismatches + flagged_count_error;
  g.ambiguous = ambiguous_rows;
  g.checked = rows;
  g.message = message;
  return g;
}

scoring_gate_result check_results(const scoring_problem& problem, const reference_result& reference, const float* score,
                                  const std::uint8_t* flag, std::int64_t flagged_count) {
  scoring_gate_result g;
  const std::int64_t rows = problem.shape.rows;
  g.rows = rows;
  g.rtol = gate_rtol(problem.shape.features);
  g.atol = gate_atol;
  const double threshold = problem.threshold;
  std::int64_t first_bad = -1;
  std::string first_reason;
  std::int64_t flag_sum = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double ref = reference.score[r];
    const double s = score[r];
    const double bound = g.rtol * reference.magnitude[r] + g.atol;
    bool bad_score = false, bad_flag = false;
    if (std::isnan(ref)) {
      bad_score = !std::isnan(s);
      bad_flag = flag[r] != 0;
    } else {
      const double err = std::fabs(s - ref);  // NaN (unwritten poison) compares false below
      if (!(err <= bound)) bad_score = true;
      if (!std::isnan(err)) {
        g.max_abs_error = std::max(g.max_abs_error, err);
        g.max_relative_error = std::max(g.max_relative_error, err / (reference.magnitude[r] + g.atol));
      } else {
        g.max_abs_error = g.max_relative_error = INFINITY;
      }
      const bool ambiguous = std::fabs(ref - threshold) <= bound;
      if (ambiguous) {
        ++g.ambiguous_rows;
        bad_flag = flag[r] > 1;  // either answer is right, but it must be a written 0 or 1
      } else {
        bad_flag = flag[r] != reference.flag[r];
      }
    }
    flag_sum += flag[r] == 1;
    g.score_failures += bad_score;
    g.flag_mismatches += bad_flag;
    if ((bad_score || bad_flag) && first_bad < 0) {
      first_bad = r;
      // Nine significant digits tell two float32 values apart: an error just over its bound must not print
      // as a score equal to the reference.
      std::ostringstream os;
      os << std::setprecision(9) << "row " << r << ": ";
      if (bad_score)
        os << "score " << s << " differs from reference " << ref << " by " << std::fabs(s - ref)
           << ", which exceeds the bound " << bound;
      else
        os << "flag " << int(flag[r]) << ", reference " << int(reference.flag[r]) << " (reference score " << ref
           << ", threshold " << threshold << ", bound " << bound << ")";
      first_reason = os.str();
    }
  }
  const std::int64_t count_error = std::llabs(flagged_count - reference.flagged);
  const std::int64_t beyond_ambiguous = count_error > g.ambiguous_rows ? count_error - g.ambiguous_rows : 0;
  // The returned count must also agree with the returned flags themselves.
  const std::int64_t against_flags = std::llabs(flagged_count - flag_sum);
  g.flagged_count_error = std::max(beyond_ambiguous, against_flags);
  g.passed = g.score_failures == 0 && g.flag_mismatches == 0 && g.flagged_count_error == 0;
  if (!g.passed) {
    std::ostringstream os;
    os << g.score_failures << " score failures, " << g.flag_mismatches << " flag mismatches, flagged count "
       << flagged_count << " vs reference " << reference.flagged << " (" << g.ambiguous_rows << " ambiguous)";
    // Said outright: with every row right, the count is the only thing wrong.
    if (against_flags != 0) os << "; flagged count " << flagged_count << " but " << flag_sum << " flags set";
    if (beyond_ambiguous != 0)
      os << "; flagged count off the reference by " << count_error << ", more than the " << g.ambiguous_rows
         << " ambiguous rows allow";
    if (first_bad >= 0) os << "; first: " << first_reason;
    g.message = os.str();
  }
  return g;
}

}  // namespace kstudy
