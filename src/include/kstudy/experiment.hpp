#pragma once
// Declarative experiments. JSON, because the same text is stored verbatim in the archive and read
// back by Python reports with no extra parser, nlohmann_json is a Debian package, and strict
// validation (unknown keys, types, ranges) is straightforward over its DOM.
//
// A file describes one experiment of one kind. The kinds register themselves (kstudy/experiment_kind.hpp,
// one file each under src/study/kinds/, each with its own keys and their parser); the keys below are those of
// kind `sweep`, which runs the variants of one or more operations over the operations' axes:
//   {
//     "name": "rows_sweep", "description": "...", "kind": "sweep",
//     "operation": "scoring",              // or a list of operations with the same axes
//     "rows": {"from": 1024, "to": 16777216, "factor": 2},   // one key per axis: a list or a range
//     "features": [16],
//     (or "shapes": [[1048576, 16], [262144, 256]]: explicit points, one extent per axis, instead of the grid)
//     "variants": ["all"],                 // names, name@backend or families; "all" = every variant
//     "memory": ["pageable", "pinned"],    // host memory kinds for one-shot timers
//     "block_sizes": [0],                  // 0 = the variant's default
//     "row_padding": 3,                    // extra elements per row for padded tables
//     "timers": ["host_wall", "resident_wall", "device_events", "one_shot"],   // + "energy": calls back to
//                                          // back over KSTUDY_ENERGY_WINDOW_MS, time and energy per call
//     "cache": "warm",                     // or "cold" (caches flushed before every timed region), or both:
//                                          // ["warm", "cold"] runs every point in each mode
//     "protocol": {"warmups": 2, "trials": 7, "replications": 3, "seed": 20261130,
//                  "threads": 8, "shuffle": true,
//                  "precision": 0.01, "max_trials": 140, "max_replications": 9, "max_seconds": 10,
//                                          // adaptive sampling: optional; trials and replications are then
//                                          // the least a point gets (kstudy/precision.hpp)
//                  "throttled": "remeasure", "cool_down_s": 30, "max_remeasures": 2}
//                                          // throttled points: accept (default), exclude or remeasure
//   }
// `kstudy list` names every kind with what it measures.
#include <any>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "kstudy/records.hpp"

namespace kstudy {

// What a replication does with the samples of a point whose GPU reported a slowdown (a power cap, thermal or HW
// slowdown before, during or after the point: kstudy::health_guarded_sink flags every sample of it `throttled`).
enum class throttle_policy {
  accept,     // summarised like the others, flagged and counted (the default; reports say how many)
  exclude,    // kept in the archive with status "excluded: throttled (...)", left out of every summary
  remeasure,  // measured again after a cool-down, at most max_remeasures times: the earlier attempts' samples
              // kept as "remeasured: throttled (...)", the last attempt's accepted (flagged if still throttled)
};
const char* to_string(throttle_policy policy);
throttle_policy parse_throttle_policy(const std::string& name);

struct protocol {
  int warmups = 2;
  int trials = 7;
  int replications = 3;
  std::uint64_t seed = 20261130;
  int threads = 8;
  bool shuffle = true;
  // Adaptive sampling to a stated precision (kstudy/precision.hpp); 0 keeps the fixed trials x replications
  // above. Otherwise those are the least a point gets: trials go on within a replication (up to max_trials)
  // and replications are added for the points still short of it (up to max_replications), until the 95%
  // interval of every series' median at the point is within +-precision of it (or projected out of reach of
  // it within these bounds), or until the point has had max_seconds of wall time in its trial loops. Parsing
  // fills the three bounds, so the stored definition states them.
  double precision = 0.0;
  int max_trials = 0;
  int max_replications = 0;
  double max_seconds = 0.0;

  // Throttled points (throttle_policy); parsing fills the cool-down and the bound under remeasure only.
  throttle_policy throttled = throttle_policy::accept;
  double cool_down_seconds = 0.0;
  int max_remeasures = 0;

  bool adaptive() const { return precision > 0.0; }
  // Replication indices a run may use: shards and resume number the (point, replication) units by it.
  int replication_slots() const { return adaptive() ? max_replications : replications; }
};

struct experiment {
  std::string name;
  std::string description;
  std::string kind = "sweep";
  std::string source;  // the file it came from
  // Kinds over operations (sweep, cold_compile): the operations, their axis names and the problem points. These
  // and the fields down to `cache` are parsed by the operation kinds' shared parser
  // (experiment_fields::parse_operation_fields, which the fuzzer and out-of-tree kinds reuse) and read by the
  // runner's sweep_points(), select_variants() and `kstudy profile`, not by one kind alone.
  std::vector<std::string> operations;
  std::vector<std::string> axes;
  std::vector<std::vector<std::int64_t>> points;    // extents per point, in axis order (the grid or "shapes")
  std::vector<std::string> variants{"all"};         // also what `run --variants` overrides
  std::vector<std::int64_t> block_sizes{0};         // sweep_points() crosses every problem point with them
  std::int64_t row_padding = 3;                     // the padded layout's shape: inputs, footprints, profile
  std::vector<std::string> memory{"pageable"};      // host memory kinds of one-shot calls
  std::vector<cache_mode> cache{cache_mode::warm};  // sweep_points() times every point in each; `run --cache`
  std::vector<timer_kind> timers;  // every kind: what its samples time (the archive and reports read them)
  kstudy::protocol protocol;
  std::string definition_json;  // normalised definition, as stored in the archive

  std::string fingerprint() const;  // stable hash of the definition (protocol overrides included)

  // What one kind alone reads (a transfer's sizes and directions, a layout conversion's table grid) lives in a
  // struct the kind declares beside its code: its parser sets it, its point count and runner read it back. So a
  // new kind adds no field here, and no kind borrows another's. Held by value: copies of an experiment (run
  // overrides, shards) carry their own.
  template <class P>
  void set_parameters(P parameters) {
    m_kind_parameters = std::move(parameters);
  }
  // The parameters the kind's parser set; std::logic_error naming the experiment and its kind when they were never
  // set or are of another type (code of one kind reading another kind's experiment).
  template <class P>
  const P& parameters() const {
    if (const auto* p = std::any_cast<P>(&m_kind_parameters)) return *p;
    throw std::logic_error("experiment '" + name + "' (kind " + kind + ", " + source + "): " +
                           (m_kind_parameters.has_value() ? "its kind parameters are not of the type asked for (" +
                                                                std::string(typeid(P).name()) + ")"
                                                          : "its kind's parser set no parameters") +
                           "; only the code of kind " + kind + " reads them");
  }

 private:
  std::any m_kind_parameters;
};

// Parses and validates; throws experiment_error naming the file, the field and the problem.
experiment parse_experiment(const std::string& text, const std::string& source);
experiment load_experiment(const std::string& path);

// A built-in name (<name>.json in the experiment folders of kstudy/resources.hpp) or a path.
std::string resolve_experiment_path(const std::string& name_or_path);
std::vector<std::string> builtin_experiment_names();

class experiment_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kstudy
