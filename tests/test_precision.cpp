// Adaptive sampling's statistics and stopping rule (kstudy/precision.hpp): the interval code against known
// values, and the whole rule (trials within a replication, replications across them, the time budget) on
// synthetic timing streams: stable, noisy, drifting between processes, bimodal, throttled.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "kstudy/experiment.hpp"
#include "kstudy/precision.hpp"
#include "kstudy/records.hpp"
#include "kstudy/study.hpp"
#include "kstudy/support/splitmix64.hpp"

namespace {

using kstudy::median_interval;
using kstudy::protocol;
using kstudy::sample_record;
using kstudy::stop_reason;

std::vector<double> ranks(int n) {
  std::vector<double> v;
  for (int i = 1; i <= n; ++i) v.push_back(double(n + 1 - i));  // unsorted on purpose: n, n-1, ..., 1
  return v;
}

TEST(Precision, OrderStatisticIntervalUsesTheBinomialRanks) {
  // The distribution-free 95% interval of the median: ranks (1, 6) for 6 samples, (2, 9) for 10, (6, 15) for 20
  // (P(Binomial(20, 1/2) <= 5) = 0.0207 <= 0.025 < P(<= 6) = 0.0577), (40, 61) for 100 (scipy's
  // binom.ppf(0.025, 100, 0.5) = 40).
  const auto six = kstudy::order_statistic_interval(ranks(6));
  EXPECT_TRUE(six.attainable);
  EXPECT_EQ(six.low, 1.0);
  EXPECT_EQ(six.high, 6.0);
  EXPECT_EQ(six.median, 3.5);
  const auto ten = kstudy::order_statistic_interval(ranks(10));
  EXPECT_EQ(ten.low, 2.0);
  EXPECT_EQ(ten.high, 9.0);
  const auto twenty = kstudy::order_statistic_interval(ranks(20));
  EXPECT_EQ(twenty.low, 6.0);
  EXPECT_EQ(twenty.high, 15.0);
  const auto hundred = kstudy::order_statistic_interval(ranks(100));
  EXPECT_EQ(hundred.low, 40.0);
  EXPECT_EQ(hundred.high, 61.0);
  // Beyond the exact range, the normal approximation: for 1,000 samples scipy gives ranks 469 and 532.
  const auto thousand = kstudy::order_statistic_interval(ranks(1000));
  EXPECT_NEAR(thousand.low, 469.0, 1.0);
  EXPECT_NEAR(thousand.high, 532.0, 1.0);
}

TEST(Precision, TooFewSamplesNeverMeetATarget) {
  // Five identical samples: a zero-width range, yet no pair of ranks covers the median with 95%.
  const auto five = kstudy::order_statistic_interval({1.0, 1.0, 1.0, 1.0, 1.0});
  EXPECT_FALSE(five.attainable);
  EXPECT_TRUE(std::isinf(five.relative_half_width()));
  EXPECT_TRUE(std::isinf(kstudy::order_statistic_interval({}).relative_half_width()));
}

TEST(Precision, StudentQuantilesMatchScipy) {
  // scipy.stats.t.ppf(0.975, df)
  EXPECT_NEAR(kstudy::student_t_975(1), 12.7062, 1e-3);
  EXPECT_NEAR(kstudy::student_t_975(2), 4.3027, 1e-3);
  EXPECT_NEAR(kstudy::student_t_975(4), 2.7764, 1e-3);
  EXPECT_NEAR(kstudy::student_t_975(30), 2.0423, 1e-3);
  EXPECT_NEAR(kstudy::student_t_975(40), 2.0211, 2e-3);
  EXPECT_NEAR(kstudy::student_t_975(120), 1.9799, 2e-3);
  EXPECT_THROW(kstudy::student_t_975(0), std::invalid_argument);
}

TEST(Precision, ReplicatedIntervalWidensForSpreadBetweenProcesses) {
  // Three processes, each tight around its own level: the pooled order-statistic interval alone would be
  // narrow; the t interval of the three medians (1.00, 1.03, 1.06: mean 1.03, sd 0.03) is +-4.303 * 0.03 / sqrt(3).
  std::vector<std::vector<double>> parts;
  for (const double level : {1.00, 1.03, 1.06}) parts.push_back(std::vector<double>(8, level));
  const auto i = kstudy::replicated_interval(parts);
  const double half = 4.303 * 0.03 / std::sqrt(3.0);
  EXPECT_NEAR(i.median, 1.03, 1e-12);
  EXPECT_NEAR(i.low, 1.03 - half, 1e-9);
  EXPECT_NEAR(i.high, 1.03 + half, 1e-9);
  EXPECT_NEAR(i.relative_half_width(), half / 1.03, 1e-9);
}

// --- the stopping rule on synthetic streams -----------------------------------------------------------------

// A timing stream: seconds of trial `trial` in replication `replication`, drawing on `uniform` for noise.
using stream = std::function<double(int replication, int trial, const std::function<double()>& uniform)>;

struct outcome {
  int replications = 0;
  std::int64_t samples = 0;
  stop_reason reason = stop_reason::fixed;
  median_interval interval;
};

// The protocol as the runner applies it to one point of one variant: trials_done within each replication, the
// parent's settled_points before starting another, stop_reason_of and the summary's interval at the end.
outcome simulate(const stream& timing, const protocol& p, std::uint64_t seed = 7) {
  std::uint64_t draw = seed << 32;
  const std::function<double()> uniform = [&] { return kstudy::unit_double(kstudy::splitmix64(++draw)); };
  std::vector<sample_record> archived;
  outcome out;
  for (int r = 0; r < p.replication_slots(); ++r) {
    if (r >= p.replications && kstudy::settled_points(archived, p).count(0)) break;
    std::vector<sample_record> mine;
    double wall = 0.0;
    const bool extends = p.adaptive() && r >= kstudy::exploration_replications(p);
    for (int t = 0; t < (extends ? p.max_trials : p.trials); ++t) {
      sample_record s;
      s.variant = "synthetic@serial";
      s.point = 0;
      s.replication = r;
      s.trial = t;
      s.status = "ok";
      s.gate = kstudy::gate_verdict::passed;
      s.seconds = timing(r, t, uniform);
      mine.push_back(s);
      wall += s.seconds;  // the synthetic trial loop spends its time in the timed call alone
      if (extends && t + 1 >= p.trials && kstudy::trials_done(mine, 0, p, wall)) break;
    }
    archived.insert(archived.end(), mine.begin(), mine.end());
    ++out.replications;
  }
  const auto series = kstudy::group_series(archived).at(0);
  out.samples = static_cast<std::int64_t>(archived.size());
  out.reason = kstudy::stop_reason_of(series, series.begin()->first, p);
  out.interval = series.begin()->second.interval();
  // The summary the runner writes records the same interval and reason.
  const auto summary = kstudy::summarise(archived, {}, nullptr, p);
  EXPECT_EQ(summary.size(), 1u);
  EXPECT_DOUBLE_EQ(summary.at(0).interval_low, out.interval.low);
  EXPECT_DOUBLE_EQ(summary.at(0).interval_high, out.interval.high);
  EXPECT_EQ(summary.at(0).stopped, kstudy::to_string(out.reason));
  return out;
}

protocol adaptive(double precision, double max_seconds = 10.0) {
  protocol p;
  p.trials = 5;
  p.replications = 3;
  p.precision = precision;
  p.max_trials = 200;
  p.max_replications = 12;
  p.max_seconds = max_seconds;
  return p;
}

// Normal noise of a relative standard deviation around a level (Box-Muller).
double noisy(double level, double cv, const std::function<double()>& uniform) {
  const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
  return level * (1.0 + cv * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

TEST(PrecisionRule, StableStreamStopsEarlyAndMeetsTheTarget) {
  const auto o = simulate([](int, int, const auto& u) { return noisy(1e-3, 0.003, u); }, adaptive(0.01));
  EXPECT_EQ(o.reason, stop_reason::precision);
  EXPECT_EQ(o.replications, 3);  // the least
  EXPECT_EQ(o.samples, 3 * 5);   // the least: the exploration replications alone meet it
  EXPECT_LE(o.interval.relative_half_width(), 0.01);
}

TEST(PrecisionRule, NoisyStreamTakesMoreSamplesAndSaysWhyItStopped) {
  // 20% noise: the median's interval narrows as 1/sqrt(n), and +-1% would take ~2,400 samples, past the bounds
  // (200 trials x 12 replications) even before the spread between processes: out of reach, seen at once, so the
  // bounds are not spent on it.
  const auto o = simulate([](int, int, const auto& u) { return noisy(1e-3, 0.20, u); }, adaptive(0.01));
  EXPECT_EQ(o.reason, stop_reason::out_of_reach);
  EXPECT_GT(o.interval.relative_half_width(), 0.01);
  EXPECT_EQ(o.replications, 3);  // the least
  EXPECT_EQ(o.samples, 3 * 5);   // no trial added
  // +-5% is within reach: reached, with more samples than the stable stream needed.
  const auto reachable = simulate([](int, int, const auto& u) { return noisy(1e-3, 0.20, u); }, adaptive(0.05));
  EXPECT_EQ(reachable.reason, stop_reason::precision);
  EXPECT_LE(reachable.interval.relative_half_width(), 0.05);
  EXPECT_GT(reachable.samples, 3 * 10);
}

TEST(PrecisionRule, TwoProcessesAreNotEnoughToGiveUp) {
  // Out of reach within each process (20% noise), with two replications as the least: a third runs before the
  // series is given up, since Student's t on two medians (12.7) would leave its interval many times wider.
  auto p = adaptive(0.01);
  p.replications = 2;
  const auto o = simulate([](int, int, const auto& u) { return noisy(1e-3, 0.20, u); }, p);
  EXPECT_EQ(o.reason, stop_reason::out_of_reach);
  EXPECT_EQ(o.replications, 3);
}

TEST(PrecisionRule, ProjectionToTheBoundsDecidesReach) {
  // The same 6% noise is out of reach for bounds of 40 samples and within reach for 2,400 (about 220 needed).
  const auto wide = simulate([](int, int, const auto& u) { return noisy(1e-3, 0.06, u); }, adaptive(0.01));
  EXPECT_EQ(wide.reason, stop_reason::precision);
  EXPECT_GT(wide.samples, 100);
  auto tight = adaptive(0.01);
  tight.max_trials = 10;
  tight.max_replications = 4;
  const auto o = simulate([](int, int, const auto& u) { return noisy(1e-3, 0.06, u); }, tight);
  EXPECT_EQ(o.reason, stop_reason::out_of_reach);
  EXPECT_EQ(o.samples, 3 * 5);
}

TEST(PrecisionRule, DriftBetweenProcessesIsNotHiddenByTightProcesses) {
  // Each process is tight (0.2%), but the level steps by 3% from one process to the next: each replication stops
  // its trials early, and the interval across them stays wide. Projected to 12 replications with the medians'
  // spread, it is still wider than 1%: out of reach after the least three, not run to the bound.
  const auto o =
      simulate([](int r, int, const auto& u) { return noisy(1e-3 * (1.0 + 0.03 * r), 0.002, u); }, adaptive(0.01));
  EXPECT_EQ(o.reason, stop_reason::out_of_reach);
  EXPECT_EQ(o.replications, 3);
  // Levels 1.00, 1.03, 1.06: the interval is that of their mean, 1.03 +- t(2) * 0.03 / sqrt(3) = +-0.0745.
  EXPECT_GT(o.interval.relative_half_width(), 0.05);
  EXPECT_LT(o.interval.low, 1e-3 * 0.99);
  EXPECT_GT(o.interval.high, 1e-3 * 1.09);
}

TEST(PrecisionRule, ReplicationsAreAddedUntilTheSpreadBetweenProcessesIsPinned) {
  // Each process is tight (0.2%) at its own level, uniform within +-1.5% of the true one (a standard deviation of
  // 0.87%): three replications leave Student's t interval of their medians wider than 1% (t(2) = 4.3), twelve
  // would not, so replications are added, at the least trials (more cannot help), until it is within 1%.
  const auto level = [](int r) { return 1e-3 * (1.0 + 0.03 * (kstudy::unit_double(kstudy::splitmix64(r)) - 0.5)); };
  const auto o = simulate([&](int r, int, const auto& u) { return noisy(level(r), 0.002, u); }, adaptive(0.01));
  EXPECT_EQ(o.reason, stop_reason::precision);
  EXPECT_GT(o.replications, 3);
  EXPECT_LT(o.replications, 12);
  EXPECT_LE(o.interval.relative_half_width(), 0.01);
}

TEST(PrecisionRule, BimodalStreamGetsAWideIntervalNotAFalsePrecision) {
  // Half the calls take 1.0 ms, half 1.5 ms, at random: the median sits between the modes and its interval spans
  // them until very many samples pin which mode holds the middle rank.
  const auto o = simulate([](int, int, const auto& u) { return u() < 0.5 ? 1.0e-3 : 1.5e-3; }, adaptive(0.01));
  EXPECT_NE(o.reason, stop_reason::precision);
  EXPECT_GT(o.interval.relative_half_width(), 0.1);
}

TEST(PrecisionRule, ThrottledMinorityDoesNotMoveAPreciseMedian) {
  // One sample in ten throttled (20% slower): the median is robust to it, and the target is met.
  const auto o =
      simulate([](int, int, const auto& u) { return u() < 0.1 ? 1.2e-3 : noisy(1e-3, 0.003, u); }, adaptive(0.01));
  EXPECT_EQ(o.reason, stop_reason::precision);
  EXPECT_NEAR(o.interval.median, 1e-3, 1e-5);
}

TEST(PrecisionRule, TimeOutIsRecorded) {
  // 5% noise at 10 ms a call, within reach (~150 samples), with 0.5 s of wall time past the least trials: after
  // the three exploration replications (5 trials each), three shares of 0.17 s, each used up after about 17
  // trials, and the point is out of time.
  const auto o = simulate([](int, int, const auto& u) { return noisy(1e-2, 0.05, u); }, adaptive(0.01, 0.5));
  EXPECT_EQ(o.reason, stop_reason::time_out);
  EXPECT_EQ(o.replications, 6);
  EXPECT_GE((o.samples - 15) * 0.009, 0.5 * 0.8);  // spent about the budget past the least
  EXPECT_LE(o.samples, 15 + 3 * 25);
}

TEST(PrecisionRule, FixedProtocolRunsItsCountsAndSaysFixed) {
  protocol p;
  p.trials = 7;
  p.replications = 3;
  const auto o = simulate([](int, int, const auto& u) { return noisy(1e-3, 0.2, u); }, p);
  EXPECT_EQ(o.reason, stop_reason::fixed);
  EXPECT_EQ(o.samples, 21);
  EXPECT_EQ(o.replications, 3);
}

}  // namespace
