// The correctness gate against outputs that are only slightly wrong: one score just outside its
// tolerance (and one just inside, which passes), a flipped flag on a clear-cut row, a flagged count that
// disagrees with correct flags, and a flag that is neither 0 nor 1. Each must fail, and the verdict must
// say why. No Kokkos: the outputs are built from the float64 reference itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "scoring/gate.hpp"
#include "scoring/data_generator.hpp"

namespace {

using kstudy::check_results;
using gate_result = kstudy::scoring_gate_result;
using kstudy::host_dataset;
using kstudy::reference_result;

// A correct output: every score the reference rounded to float32 (within 2^-24 |score|, well inside
// the tolerance), the reference's flags and count.
struct output {
  std::vector<float> score;
  std::vector<std::uint8_t> flag;
  std::int64_t flagged = 0;
};

class GateNegative : public ::testing::Test {
 protected:
  GateNegative()
      : m_data(kstudy::make_shape(4096, 16, kstudy::table_layout::row_major)),
        m_reference(kstudy::compute_reference(m_data.problem())) {}

  output correct() const {
    output out;
    for (const double s : m_reference.score) out.score.push_back(static_cast<float>(s));
    out.flag = m_reference.flag;
    out.flagged = m_reference.flagged;
    return out;
  }

  gate_result check(const output& out) const {
    return check_results(m_data.problem(), m_reference, out.score.data(), out.flag.data(), out.flagged);
  }

  double bound(std::int64_t r) const {
    return kstudy::gate_rtol(m_data.shape().features) * m_reference.magnitude[r] + kstudy::gate_atol;
  }

  // A row whose reference score is far (over 100 tolerances) from the threshold with the given flag: no
  // float32 evaluation could be excused for flagging it the other way.
  std::int64_t clear_cut_row(std::uint8_t flag) const {
    const double threshold = m_data.problem().threshold;
    for (std::int64_t r = 0; r < m_data.shape().rows; ++r)
      if (m_reference.flag[r] == flag && std::isfinite(m_reference.score[r]) &&
          std::fabs(m_reference.score[r] - threshold) > 100 * bound(r))
        return r;
    ADD_FAILURE() << "no clear-cut row with flag " << int(flag);
    return 0;
  }

  // The float32 score nearest the reference's upper tolerance edge, on the outside (outside = true: its
  // error exceeds the bound by the least a float can) or on the inside (the largest error the bound admits).
  float edge_score(std::int64_t r, bool outside) const {
    const double ref = m_reference.score[r], b = bound(r);
    float s = static_cast<float>(ref + b);
    while (std::fabs(double(s) - ref) > b) s = std::nextafter(s, -INFINITY);
    if (outside) s = std::nextafter(s, INFINITY);
    return s;
  }

  host_dataset m_data;
  reference_result m_reference;
};

TEST_F(GateNegative, CorrectOutputPasses) {
  const auto g = check(correct());
  EXPECT_TRUE(g.passed) << g.message;
  EXPECT_TRUE(g.message.empty());
}

TEST_F(GateNegative, ScoreJustOutsideTheToleranceFails) {
  const std::int64_t r = clear_cut_row(1);
  auto out = correct();
  out.score[r] = edge_score(r, true);
  const double error = std::fabs(double(out.score[r]) - m_reference.score[r]);
  ASSERT_GT(error, bound(r));
  ASSERT_LT(error, bound(r) * (1 + 1e-3)) << "not slightly wrong";

  const auto g = check(out);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.score_failures, 1);
  EXPECT_EQ(g.flag_mismatches, 0);
  EXPECT_EQ(g.flagged_count_error, 0);
  EXPECT_DOUBLE_EQ(g.max_abs_error, error);
  // The message names the row and shows the error beside the bound it exceeds, in digits that tell them apart.
  EXPECT_NE(g.message.find("1 score failures"), std::string::npos) << g.message;
  EXPECT_NE(g.message.find("row " + std::to_string(r) + ": score"), std::string::npos) << g.message;
  EXPECT_NE(g.message.find("exceeds the bound"), std::string::npos) << g.message;
}

