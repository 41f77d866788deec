#pragma once
// Declarative experiments. JSON, because the same text is stored verbatim in the archive and read
// back by Python reports with no extra parser, nlohmann_json is a Debian package, and strict
// validation (unknown keys, types, ranges) is straightforward over its DOM.
//
// A file describes one experiment:
//   {
//     "name": "rows_sweep", "description": "...", "kind": "scoring",
//     "rows": {"from": 1024, "to": 16777216, "factor": 2},   // or a list: [1024, 4096]
//     "features": [16],
//     (or, for kind scoring, "shapes": [[1048576, 16], [262144, 256]]: explicit rows x features
//      points instead of the rows x features grid; not together with rows/features)
//     "variants": ["all"],                 // names, name@backend or families; "all" = every variant
//     "memory": ["pageable", "pinned"],    // host memory kinds for one-shot timers
//     "block_sizes": [0],                  // 0 = the variant's default
//     "row_padding": 3,                    // extra elements per row for padded tables
//     "timers": ["host_wall", "resident_wall", "device_events", "one_shot"],
//     "protocol": {"warmups": 2, "trials": 7, "replications": 3, "seed": 20261130,
//                  "threads": 8, "shuffle": true}
//   }
// Kinds: scoring (the variants over the axes), transfer (host<->device copies over "sizes_bytes" and
// "directions"), launch (launch-overhead probes), cold_compile (first call per variant in a fresh
// process, and NVRTC), transpose (resident row-major -> feature-major conversion and break-even).
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
};

struct experiment {
  std::string name;
  std::string description;
  std::string kind = "scoring";
  std::string source;  // the file it came from
  std::vector<std::int64_t> rows, features, block_sizes{0}, sizes_bytes;
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes;  // explicit (rows, features) points, if given
  std::vector<std::string> variants{"all"}, memory{"pageable"}, directions{"h2d", "d2h"};
  std::vector<timer_kind> timers;
  std::int64_t row_padding = 3;
  kstudy::protocol protocol;
  std::string definition_json;  // normalised definition, as stored in the archive

  std::string fingerprint() const;  // stable hash of the definition (protocol overrides included)
  // The (rows, features) points of a scoring experiment: the explicit shapes, else the rows x features grid.
  std::vector<std::pair<std::int64_t, std::int64_t>> table_shapes() const;
};

// Parses and validates; throws experiment_error naming the file, the field and the problem.
experiment parse_experiment(const std::string& text, const std::string& source);
experiment load_experiment(const std::string& path);

// A built-in name (experiments/<name>.json, searched in the installed and source trees) or a path.
std::string resolve_experiment_path(const std::string& name_or_path);
std::vector<std::string> builtin_experiment_names();

class experiment_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kstudy
