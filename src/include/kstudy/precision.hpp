#pragma once
// Adaptive sampling to a stated precision (protocol "precision", `kstudy run --precision`): instead of a fixed
// trials x replications, a point is measured until the 95% confidence interval of its median is within
// +-precision of the median, for every (variant, timer, ...) series at the point, or until its time-out.
//
// The interval is computed across replications, not only within one: a replication is a fresh process, and
// what differs between processes (allocation addresses, clocks after a cool-down, another context) is part of
// the spread a reader's next run will see. Two intervals are joined:
//   - the distribution-free interval of the pooled median from order statistics (a binomial count: no
//     assumption about the shape of the distribution; bimodal and heavy-tailed timings included);
//   - with two or more replications, Student's t interval of the mean of the replications' medians, around
//     the pooled median (a drift or a step between processes widens it even when each process is tight).
// The reported interval is the hull of both; its relative half-width is the larger side over the median.
//
// Replications come before trials: the first exploration_replications(p) replications run the least trials,
// so the spread between processes, which more trials cannot narrow, is known before any are added (on an H100,
// `quick` and `plain_baseline` differ from process to process by a median 4-6%: a 1% target is out of reach for
// most of their series, and spending trials first found that out only after the time budget).
// Sampling then stops at the first of (per point; statistics per series, a point is every series there):
//   - precision: every series' interval within the target;
//   - out of reach: a series whose interval, projected to the bounds, stays wider than the target. The
//     order-statistic part narrows as 1/sqrt(samples), so it is projected to max_trials x max_replications
//     samples; the between-process part narrows only with replications, so it is projected to max_replications
//     with the spread of the medians so far (from three of them: two cannot tell it). Such a series stops as
//     soon as that is seen (at six samples at the earliest), instead of spending the bounds on a target it cannot meet
//     (pipelined copies from pageable memory, at +-20-50% per call, were the first measured case:
//     docs/performance_notes.md);
//   - time-out: max_seconds is wall time added past the least trials, in `replications` equal shares: a
//     replication's trial loop stops when it has used one share, and a point that has used them all is out of
//     time;
//   - max_replications: every replication the protocol allows ran.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kstudy/experiment.hpp"
#include "kstudy/records.hpp"

namespace kstudy {

struct median_interval {
  double median = 0.0;
  double low = 0.0;
  double high = 0.0;
  std::int64_t samples = 0;
  // Whether [low, high] covers the median with 95% confidence: false below six samples, where even the whole
  // range does not (its half-width then reads as infinite, so no target is ever met on too few samples).
  bool attainable = false;
  // max(median - low, high - median) / median; infinity where it cannot be told (no samples, a zero median).
  double relative_half_width() const;
};

// The distribution-free 95% interval of the median of `samples` (order statistics x(j), x(n+1-j) with j the
// largest rank whose binomial tail stays within 2.5%). Below six samples no pair of ranks covers 95%: the
// interval is then the whole range and says so by its width (never narrower than the data can support).
median_interval order_statistic_interval(std::vector<double> samples);

// The interval of one series over replications: `by_replication` holds each replication's samples.
median_interval replicated_interval(const std::vector<std::vector<double>>& by_replication);

// Student's t quantile for a two-sided 95% interval with `df` degrees of freedom (df >= 1).
double student_t_975(int df);

// How many replications run the least trials before any adds trials: max(replications, 3), within
// max_replications (three medians are the fewest that tell the spread between processes).
int exploration_replications(const protocol& p);

// Why sampling of a series stopped, as the summary table records it.
enum class stop_reason {
  fixed,             // no precision asked: the protocol's fixed trials x replications
  precision,         // the interval met the target
  out_of_reach,      // the interval, projected to the bounds, stays wider than the target
  time_out,          // the point's time budget ended first
  max_replications,  // every replication the protocol allows ran, and the interval is still wider
};
const char* to_string(stop_reason reason);

// What a series at one point is: every sample field that tells two timed distributions apart, the point
// itself (index) included; replications and trials are what it pools over.
std::string series_key(const sample_record& sample);

// The series of the samples with status ok at each point index, by replication: the input of every
// precision decision (the trial loop's within a replication, skipped points and the parent's across them).
struct point_series {
  std::map<std::int32_t, std::vector<double>> by_replication;
  median_interval interval() const;
  // The relative half-width the interval would have at the protocol's bounds (see the top of this header);
  // 0 where too few samples tell (below six).
  double projected_half_width(const protocol& p) const;
  // Projected wider than the target; never judged on exactly two replications where a third is allowed.
  bool out_of_reach(const protocol& p) const;
};
// Samples of one experiment, grouped: point index -> series key -> its samples.
using series_by_point = std::map<std::int64_t, std::map<std::string, point_series>>;
series_by_point group_series(const std::vector<sample_record>& samples);

// Whether a replication stops adding trials at `point`, on its own samples so far and the wall time its trial
// loop has spent there: every series there is within the precision or out of reach on them, or the loop has
// used its share of max_seconds, or nothing there was accepted to make precise. Whether the point needs
// another replication is the parent's decision, on all of them (settled_points).
bool trials_done(const std::vector<sample_record>& replication_samples, std::int64_t point, const protocol& p,
                 double wall_seconds);

// Points an adaptive protocol measures no further (another replication skips them, the parent starts none for
// them): every series within the precision or out of reach, or the point out of time. Empty for a fixed one.
std::set<std::int64_t> settled_points(const std::vector<sample_record>& samples, const protocol& p);

// Why sampling of one series (series_key) at a point stopped, from what the archive holds of the point: `fixed`
// for a fixed protocol. A time-out is read from the samples: a replication whose trials stopped short of
// max_trials while its own samples met neither the precision nor out of reach stopped on its share of time.
stop_reason stop_reason_of(const std::map<std::string, point_series>& series, const std::string& key,
                           const protocol& p);

}  // namespace kstudy
