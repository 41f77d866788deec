#pragma once
// The study's sinks: the HDF5 archive (the record of a run, schema in docs/archive_schema.md), a JSON
// copy of the same content, and the console table; plus the archive's read side (resume, reports).
#include <cstddef>
#include <iosfwd>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/records.hpp"
#include "kstudy/sink.hpp"

namespace kstudy {

// Written as the root attribute schema_version; bump on any incompatible change of the layout.
// 2 added occupancy to samples and summary; 3 added the health table; 4 replaced samples.gate_passed by
// the verdict samples.gate and added the variants table; 5 added variants.axes; 6 added variants.rung,
// variants.implementation, the pin timer and three profile counters; 7 added depth (a third axis) to every
// table keyed by a point, ceilings.flops / flops_per_second (compute roofs), variants.compute_ceiling,
// variants.peak_device_bytes and variants.tuned_parameters; 8 added ceilings.clock; 9 added what the GPU did
// during each timed region (samples.energy_joules, power_watts, min_sm_clock_mhz, throttle_reasons), the cache
// mode (samples.cache, flush_bytes, flush_seconds; summary.cache) and the in-point readings of health; 10 renamed
// the gate counts; 11 added the profile counters of a roofline from counters (flop instructions per precision,
// tensor instructions and ops, pipe utilisation, IPC, warp stall reasons, local-memory bytes); 12 added the GPU of
// every sample (samples.device_uuid, device_pci_bus_id, device_model).
inline constexpr const char* archive_schema_version = "14";
// Older versions are still read (not appended to): occupancy reads as 0 (version 1), health as no rows
// (versions 1 and 2), variants as no rows and gate as passed / failed from gate_passed 1 / 0 (1 to 3), variants.rung as
// 0 (1 to 5), depth as 1 and peak_device_bytes as -1 (1 to 6); samples and health read energy and power as NaN, clocks
// and reasons as -1 and the cache mode as warm (1 to 8); the profile's schema 11 counters read as NaN (1 to 10); the
// samples' device as "" (1 to 11).
bool archive_schema_readable(const std::string& version);

enum class open_mode {
  create,     // new archive; fails if the path exists
  overwrite,  // new archive; replaces an existing file
  append,     // adds to an existing archive, or creates one
  resume,     // adds to an existing archive; fails if there is none
};
const char* to_string(open_mode mode);
open_mode parse_open_mode(const std::string& name);  // throws std::invalid_argument naming the value

// Opening or replacing an archive was refused because another process holds it open (a kstudy run
// still writing it, a reader holding it while this process would write); the file was not changed.
class archive_in_use : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An archive damaged after it was written (cut short, bits flipped): HDF5 cannot read part of it, or an
// object's content no longer matches the checksum its writer stored (docs: src/archive/detail/hdf5_digest.hpp).
// The message names the file, what is wrong, and that kstudy salvage recovers the finished points.
class archive_damaged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads every object of the archive and checks its checksums; throws archive_damaged. Readers call it once
// per file state (size, modification time) on their own; merge and --resume need not call it.
void verify_archive(const std::string& path);

// The HDF5 identifiers this process holds (files, groups, datasets, attributes, dataspaces, datatypes,
// property lists), the library's own predefined ones included: compare two readings. Reading any archive,
// damaged ones included, leaves the count as it was. A leftover identifier stays in HDF5's library state
// until exit, where freeing what a damaged file left in it can crash the process (the archive fuzzer
// checks the count after every input; the readers themselves shut the library down between files).
std::size_t hdf5_identifiers_open();

// One experiment's definition and the rows kept with its units, as read from archives to be written to a new one
// (salvage: a damaged archive's intact units; merge: the shards'). Each writer adds what it holds of its own (the
// ceilings: one table, or one per shard; salvage the profile) and writes the tables in its own order.
struct experiment_rows {
  experiment_record record;
  std::vector<sample_record> samples;
  std::vector<gate_record> gates;
  std::vector<variant_record> variants;
  std::vector<attribution_record> attribution;
  std::vector<health_record> health;  // one row per (point, replication): kept with its unit
};

// `kstudy salvage`: copies every readable, intact finished (point, replication) unit of a damaged archive
// (with its experiment definitions, ceilings and run metadata) into a new archive that report reads and
// run --resume completes. Units whose rows touch a lost range, and tables whose checksum fails, are left
// out; summaries are not copied (--resume writes them). Written to a temporary file renamed into place.
struct salvage_report {
  std::int64_t samples_kept = 0;
  std::int64_t units_kept = 0;
  std::vector<std::string> lost;  // one line per thing left out, naming it and why
};
salvage_report salvage_archive(const std::string& damaged, const std::string& out, bool overwrite);

// Writes straight to the final path. Every HDF5 failure throws std::runtime_error naming the HDF5 call
// and the archive's path (HDF5's own error printing is silenced). Not thread-safe: one writer.
class hdf5_sink : public result_sink {
 public:
  explicit hdf5_sink(const std::string& path, open_mode mode = open_mode::create);
  ~hdf5_sink() override;
  hdf5_sink(const hdf5_sink&) = delete;
  hdf5_sink& operator=(const hdf5_sink&) = delete;

