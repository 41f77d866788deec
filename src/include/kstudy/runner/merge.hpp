#pragma once
// kstudy merge: the shard archives of one sharded run (kstudy run --shard K/N, one per Slurm array task)
// into one archive with every raw sample once, summaries recomputed as the runner computes them, and a
// record of which shards went in (docs/archive_schema.md, "Merged archives").
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/records.hpp"

namespace kstudy {

struct merge_request {
  std::string out;
  std::vector<std::string> shards;
  bool force = false;      // merge a mixed set (schema, experiments, build, hardware, overlaps), with warnings
  bool partial = false;    // merge although shards of 0..N-1 are missing or incomplete (recorded in the archive)
  bool overwrite = false;  // replace an existing OUT
  std::string command_line;
  // The inputs are one whole run each, repeated on different devices (kstudy run --devices
  // --replicate-on-every-device), not shards: input i is recorded as shard i of N and every sample is kept,
  // its device telling the copies apart.
  bool device_replicas = false;
  std::vector<ceiling_record> extra_ceilings;  // added to every experiment's ceilings (peer-to-peer copies)
};

struct merge_report {
  int shard_count = 0;
  std::vector<int> merged;             // shard indices taken
  std::vector<int> missing;            // of 0..N-1, no archive given
  std::vector<int> incomplete;         // given, but not marked complete (interrupted, failed or still running)
  std::vector<std::string> warnings;   // problems --force merged past
  std::int64_t samples = 0;            // sample rows in OUT
  std::int64_t duplicate_samples = 0;  // rows of units that another shard also held (dropped; --force only)
  bool written = false;                // false: missing/incomplete shards and no --partial; OUT untouched
};

// The set does not measure one thing (or cannot be read); every problem found, one per entry.
class merge_refused : public std::runtime_error {
 public:
  explicit merge_refused(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return m_problems; }

 private:
  std::vector<std::string> m_problems;
};

// Throws merge_refused for an inconsistent set unless request.force (then the problems become warnings),
// std::runtime_error for unreadable input or an unusable OUT. OUT is written to a temporary file beside it
// and renamed into place, so it is either absent (or as before) or complete.
merge_report merge_shards(const merge_request& request);

}  // namespace kstudy
