#pragma once
// Declarative experiments. JSON, because the same text is stored verbatim in the archive and read
// back by Python reports with no extra parser, nlohmann_json is a Debian package, and strict
// validation (unknown keys, types, ranges) is straightforward over its DOM.
//
// A file describes one experiment of one kind. The kinds register themselves (kstudy/experiment_kind.hpp,
// one file each under src/study/kinds/); the fields below are those of kind `sweep`, which runs the
// variants of one or more operations over the operations' axes:
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
//                  "precision": 0.01, "max_trials": 140, "max_replications": 9, "max_seconds": 10}
//                                          // adaptive sampling: optional; trials and replications are then
//                                          // the least a point gets (kstudy/precision.hpp)
//   }
// `kstudy list` names every kind with what it measures.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/records.hpp"

namespace kstudy {

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
  // interval of every series' median at the point is within +-precision of it, or until the point has had
  // max_seconds of timed regions. Parsing fills the three bounds, so the stored definition states them.
  double precision = 0.0;
  int max_trials = 0;
  int max_replications = 0;
  double max_seconds = 0.0;

  bool adaptive() const { return precision > 0.0; }
  // Replication indices a run may use: shards and resume number the (point, replication) units by it.
  int replication_slots() const { return adaptive() ? max_replications : replications; }
};

struct experiment {
  std::string name;
  std::string description;
  std::string kind = "sweep";
  std::string source;  // the file it came from
  // Kinds over operations (sweep, cold_compile): the operations, their axis names and the problem points.
  std::vector<std::string> operations;
  std::vector<std::string> axes;
  std::vector<std::vector<std::int64_t>> points;  // extents per point, in axis order (the grid or "shapes")
  // Kinds over a table (transpose): its rows x features grid.
  std::vector<std::int64_t> rows, features;
  std::vector<std::int64_t> block_sizes{0}, sizes_bytes;
  std::vector<std::string> variants{"all"}, memory{"pageable"}, directions{"h2d", "d2h"};
  std::vector<std::string> pinning;  // kind transfer: page-locking calls timed per size (host_alloc, host_register)
  std::vector<timer_kind> timers;
  std::vector<cache_mode> cache{cache_mode::warm};  // kind sweep: the cache modes each point is timed in
  std::int64_t row_padding = 3;
  kstudy::protocol protocol;
  std::string definition_json;  // normalised definition, as stored in the archive

  std::string fingerprint() const;  // stable hash of the definition (protocol overrides included)
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
