// Adaptive sampling's statistics (kstudy/precision.hpp), in core/ beside the records it reads: written once, used
// by the trial loop, by the points a replication skips, by the parent's decision to start another replication and
// by the summaries.
#include "kstudy/precision.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "detail/name_table.hpp"

namespace kstudy {

double median_interval::relative_half_width() const {
  if (!attainable || samples == 0 || !(median > 0.0)) return std::numeric_limits<double>::infinity();
  return std::max(median - low, high - median) / median;
}

namespace {

constexpr detail::name_table<stop_reason, 5> k_stop_reason_names{{
    {stop_reason::fixed, "fixed"},
    {stop_reason::precision, "precision"},
    {stop_reason::out_of_reach, "out_of_reach"},
    {stop_reason::time_out, "time_out"},
    {stop_reason::max_replications, "max_replications"},
}};

double sorted_median(const std::vector<double>& t) {
  const std::size_t n = t.size();
  return n % 2 == 1 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

// The largest rank j (1-based) with P(Binomial(n, 1/2) <= j - 1) <= 2.5%, or 0 where none is (n < 6). Exact up
// to 200 samples, the normal approximation with continuity correction beyond (its error there is under one rank).
std::size_t lower_rank(std::size_t n) {
  if (n <= 200) {
    const double log_half_n = double(n) * std::log(0.5);
    double cdf = 0.0;
    std::size_t j = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const double log_pmf =
          std::lgamma(double(n) + 1) - std::lgamma(double(k) + 1) - std::lgamma(double(n - k) + 1) + log_half_n;
      cdf += std::exp(log_pmf);
      if (cdf > 0.025) break;
      j = k + 1;
    }
    return j;
  }
  const double half = double(n) / 2.0;
  return static_cast<std::size_t>(std::floor(half - 1.959964 * std::sqrt(double(n)) / 2.0 - 0.5)) + 1;
}

}  // namespace

median_interval order_statistic_interval(std::vector<double> samples) {
  median_interval out;
  out.samples = static_cast<std::int64_t>(samples.size());
  if (samples.empty()) return out;
  std::sort(samples.begin(), samples.end());
  out.median = sorted_median(samples);
  const std::size_t n = samples.size(), j = lower_rank(n);
  out.attainable = j >= 1;
  out.low = samples[j >= 1 ? j - 1 : 0];
  out.high = samples[j >= 1 ? n - j : n - 1];
  return out;
}

double student_t_975(int df) {
  if (df < 1) throw std::invalid_argument("kstudy: Student's t needs at least one degree of freedom");
  static const double table[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                 2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                 2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df <= 30) return table[df - 1];
  // Cornish-Fisher's first term beyond the table: within 0.002 of the exact quantile from df 31 on.
  const double z = 1.959964;
  return z + (z * z * z + z) / (4.0 * df);
}

namespace {

// Each non-empty replication's median, in replication order.
std::vector<double> replication_medians(const std::vector<std::vector<double>>& by_replication) {
  std::vector<double> medians;
  for (const auto& r : by_replication) {
    if (r.empty()) continue;
    auto sorted = r;
    std::sort(sorted.begin(), sorted.end());
    medians.push_back(sorted_median(sorted));
  }
  return medians;
}

// The sample standard deviation of the medians over sqrt(their count): the standard error of their mean.
double standard_error(const std::vector<double>& medians) {
  const double k = double(medians.size());
  const double mean = std::accumulate(medians.begin(), medians.end(), 0.0) / k;
  double squares = 0.0;
  for (const double m : medians) squares += (m - mean) * (m - mean);
  return std::sqrt(squares / (k - 1.0) / k);
}

std::vector<std::vector<double>> parts_of(const point_series& s) {
  std::vector<std::vector<double>> parts;
  for (const auto& [replication, samples] : s.by_replication) parts.push_back(samples);
  return parts;
}

}  // namespace

median_interval replicated_interval(const std::vector<std::vector<double>>& by_replication) {
  std::vector<double> pooled;
  for (const auto& r : by_replication) pooled.insert(pooled.end(), r.begin(), r.end());
  auto out = order_statistic_interval(pooled);
  const auto medians = replication_medians(by_replication);
  if (medians.size() < 2) return out;
  const double half = student_t_975(static_cast<int>(medians.size()) - 1) * standard_error(medians);
  out.low = std::min(out.low, out.median - half);
  out.high = std::max(out.high, out.median + half);
  return out;
}

median_interval point_series::interval() const { return replicated_interval(parts_of(*this)); }

int exploration_replications(const protocol& p) {
  return std::min(std::max(p.replications, 3), p.max_replications);  // parsing keeps max_replications >= replications
}

bool point_series::out_of_reach(const protocol& p) const {
  // Two medians cannot tell the spread between processes (their standard deviation has one degree of freedom, and
  // Student's t for it is 12.7): a series is given up only after a third replication, where the protocol allows
  // one. One replication (a trial loop's own samples) is judged on its within-process part alone.
  const auto replications = static_cast<int>(by_replication.size());
  if (replications == 2 && p.max_replications >= 3) return false;
  return projected_half_width(p) > p.precision;
}

double point_series::projected_half_width(const protocol& p) const {
  const auto parts = parts_of(*this);
  std::vector<double> pooled;
  for (const auto& r : parts) pooled.insert(pooled.end(), r.begin(), r.end());
  const auto within = order_statistic_interval(pooled);
  if (!within.attainable || !(within.median > 0.0)) return 0.0;
  const double bound = double(p.max_trials) * double(std::max(1, p.max_replications));
  const double n = double(pooled.size());
  // The order-statistic part at the bound: its width scales as 1/sqrt(n) for independent samples.
  double projected = within.relative_half_width() * std::sqrt(std::min(1.0, n / bound));
  // The between-process part at max_replications, with the medians' spread so far (two or more of them).
  const auto medians = replication_medians(parts);
  if (medians.size() >= 2 && p.max_replications >= 2) {
    const double k = double(medians.size()), slots = double(std::max<int>(p.max_replications, medians.size()));
    const double at_bound = student_t_975(static_cast<int>(slots) - 1) * standard_error(medians) * std::sqrt(k / slots);
    projected = std::max(projected, at_bound / within.median);
  }
  return projected;
}

const char* to_string(stop_reason reason) { return detail::name_of(k_stop_reason_names, reason, "stop_reason"); }

std::string series_key(const sample_record& s) {
  std::ostringstream key;
  key << s.variant << '\x1f' << s.layout << '\x1f' << s.memory_kind << '\x1f' << s.direction << '\x1f' << s.block_size
      << '\x1f' << to_string(s.timer) << '\x1f' << s.bytes << '\x1f' << to_string(s.cache);
  return key.str();
}

series_by_point group_series(const std::vector<sample_record>& samples) {
  series_by_point out;
  for (const auto& s : samples) {
    if (!summarised(s)) continue;
    out[s.point][series_key(s)].by_replication[s.replication].push_back(s.seconds);
  }
  return out;
}

namespace {

// The rule a replication's trial loop stops on, short of its time and of max_trials: every series met or out of
// reach on the samples it has.
bool series_settled(const std::map<std::string, point_series>& series, const protocol& p) {
  if (series.empty()) return true;  // nothing accepted to make precise
  return std::all_of(series.begin(), series.end(), [&](const auto& s) {
    return s.second.interval().relative_half_width() <= p.precision || s.second.out_of_reach(p);
  });
}

// How many replications of the point stopped their trials on their share of the time: past the exploration
// replications (which run the least trials and no more), short of max_trials, with their own samples neither
// within the precision nor out of reach.
int timed_out_replications(const std::map<std::string, point_series>& series, const protocol& p) {
  std::map<std::int32_t, std::map<std::string, point_series>> by_replication;
  for (const auto& [key, s] : series)
    for (const auto& [replication, samples] : s.by_replication)
      by_replication[replication][key].by_replication[replication] = samples;
  int timed_out = 0;
  for (const auto& [replication, own] : by_replication) {
    if (replication < exploration_replications(p)) continue;
    std::size_t trials = 0;
    for (const auto& [key, s] : own) trials = std::max(trials, s.by_replication.begin()->second.size());
    if (trials >= std::size_t(p.trials) && trials < std::size_t(p.max_trials) && !series_settled(own, p)) ++timed_out;
  }
  return timed_out;
}

}  // namespace

bool trials_done(const std::vector<sample_record>& replication_samples, std::int64_t point, const protocol& p,
                 double wall_seconds) {
  const auto series = group_series(replication_samples);
  const auto here = series.find(point);
  if (here == series.end()) return true;
  return wall_seconds >= p.max_seconds / p.replications || series_settled(here->second, p);
}

std::set<std::int64_t> settled_points(const std::vector<sample_record>& samples, const protocol& p) {
  std::set<std::int64_t> settled;
  if (!p.adaptive()) return settled;
  for (const auto& [point, series] : group_series(samples))
    if (series_settled(series, p) || timed_out_replications(series, p) >= p.replications) settled.insert(point);
  return settled;
}

stop_reason stop_reason_of(const std::map<std::string, point_series>& series, const std::string& key,
                           const protocol& p) {
  if (!p.adaptive()) return stop_reason::fixed;
  const auto& mine = series.at(key);
  if (mine.interval().relative_half_width() <= p.precision) return stop_reason::precision;
  if (mine.out_of_reach(p)) return stop_reason::out_of_reach;
  if (timed_out_replications(series, p) >= p.replications) return stop_reason::time_out;
  // Still short of it: as long as replications are left this means "not settled"; after the last, the reason.
  return stop_reason::max_replications;
}

}  // namespace kstudy
