#pragma once
// The study runner: experiments -> gated samples -> archive. The parent process measures the
// ceilings and writes provenance, then re-executes itself once per replication (a fresh process each,
// as the protocol requires) and finally summarises what the children appended.
#include <cstdint>
#include <string>
#include <vector>

#include "kstudy/ceilings.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/records.hpp"
#include "kstudy/variant.hpp"

namespace kstudy {

// A deterministic slice of a run (kstudy run --shard K/N, one Slurm array task each). Every experiment's
// work units, (point, replication) numbered point * replications + replication, go round-robin to the
// N shards: unit u belongs to shard u % N. Replications of one point land on different shards when
// N <= replications, so each shard sees every problem size and the shards take similar time.
struct shard_spec {
  int index = 0;
  int count = 0;  // 0: not sharded (the whole run)
  bool sharded() const { return count > 0; }
  std::string text() const;  // "K/N"
};
// Parses "K/N" with 0 <= K < N; throws std::invalid_argument naming the value otherwise.
shard_spec parse_shard(const std::string& text);
bool in_shard(const shard_spec& shard, std::int64_t point, int replication, int replications);
// Number of points a replication of the experiment runs (the range of sample_record::point).
std::int64_t point_count(const experiment& e);
// (point, replication) units of the experiment in the shard.
std::int64_t shard_units(const experiment& e, const shard_spec& shard);

struct run_request {
  std::vector<std::string> experiments;  // built-in names or paths
  std::string out;                       // archive path
  int trials = 0;                        // overrides when > 0
  int replications = 0;
  int warmups = -1;                   // override when >= 0
  double precision = 0.0;             // adaptive sampling's target (a fraction), overriding when > 0
  double max_time = 0.0;              // its time budget per point (seconds of timed regions), when > 0
  std::vector<std::string> variants;  // restricts every experiment's variant list when non-empty
  std::string cache;                  // warm | cold: overrides the cache mode of the kinds that take one
  std::string throttled;              // accept | exclude | remeasure: overrides the protocol's throttling policy
  bool resume = false;
  bool overwrite = false;
  bool quiet = false;
  std::string json_out;  // optional JSON copy of the results
  shard_spec shard;      // only this shard's (point, replication) units
};

// The request's overrides as `kstudy run` arguments (--trials, --precision, ...): what a run started for it
// elsewhere (a Slurm task, a run per device) is given, written once so none is forgotten.
std::vector<std::string> override_arguments(const run_request& request);

// Parent: returns the process exit code. argv0 is re-executed for replications.
int run_study(const run_request& request, const std::string& self_exe, int argc, char** argv);

// Child: `kstudy __replicate ARCHIVE DEFINITION_FILE REPLICATION` (the definition file carries the shard).
int run_replication(const std::string& archive, const std::string& definition_file, int replication);

// Child of a cold_compile replication: `kstudy __first_call VARIANT EXTENT...` in a fresh process.
// Prints one JSON line: Kokkos initialisation, the first run (module load, first launch), a warm second
// run, and the gate verdict of the first run's output. `initialize_seconds` is measured by the caller.
int run_first_call(const std::string& variant_id, const std::vector<std::int64_t>& extents, double initialize_seconds);

// Parses an experiment file and applies the request's overrides (which become part of the
// definition, so resume and merge see them).
experiment prepare_experiment(const std::string& name_or_path, const run_request& request);

// What run_study checks before measuring: the kind is run by this build and passes its own check (every
// named variant exists, in this build or another flavour). Throws experiment_error naming file and field.
void check_experiment(const experiment& e);
// The variants of the experiment's operations it names that this build provides, in its order, each once.
// Names the registry declares without a factory here (another flavour's variants: the CUDA ones on a CPU
// build), or on a backend this build lacks, are skipped with a note; unknown names throw experiment_error
// naming the file and field.
std::vector<const registered_variant*> select_variants(const experiment& e);

// One point of an experiment over operations: an operation, the problem's extents (in its axes' order)
// and a block size; index = the point's position in the experiment (samples carry it for resume). The
// operations vary slowest, then the problem points, then the block sizes.
struct sweep_point {
  std::int64_t index = 0;
  const operation* op = nullptr;
  std::vector<std::int64_t> extents;
  std::int64_t block_size = 0;
  cache_mode cache = cache_mode::warm;
};
std::vector<sweep_point> sweep_points(const experiment& e);

// The variants-table row of a variant at a point: its identity and the models of what it moves and
// computes at the shape it runs (padding included). `kstudy run` and `kstudy profile` both store it.
variant_record describe_variant(const variant_info& info, const table_shape& shape, std::int64_t block_size);

// Median / IQR per point and timer over accepted samples, with bandwidth against the run's ceilings: the fraction
// of the roof the experiment's kind picks for each point (experiment_kind::roof; null: read_roof), and the 95%
// interval of each median across replications with why its point's sampling stopped (the experiment's protocol:
// `fixed` unless it is adaptive; kstudy/precision.hpp).
std::vector<summary_record> summarise(const std::vector<sample_record>& samples,
                                      const std::vector<ceiling_record>& ceilings, roof_rule roof = nullptr,
                                      const protocol& sampling = protocol{});

}  // namespace kstudy
