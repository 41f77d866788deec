#pragma once
// Experiment kinds register themselves, like variants and operations: one file per kind under
// src/study/kinds/ holds its validation, its points and its runner, and registers them beside them:
//
//   const kstudy::experiment_kind_registration register_transfer{transfer_kind()};
//
// The parser, the runner, shards and resume look kinds up here; nothing enumerates them by hand.
#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kstudy/ceilings.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/records.hpp"

namespace kstudy {

class health_guarded_sink;
struct fault_plan;

// What a replication of one experiment gets to run its points with (in its own process).
struct replication_context {
  const experiment& definition;
  int replication = 0;
  health_guarded_sink& sink;           // every point is written through the GPU health guard
  const std::set<std::int64_t>& done;  // points to skip: already archived (resume) or another shard's
  const fault_plan* faults = nullptr;  // KSTUDY_INJECT_FAULT, if set
  bool quiet = false;
  std::string self_exe;  // for kinds that start fresh processes (cold_compile)
};

struct experiment_kind {
  std::string name;
  std::string description;  // one line, for kstudy list
  // The JSON keys the kind takes besides name, description, kind and protocol (for an operation kind,
  // its operations' axis names are accepted too).
  std::set<std::string> keys;
  // Fills the kind's fields of `e` from the document and adds their normalised form to `normalised`;
  // throws experiment_error naming the file and the field (parse helpers in kstudy/experiment_fields.hpp).
  std::function<void(const nlohmann::json& doc, experiment& e, nlohmann::json& normalised)> parse;
  // Whether the kind's points are problem points of operations, whose axis names are keys of the document.
  bool takes_operations = false;
  // Whether its samples time steady-state calls (warm-ups, then trials in one process), so a point's median is
  // the variant's time there. False for a kind timing first calls in fresh processes (cold_compile): a report
  // must not pool those with steady-state points. Stored with each experiment (experiment_facts.hpp).
  bool steady_state = true;
  // The roof each point's summary is quoted against (kstudy/ceilings.hpp); null: read_roof, the read roof of where
  // the variant ran, for its resident and host timings. A calibration kind names its own (a copy direction's own
  // bandwidth, the device copy roof).
  roof_rule roof = nullptr;
  // Points one replication runs, numbered 0..n-1 (sample_record::point; shards and resume count on it).
  std::function<std::int64_t(const experiment&)> point_count;
  // Checks before any measurement, beyond parsing (e.g. that every named variant exists in some build).
  std::function<void(const experiment&)> check;
  // Runs one replication's points not in ctx.done, writing each through ctx.sink.
  std::function<void(replication_context& ctx)> run;
};

class experiment_kind_registry {
 public:
  static experiment_kind_registry& instance();
  void add(experiment_kind kind);
  const experiment_kind* find(const std::string& name) const;
  std::vector<const experiment_kind*> all() const;  // sorted by name

 private:
  std::deque<experiment_kind> m_kinds;
};

struct experiment_kind_registration {
  explicit experiment_kind_registration(experiment_kind kind) {
    experiment_kind_registry::instance().add(std::move(kind));
  }
};

// One point of a replication under the protocol's throttling policy (kstudy::throttle_policy): opens the point on
// ctx.sink with its keys, runs `measure` (which writes the point's records through ctx.sink) and closes it. Under
// exclude a throttled point's ok samples are kept out of the summaries; under remeasure a throttled attempt's are
// kept as "remeasured: throttled (...)", the GPU gets the protocol's cool-down (outside any point) and the point is
// measured again, up to max_remeasures times. Every kind measures its points through it.
void measure_point(replication_context& ctx, const health_record& keys, const std::function<void()>& measure);

// The registered kind of an experiment; throws experiment_error naming the file when this build has none.
const experiment_kind& kind_of(const experiment& e);

}  // namespace kstudy