TEST_F(GateNegative, ScoreJustInsideTheTolerancePasses) {
  const std::int64_t r = clear_cut_row(1);
  auto out = correct();
  out.score[r] = edge_score(r, false);
  const double error = std::fabs(double(out.score[r]) - m_reference.score[r]);
  ASSERT_LE(error, bound(r));
  ASSERT_GT(error, bound(r) * (1 - 1e-3)) << "not at the edge";
  const auto g = check(out);
  EXPECT_TRUE(g.passed) << g.message;
  EXPECT_DOUBLE_EQ(g.max_abs_error, error);
}

TEST_F(GateNegative, FlippedFlagOnAClearCutRowFails) {
  for (const std::uint8_t flag : {std::uint8_t(0), std::uint8_t(1)}) {
    const std::int64_t r = clear_cut_row(flag);
    auto out = correct();
    out.flag[r] = 1 - flag;
    out.flagged += flag ? -1 : 1;  // the count agrees with the (wrong) flags: only the flag is at fault
    const auto g = check(out);
    EXPECT_FALSE(g.passed) << "flag " << int(flag);
    EXPECT_EQ(g.score_failures, 0);
    EXPECT_EQ(g.flag_mismatches, 1);
    EXPECT_NE(g.message.find("1 flag mismatches"), std::string::npos) << g.message;
    EXPECT_NE(g.message.find("row " + std::to_string(r) + ": flag " + std::to_string(1 - flag) + ", reference " +
                             std::to_string(flag)),
              std::string::npos)
        << g.message;
  }
}

TEST_F(GateNegative, WrongFlaggedCountWithCorrectFlagsFails) {
  for (const std::int64_t delta : {std::int64_t(1), std::int64_t(-1)}) {
    auto out = correct();
    out.flagged += delta;
    const auto g = check(out);
    EXPECT_FALSE(g.passed) << delta;
    EXPECT_EQ(g.score_failures, 0);
    EXPECT_EQ(g.flag_mismatches, 0);
    EXPECT_EQ(g.flagged_count_error, 1);
    // Every row is right, so the message must say that the count is what is wrong, and against what.
    EXPECT_NE(g.message.find("flagged count " + std::to_string(out.flagged) + " but " +
                             std::to_string(m_reference.flagged) + " flags set"),
              std::string::npos)
        << g.message;
  }
}

TEST_F(GateNegative, FlagOfTwoFails) {
  // On a row flagged 1 the count still counts it: only the value is wrong.
  const std::int64_t r = clear_cut_row(1);
  auto out = correct();
  out.flag[r] = 2;
  const auto g = check(out);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.score_failures, 0);
  EXPECT_EQ(g.flag_mismatches, 1);
  EXPECT_NE(g.message.find("row " + std::to_string(r) + ": flag 2, reference 1"), std::string::npos) << g.message;
}

// A row whose reference score is the threshold itself is ambiguous (either flag is right) but its flag
// must still be a written 0 or 1.
TEST(GateAmbiguous, FlagOfTwoOnAnAmbiguousRowFails) {
  const std::vector<float> x{0.0f, 1.0f, -1.0f, 2.0f}, mean{0.0f}, inv_std{1.0f}, weight{1.0f};
  kstudy::scoring_problem problem;
  problem.shape = kstudy::make_shape(4, 1, kstudy::table_layout::row_major);
  problem.x = x.data();
  problem.mean = {mean.data(), 1};
  problem.inv_std = {inv_std.data(), 1};
  problem.weight = {weight.data(), 1};
  problem.threshold = 0.0f;
  const auto reference = kstudy::compute_reference(problem);
  std::vector<float> score(x);
  for (const std::uint8_t row0 : {std::uint8_t(0), std::uint8_t(1)}) {
    std::vector<std::uint8_t> flag{row0, 1, 0, 1};
    const auto g = check_results(problem, reference, score.data(), flag.data(), 2 + row0);
    EXPECT_TRUE(g.passed) << int(row0) << ": " << g.message;
    EXPECT_EQ(g.ambiguous_rows, 1);
  }
  std::vector<std::uint8_t> flag{2, 1, 0, 1};
  const auto g = check_results(problem, reference, score.data(), flag.data(), 2);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.flag_mismatches, 1);
  EXPECT_NE(g.message.find("row 0: flag 2"), std::string::npos) << g.message;
}

}  // namespace
