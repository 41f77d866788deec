#pragma once
// `kstudy profile EXPERIMENT... --out ARCHIVE`: per-kernel hardware counters of the device variants at
// representative points, read by Nsight Compute, stored as the experiments' `profile` tables.
//
// The parent checks everything it can before any GPU work (a CUDA build, the experiments, the output
// path, ncu, a visible GPU), then starts one child per point under
//   ncu --clock-control none --profile-from-start off --metrics ... --export REPORT kstudy __profile_point ...
// The child prepares each variant, runs it once for the correctness gate and once as a warm-up, then
// launches a marker kernel and the measured call between cudaProfilerStart and cudaProfilerStop. The
// parent reads the report back (ncu --import REPORT --csv --page raw --print-units base), splits the
// launches at the markers and writes the archive once, at the end (nothing on failure).
#include <cstdint>
#include <string>
#include <vector>

namespace kstudy {

struct profile_request {
  std::vector<std::string> experiments;  // built-in names or paths, as for `kstudy run`
  std::string out;                       // archive to write
  std::vector<std::string> variants;     // restricts every experiment's variant list when non-empty
  int points = 3;                        // points per experiment, spread over its point list; 0 = all
  std::string ncu;                       // explicit path to ncu (else found; see ncu::find_ncu)
  std::string keep;                      // folder that keeps ncu's reports, CSVs and logs (else removed)
  bool overwrite = false;
  bool quiet = false;
};

// Parent; returns the exit code (0: every variant profiled or skipped; 1: some failed, the archive holds
// them as failed rows). Throws std::runtime_error (no archive written) when the request cannot be run.
// Initialises Kokkos itself, after the checks.
int run_profile(const profile_request& request, const std::string& self_exe, int argc, char** argv);

// Indices of at most `limit` points spread evenly over `count` (first and last included); all when
// limit is 0 or at least count.
std::vector<std::int64_t> spread_points(std::int64_t count, int limit);

// Child, under ncu: `kstudy __profile_point RESULT_JSON ROWS FEATURES BLOCK_SIZE ROW_PADDING SEED VARIANT...`.
// No variant: one marker kernel only (the parent's probe of ncu and its metrics). Kokkos is initialised.
int run_profile_point(const std::vector<std::string>& args);

}  // namespace kstudy
