#pragma once
// Fault injection for the reliability tests, read by the study runner (never by a variant):
//
//   KSTUDY_INJECT_FAULT=<variant>:<kind>[:<point>]
//
// <variant> is matched like --variants (name, name@backend or family). The runner wraps each matching
// variant it prepares at every point (or only at point index <point>). For the first three kinds
// that variant's first timed run fails after running (its gate and warm-ups are untouched, so the failure
// is the trial's):
//   throw   a host exception (every flavour, every variant)
//   launch  a kernel launch with an invalid configuration on the variant's stream: a CUDA error that
//           leaves the context usable (cuda flavour, device variants)
//   trap    a kernel that executes __trap() on the variant's stream: a sticky error that destroys the
//           CUDA context (cuda flavour, device variants)
// The fourth runs normally but returns slightly wrong output, so that the real gate must catch it:
//   corrupt every download() of scores and flags (what the gate reads) moves one score, on the first
//           row far from the threshold, to just over twice its gate tolerance from the variant's own
//           value (so over the tolerance from the reference), flag left as it was: the gate rejects the
//           variant at that point with one score failure (every flavour, every variant)
//   corrupt_late  as corrupt, but only the downloads after the first timed run: the gated run is right, so
//           only the runner's re-check of the last timed run's output can reject the variant's samples
// The last leaves output and failures alone and makes the variant slower, so that a regression gate
// (`kstudy compare --gate`) has a known regression to catch:
//   slow[=F]  every run takes about F times as long (default 2, F from 1 to 100): a run that returns when its
//           work is done is followed by a busy wait of (F - 1) times its own duration; a run that only queues
//           its work (a device variant) queues it round(F) times, at least twice (every flavour, every variant)
// And one stands for a machine that cannot run the variant at all (arch-specific code on another GPU):
//   unavailable  prepare() throws variant_unavailable: the runner records one "skipped: ..." sample at each
//           point and goes on, as it does for a real one (every flavour, every variant)
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/variant.hpp"

namespace kstudy {

enum class fault_kind {
  host_exception,
  invalid_launch,
  device_trap,
  corrupt_output,
  late_corrupt_output,
  slow_down,
  unavailable
};
const char* to_string(fault_kind kind);

struct fault_plan {
  fault_kind kind = fault_kind::host_exception;
  std::string pattern;                // as given
  std::set<std::string> variant_ids;  // the registered variants it matches in this build
  std::int64_t point = -1;            // -1: every point
  double slowdown = 1.0;              // slow_down: how many times as long every run takes
  bool applies_to(const std::string& variant_id, std::int64_t at_point) const {
    return variant_ids.count(variant_id) != 0 && (point < 0 || point == at_point);
  }
};

// Parses a KSTUDY_INJECT_FAULT value; throws std::invalid_argument naming the variable and the problem
// (malformed value, unknown kind, no matching variant, a CUDA kind in a build without CUDA or for a
// variant that does not run on a CUDA device).
fault_plan parse_fault_plan(const std::string& value);
// The plan in the environment, if KSTUDY_INJECT_FAULT is set and not empty.
std::optional<fault_plan> fault_plan_from_environment();

// Forwards everything to the wrapped variant; after arm(), the next run() runs the variant and then
// injects the fault (once). A slow_down wrapper needs no arming either: every run() is `slowdown` times as long. A
// corrupt_output wrapper needs no arming: it corrupts every download(), through the operation's own corrupt() (just
// beyond the gate's tolerance in one output); a late_corrupt_output one corrupts the downloads after its first armed
// run.
class fault_injecting_variant final : public variant {
 public:
  fault_injecting_variant(std::unique_ptr<variant> inner, fault_kind kind, std::string variant_id, const operation& op,
                          double slowdown = 1.0);

  void arm() { m_armed = true; }

  void prepare(const problem_data& problem, const run_options& options) override;
  void run() override;
  void upload(const std::vector<host_span>& inputs) override { m_inner->upload(inputs); }
  void download(const std::vector<host_span>& outputs) override;
  void poison() override { m_inner->poison(); }
  void* stream() const override { return m_inner->stream(); }
  bool queues_asynchronously() const override { return m_inner->queues_asynchronously(); }
  bool enqueues_run() const override { return m_inner->enqueues_run(); }
  void enqueue_upload(const std::vector<host_span>& inputs) override { m_inner->enqueue_upload(inputs); }
  void enqueue_run() override;
  void enqueue_download(const std::vector<host_span>& outputs) override { m_inner->enqueue_download(outputs); }
  void wait() override { m_inner->wait(); }
  double calculated_occupancy() const override { return m_inner->calculated_occupancy(); }
  std::vector<std::pair<std::string, std::int64_t>> tuned_parameters() const override {
    return m_inner->tuned_parameters();
  }

 private:
  void fire_if_armed();
  std::unique_ptr<variant> m_inner;
  fault_kind m_kind;
  std::string m_variant_id;
  const operation* m_operation;
  double m_slowdown;
  const problem_data* m_problem = nullptr;  // the prepared inputs, for the tolerance a corruption must exceed
  bool m_armed = false;
  bool m_late = false;  // late_corrupt_output: the first timed run has happened
};

}  // namespace kstudy
