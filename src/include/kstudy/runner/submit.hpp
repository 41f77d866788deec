#pragma once
// kstudy submit: one experiment as a Slurm job array. Task K of N runs
// `kstudy run EXPERIMENT --shard K/N --out DIR/shard-K.h5 --resume` (a fresh archive, or the completion of
// an interrupted one), so `kstudy merge` can combine the shards and `submit --resume` resubmits only the
// shards whose archives are missing or incomplete.
#include <string>
#include <vector>

#include "kstudy/study.hpp"

namespace kstudy {

struct submit_request {
  std::string experiment;  // built-in name or path
  int array = -1;          // shards; -1 (not given) with --resume: the count the existing shard archives record
  std::string partition;
  std::string time;
  // Seconds before the time limit at which Slurm sends the batch shell SIGTERM (#SBATCH --signal=B:TERM@N),
  // so that the run stops cleanly after its current point; 0: no early signal.
  int stop_before = 120;
  int gpus_per_task = 0;                    // > 0: Slurm binds that many GPUs to each task (CUDA_VISIBLE_DEVICES)
  int cpus_per_task = 0;                    // 0: the experiment's OpenMP thread count
  std::string out_dir;                      // default: ./<experiment name>-shards
  std::vector<std::string> sbatch_options;  // extra `#SBATCH` lines, e.g. --account=abc or --exclusive
  bool dry_run = false;
  bool resume = false;
  run_request overrides;  // trials, replications, warmups, variants: passed on to every task's kstudy run
};

// Returns the exit code; prints the script (--dry-run) or what was submitted. Throws std::runtime_error
// (or experiment_error) naming the problem; nothing is written or submitted then.
int submit_study(const submit_request& request, const std::string& self_exe);

}  // namespace kstudy