  // Throws std::runtime_error unless a file can be created at path (its directory exists and accepts a
  // new file; path is not a directory). Call before measuring so a bad --output fails in seconds.
  static void check_writable(const std::string& path);
  // check_writable plus what the mode needs: create refuses an existing path, resume needs an existing
  // HDF5 file, append/resume refuse an existing file that is not HDF5.
  static void check_openable(const std::string& path, open_mode mode);

  const std::string& path() const;

  void begin(const run_metadata& metadata) override;
  // On an experiment already in the archive the fingerprints must match (else std::runtime_error naming
  // the archive, the experiment and both fingerprints); the existing definition and protocol are kept.
  void begin_experiment(const experiment_record& experiment) override;
  // Sets one root attribute without touching the others (begin() replaces them all).
  void write_root_attribute(const std::string& key, const std::string& value);
  // /shards/<index>: the shard's root attributes (plus `source`), its /environment as the attributes of
  // /shards/<index>/environment, and its ceilings as /shards/<index>/ceilings. Refuses an index twice.
  void write_shard(const shard_record& shard);
  void flush() override;  // H5Fflush: a process killed afterwards leaves every row so far readable
  void end_experiment(const std::string& name) override;
  void finish() override;  // flushes and closes; the sink accepts no further calls

 protected:
  // Appends the rows to the open experiment's dataset of their type, creating an optional one (the profile)
  // on first use, and writes the batch's attributes on it (replacing any of the same name) beside its units.
  void do_write(const record_batch& batch) override;

 private:
  struct state;  // keeps hdf5.h out of this header
  std::unique_ptr<state> m_state;
};

// Read side. Each opens the archive read-only and throws std::runtime_error naming the path (and the
// experiment) on failure.
std::vector<std::string> list_experiments(const std::string& path);  // sorted by name
run_metadata read_metadata(const std::string& path);
experiment_record read_experiment(const std::string& path, const std::string& experiment);
std::vector<sample_record> read_samples(const std::string& path, const std::string& experiment);
std::vector<gate_record> read_gates(const std::string& path, const std::string& experiment);
std::vector<ceiling_record> read_ceilings(const std::string& path, const std::string& experiment);
std::vector<summary_record> read_summaries(const std::string& path, const std::string& experiment);
std::vector<attribution_record> read_attribution(const std::string& path, const std::string& experiment);
// The /shards records of a merged archive, by index (empty for any other archive).
std::vector<shard_record> read_shards(const std::string& path);
std::vector<health_record> read_health(const std::string& path, const std::string& experiment);     // none before v3
std::vector<variant_record> read_variants(const std::string& path, const std::string& experiment);  // none before v4
// The profile table and its attributes (units, ncu version, command line, ...); empty where the experiment
// has no profile table (every archive `kstudy run` writes).
std::vector<profile_record> read_profile(const std::string& path, const std::string& experiment);
std::map<std::string, std::string> read_profile_attributes(const std::string& path, const std::string& experiment);

// The same content as one JSON document, written at finish() to path + ".tmp" and renamed onto path, so
// a reader never sees a partial file (and a crashed run leaves no JSON, only the flushed archive).
class json_sink : public result_sink {
 public:
  explicit json_sink(const std::string& path);  // checks up front that path is writable
  ~json_sink() override;
  json_sink(const json_sink&) = delete;
  json_sink& operator=(const json_sink&) = delete;

  void begin(const run_metadata& metadata) override;
  void begin_experiment(const experiment_record& experiment) override;
  void flush() override {}  // the document is only complete at finish()
  void end_experiment(const std::string& name) override;
  void finish() override;

 protected:
  // Rows go to the experiment's array named after their table; attributes to "<table>_attributes".
  void do_write(const record_batch& batch) override;

 private:
  struct state;
  std::unique_ptr<state> m_state;
};

// Human-readable progress: gate failures as soon as they arrive, and per experiment an aligned table of
// its summary rows (printed at end_experiment, so one table per experiment) and of its ceilings.
class console_sink : public result_sink {
 public:
  explicit console_sink(std::ostream& out);
  ~console_sink() override;

  void begin(const run_metadata& metadata) override;
  void begin_experiment(const experiment_record& experiment) override;
  void flush() override;
  void end_experiment(const std::string& name) override;
  void finish() override;

 protected:
  // Samples, health rows, gates, ceilings and summaries; every other table is for the archive and the report.
  void do_write(const record_batch& batch) override;

 private:
  void count_samples(const std::vector<sample_record>& samples);
  void count_health(const std::vector<health_record>& health);
  void print_gate_failures(const std::vector<gate_record>& gates);
  void print_pending();

  std::ostream& m_out;
  std::string m_experiment;
  std::vector<summary_record> m_summaries;
  std::vector<ceiling_record> m_ceilings;
  std::int64_t m_samples = 0;
  std::int64_t m_rejected = 0;
  std::int64_t m_gate_failures = 0;
  std::int64_t m_failed = 0;     // samples whose variant threw or hit a CUDA error (status failed/aborted)
  std::int64_t m_skipped = 0;    // points a variant could not run (status skipped, e.g. out of memory)
  std::int64_t m_throttled = 0;  // samples taken while the GPU reported a slowdown reason
  std::int64_t m_set_aside = 0;  // of those, excluded or re-measured by the protocol's throttling policy
  std::int64_t m_health_rows = 0;
  std::int64_t m_health_available = 0;
  std::string m_first_failure;
  std::string m_health_device;  // a device name, or why NVML was unavailable
};

}  // namespace kstudy
