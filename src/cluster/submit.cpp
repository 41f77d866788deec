#include "kstudy/runner/submit.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "kstudy/runner/archive.hpp"
#include "kstudy/runner/python_rungs.hpp"
#include "kstudy/build_info.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/platform/process.hpp"

namespace kstudy {
namespace {

namespace fs = std::filesystem;

// Single-quoted for bash: the script must survive any path.
std::string quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const auto candidate = fs::path(dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

// Runs program with args; returns its exit status and its stdout (and stderr with with_stderr; else its
// stderr goes to ours, so sbatch's warnings reach the user and cannot be mistaken for the job id).
// Not die_with_parent: sbatch and squeue are short client calls, and an sbatch killed half way with
// kstudy could leave a job array submitted whose id nobody was told; letting it finish costs nothing.
int capture(const std::string& program, const std::vector<std::string>& args, std::string& output, bool with_stderr) {
  platform::spawn_options options;
  options.argv.push_back(program);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.stdout_target = platform::stream_target::capture;
  if (with_stderr) options.stderr_target = platform::stream_target::capture;
  // sbatch exports our environment to the job's tasks, on other nodes: they find their own Python rungs.
  options.env = {{python_rungs_handoff_variable, ""}};
  auto result = platform::run_process(options);
  output += result.output;
  return result.status();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// "0-3" for a contiguous range, "1,4,7" otherwise (Slurm's --array syntax).
std::string array_list(const std::vector<int>& shards) {
  bool contiguous = true;
  for (std::size_t i = 1; i < shards.size(); ++i) contiguous = contiguous && shards[i] == shards[i - 1] + 1;
  if (contiguous && shards.size() > 1) return std::to_string(shards.front()) + "-" + std::to_string(shards.back());
  std::string out;
  for (const auto k : shards) out += (out.empty() ? "" : ",") + std::to_string(k);
  return out;
}

std::string shard_path(const fs::path& dir, int k) { return (dir / ("shard-" + std::to_string(k) + ".h5")).string(); }

enum class shard_state { missing, complete, incomplete, unreadable };

// What DIR/shard-K.h5 holds; throws when it is an archive of another run (experiment or sharding).
shard_state inspect(const std::string& path, int k, int count, const experiment& e) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return shard_state::missing;
  // The run creates an archive with its metadata and experiment groups in one go; a file without them
  // was cut short at that moment and is set aside (never deleted).
  run_metadata metadata;
  std::vector<std::string> experiments;
  try {
    metadata = read_metadata(path);
    experiments = list_experiments(path);
  } catch (const std::exception&) {
    return shard_state::unreadable;
  }
  const auto& root = metadata.root;
  const auto index = root.find("shard_index"), total = root.find("shard_count");
  const std::string want = std::to_string(k) + "/" + std::to_string(count);
  const std::string got = index == root.end() || total == root.end() ? "not a shard archive"
                                                                     : "shard " + index->second + "/" + total->second;
  if (got != "shard " + want)
    throw std::runtime_error(path + " is " + got + ", not shard " + want +
                             ": another run's archives are in this directory (choose another --out-dir)");
  if (experiments.empty()) return shard_state::unreadable;
  if (std::find(experiments.begin(), experiments.end(), e.name) == experiments.end())
    throw std::runtime_error(path + " holds another experiment (" + experiments.front() + "), not '" + e.name +
                             "'; choose another --out-dir");
  const auto record = read_experiment(path, e.name);
  if (record.fingerprint != e.fingerprint())
    throw std::runtime_error(path + " holds experiment '" + e.name + "' with fingerprint " + record.fingerprint +
                             ", this submission's definition has " + e.fingerprint() +
                             " (changed file or overrides?); choose another --out-dir");
  const auto complete = root.find("complete");
  return complete != root.end() && complete->second == "true" ? shard_state::complete : shard_state::incomplete;
}

// The shard count recorded by the shard archives already in dir (--resume without --array).
int recorded_count(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("shard-", 0) != 0 || entry.path().extension() != ".h5") continue;
    try {
      const auto root = read_metadata(entry.path().string()).root;
      const auto count = root.find("shard_count");
      if (count != root.end()) return std::stoi(count->second);
    } catch (const std::exception&) {
    }
  }
  return 0;
}

// Jobs this directory's earlier submissions started that Slurm still knows as pending or running.
std::vector<std::string> active_jobs(const fs::path& dir, const std::string& squeue) {
  std::vector<std::string> active;
  std::ifstream jobs(dir / "kstudy-submit.jobs");
  std::string line;
  while (std::getline(jobs, line)) {
    const std::string id = line.substr(0, line.find(' '));
    if (id.empty()) continue;
    std::string out;
    const int rc = capture(squeue, {"-h", "-j", id, "-o", "%i %T"}, out, true);
    if (rc == 0 && !trim(out).empty())
      active.push_back(id + " (" + trim(out).substr(0, 200) + ")");
    else if (rc != 0 && out.find("Invalid job id") == std::string::npos)
      throw std::runtime_error("cannot ask Slurm whether job " + id + " still runs (squeue: " + trim(out) + ")");
  }
  return active;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Every value written into the job script raw (an #SBATCH line) must stay one line: a newline in
// --sbatch-option=$'--account=x\necho INJECTED' would add a command of its own to the script.
void refuse_control_characters(const std::string& option, const std::string& value) {
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", c);
      throw std::runtime_error(option + " '" + value.substr(0, i) + "...' contains a control character (" + code +
                               " at position " + std::to_string(i) +
                               "): refused, every value becomes one line of the job script");
    }
  }
}

// A Slurm time limit in seconds: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
// "days-hours:minutes" or "days-hours:minutes:seconds", rounded up to whole minutes as Slurm does. 0: none
// (0, INFINITE, UNLIMITED); -1: a form this does not know (sbatch judges it).
long long time_limit_seconds(const std::string& text) {
  if (text == "INFINITE" || text == "UNLIMITED") return 0;
  long long days = 0;
  std::string rest = text;
  const bool with_days = rest.find('-') != std::string::npos;
  std::vector<long long> fields;
  try {
    if (with_days) {
      std::size_t used = 0;
      days = std::stoll(rest, &used);
      if (used != rest.find('-')) return -1;
      rest = rest.substr(used + 1);
    }
    std::stringstream parts(rest);
    std::string part;
    while (std::getline(parts, part, ':')) {
      if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) return -1;
      fields.push_back(std::stoll(part));
    }
  } catch (const std::exception&) {
    return -1;
  }
  if (fields.empty() || fields.size() > 3 || days < 0) return -1;
  long long seconds = 0;
  if (with_days) {  // days-hours[:minutes[:seconds]]
    const long long unit[] = {3600, 60, 1};
    for (std::size_t i = 0; i < fields.size(); ++i) seconds += fields[i] * unit[i];
    seconds += days * 86400;
  } else if (fields.size() == 1) {
    seconds = fields[0] * 60;
  } else if (fields.size() == 2) {
    seconds = fields[0] * 60 + fields[1];
  } else {
    seconds = fields[0] * 3600 + fields[1] * 60 + fields[2];
  }
  return (seconds + 59) / 60 * 60;
}

// The early stop must leave the task time to work: a signal due at or before the start would stop every
// attempt (and every requeue) before its first point.
void check_stop_before(const submit_request& request) {
  if (request.stop_before < 0 || request.stop_before > 65535)
    throw std::runtime_error("--stop-before " + std::to_string(request.stop_before) +
                             ": give 0 (no early stop) to 65535 seconds (the most Slurm's --signal takes)");
  const long long limit = request.time.empty() ? 0 : time_limit_seconds(request.time);
  if (request.stop_before > 0 && limit > 0 && request.stop_before >= limit)
    throw std::runtime_error("--stop-before " + std::to_string(request.stop_before) + " s is not shorter than --time " +
                             request.time + " (" + std::to_string(limit) +
                             " s): every task would be told to stop when it starts; give a longer --time or a "
                             "smaller --stop-before (0: no early stop)");
}

}  // namespace

namespace {

// The number of shards: --array, or with --resume the count the archives in the folder record.
int shard_count(const submit_request& request, const experiment& e, const fs::path& dir) {
  if (request.array != -1 && request.array < 1)
    throw std::runtime_error("--array must be at least 1, not " + std::to_string(request.array));
  int count = request.array;
  if (count == -1 && request.resume) count = recorded_count(dir);
  if (count < 1)
    throw std::runtime_error(request.resume ? "--resume found no shard archive in " + dir.string() + "; give --array N"
                                            : "--array N (the number of shards, at least 1) is required");
  const std::int64_t units = point_count(e) * e.protocol.replication_slots();
  if (count > units)
    throw std::runtime_error("--array " + std::to_string(count) + ": experiment '" + e.name + "' has only " +
                             std::to_string(units) + " (point x replication) units (" + std::to_string(point_count(e)) +
                             " points x " + std::to_string(e.protocol.replication_slots()) +
                             " replications); use at most that many shards");
  return count;
}

// Which shards to run: all, or (--resume) those whose archive is missing, incomplete or unreadable.
struct shard_plan {
  std::vector<int> shards, incomplete, unreadable;
  int complete = 0;
};

shard_plan plan_shards(const submit_request& request, const experiment& e, const fs::path& dir, int count) {
  shard_plan plan;
  for (int k = 0; k < count; ++k) {
    const auto state = inspect(shard_path(dir, k), k, count, e);
    if (!request.resume && state != shard_state::missing)
      throw std::runtime_error(dir.string() + " already holds shard archives (" + shard_path(dir, k) +
                               "): pass --resume to complete that set, or choose another --out-dir");
    if (state == shard_state::complete)
      ++plan.complete;
    else
      plan.shards.push_back(k);
    if (state == shard_state::incomplete) plan.incomplete.push_back(k);
    if (state == shard_state::unreadable) plan.unreadable.push_back(k);
  }
  return plan;
}

// No earlier job of this folder may still be queued or running (squeue), with or without --resume: its
// tasks write the same shard archives, and a second array started before the first has written any would
// otherwise pass every check on the archives. A folder without kstudy-submit.jobs needs no squeue.
void refuse_active_jobs(const submit_request& request, const fs::path& dir) {
  std::error_code ec;
  if (request.dry_run || !fs::exists(dir / "kstudy-submit.jobs", ec)) return;
  const std::string squeue = find_on_path("squeue");
  if (squeue.empty())
    throw std::runtime_error("squeue not found on PATH (needed to check that no earlier job of " + dir.string() +
                             " still runs)");
  const auto active = active_jobs(dir, squeue);
  if (active.empty()) return;
  std::string list;
  for (const auto& a : active) list += (list.empty() ? "" : ", ") + a;
  throw std::runtime_error("earlier jobs of " + dir.string() + " are still queued or running: " + list +
                           "; wait for them (squeue) or cancel them (scancel) before " +
                           (request.resume ? "--resume" : "submitting again (or choose another --out-dir)") +
                           ", so that no two tasks write one shard archive");
}

// sbatch, found on PATH; --dry-run needs none.
std::string slurm_client(const submit_request& request) {
  const std::string sbatch = find_on_path("sbatch");
  if (request.dry_run || !sbatch.empty()) return sbatch;
  throw std::runtime_error(
      "sbatch not found on PATH: kstudy submit needs Slurm's client commands (run it on a "
      "login node), or pass --dry-run to print the job script");
}

// The job array's script: array task K runs shard K/N into its own archive, resuming it if it exists.
std::string job_script(const submit_request& request, const experiment& e, const fs::path& dir, int count,
                       const std::vector<int>& shards, const std::string& self_exe) {
  std::error_code ec;
  const std::string n = std::to_string(count);
  const std::string experiment_argument =
      request.experiment.find('/') != std::string::npos || fs::path(request.experiment).extension() == ".json"
          ? fs::absolute(request.experiment, ec).string()
          : request.experiment;
  const int cpus = request.cpus_per_task > 0 ? request.cpus_per_task : e.protocol.threads;
  std::ostringstream script;
  script << "#!/bin/bash\n"
         << "# Written by `kstudy submit` " << utc_now() << " (kstudy " << build_info::version << ", commit "
         << std::string(build_info::git_commit).substr(0, 12) << ", " << build_info::flavour << " flavour).\n"
         << "# Experiment " << e.name << " (fingerprint " << e.fingerprint() << ") in " << n
         << " shards: array task K runs shard K/" << n << "\n"
         << "# into its own archive; merge them with kstudy merge (see the README, \"Running on a cluster\").\n"
         << "#SBATCH --job-name=kstudy-" << e.name << "\n"
         << "#SBATCH --array=" << array_list(shards) << "\n"
         << "#SBATCH --ntasks=1\n"
         << "#SBATCH --cpus-per-task=" << cpus << "\n"
         << "#SBATCH --output=" << (dir / "slurm-%A_%a.out").string() << "\n"
         << "# A preempted or requeued task starts again and resumes its archive; its log keeps every attempt.\n"
         << "#SBATCH --requeue\n"
         << "#SBATCH --open-mode=append\n";
  if (request.stop_before > 0)
    script << "# SIGTERM to the batch shell (which is kstudy, exec'd below) " << request.stop_before
           << " s before the time limit: the run stops after its\n"
           << "# current point and keeps the finished ones (Slurm may send it up to a minute earlier).\n"
           << "#SBATCH --signal=B:TERM@" << request.stop_before << "\n";
  if (!request.partition.empty()) script << "#SBATCH --partition=" << request.partition << "\n";
  if (!request.time.empty()) script << "#SBATCH --time=" << request.time << "\n";
  if (request.gpus_per_task > 0) script << "#SBATCH --gpus-per-task=" << request.gpus_per_task << "\n";
  for (const auto& option : request.sbatch_options) script << "#SBATCH " << option << "\n";
  script << "set -euo pipefail\n"
         << "shard=${SLURM_ARRAY_TASK_ID:?run this script through sbatch}\n";
  if (request.gpus_per_task > 0)
    script << "# One shard per GPU: Slurm binds this task's GPU(s) through CUDA_VISIBLE_DEVICES (--gpus-per-task),\n"
           << "# and Kokkos uses the first visible device. Sites whose gres setup exports only the job's GPU\n"
           << "# list get it from SLURM_STEP_GPUS / SLURM_JOB_GPUS.\n"
           << "if [[ -z ${CUDA_VISIBLE_DEVICES:-} && -n ${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-}} ]]; then\n"
           << "  export CUDA_VISIBLE_DEVICES=${SLURM_STEP_GPUS:-$SLURM_JOB_GPUS}\n"
           << "fi\n";
  script << "echo \"kstudy: shard $shard/" << n << " of " << e.name
         << " on $(hostname), attempt $(( ${SLURM_RESTART_COUNT:-0} + 1 )), "
            "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}\"\n"
         << "# --resume: a fresh archive if there is none, else the completion of an interrupted one (requeue, "
            "--resume).\n"
         << "# exec: kstudy replaces this shell, so the signals Slurm sends the batch shell reach it (it passes them\n"
         << "# on to its replication process), and its exit status is the task's.\n"
         << "export KSTUDY_QUIET=1  # no carriage-return progress line in the log\n"
         << "exec " << quote(self_exe) << " run " << quote(experiment_argument) << " --shard \"$shard/" << n << "\""
         << " --out " << quote(dir.string()) << "/shard-\"$shard\".h5 --resume";
  for (const auto& argument : override_arguments(request.overrides)) script << " " << quote(argument);
  script << "\n";
  return script.str();
}

// Sets unreadable archives aside, writes the script beside the shards and hands it to sbatch; returns the job
// id, recorded in the folder's kstudy-submit.jobs.
std::string submit_script(const std::string& sbatch, const std::string& script, const experiment& e,
                          const fs::path& dir, const shard_plan& plan, int count, fs::path& script_path) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create --out-dir " + dir.string() + ": " + ec.message());
  for (const int k : plan.unreadable) {
    const auto aside = shard_path(dir, k) + ".unreadable-" + utc_now();
    fs::rename(shard_path(dir, k), aside);
    std::cerr << "kstudy submit: " << shard_path(dir, k) << " is not a readable archive; moved to " << aside
              << " and shard " << k << " starts over\n";
  }
  script_path = dir / ("kstudy-" + e.name + ".sbatch");
  {
    std::ofstream file(script_path);
    file << script;
    if (!file.flush()) throw std::runtime_error("cannot write " + script_path.string());
  }
  std::string output;
  const int rc = capture(sbatch, {"--parsable", script_path.string()}, output, false);
  // --parsable prints "JOBID" or "JOBID;CLUSTER" as its last line.
  const std::string last = trim(output).substr(trim(output).find_last_of('\n') + 1);
  const std::string job = last.substr(0, last.find(';'));
  if (rc != 0 || job.empty() || job.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("sbatch " + script_path.string() + " failed (exit " + std::to_string(rc) +
                             (trim(output).empty() ? std::string(")") : "): " + trim(output)) +
                             "; see sbatch's message above");
  std::ofstream(dir / "kstudy-submit.jobs", std::ios::app)
      << job << " shards=" << array_list(plan.shards) << " of=" << count << " " << utc_now() << "\n";
  return job;
}

}  // namespace

// Everything that can be wrong is found before anything is written or submitted: values written into the
// script, the experiment, the folder, the shard count -> which shards -> the script -> print it (--dry-run)
// or submit it.
int submit_study(const submit_request& request, const std::string& self_exe) {
  refuse_control_characters("--partition", request.partition);
  refuse_control_characters("--time", request.time);
  check_stop_before(request);
  for (const auto& option : request.sbatch_options) refuse_control_characters("--sbatch-option", option);
  const auto e = prepare_experiment(request.experiment, request.overrides);
  check_experiment(e);
  std::error_code ec;
  const fs::path dir = fs::absolute(request.out_dir.empty() ? e.name + "-shards" : request.out_dir, ec);
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw std::runtime_error("--out-dir " + dir.string() + " exists and is not a directory");
  const int count = shard_count(request, e, dir);
  if (request.gpus_per_task < 0 || request.cpus_per_task < 0)
    throw std::runtime_error("--gpus-per-task and --cpus-per-task must not be negative");
  if (request.gpus_per_task > 1)
    std::cerr << "kstudy submit: warning: a shard measures on one GPU (Kokkos takes the first visible device); "
              << request.gpus_per_task - 1 << " of each task's " << request.gpus_per_task << " GPUs will idle\n";

  refuse_active_jobs(request, dir);
  const auto plan = plan_shards(request, e, dir, count);
  const std::string merged = (dir / (e.name + ".h5")).string();
  const std::string merge_command = "kstudy merge " + quote(merged) + " " + quote(dir.string()) + "/shard-*.h5";
  if (plan.shards.empty()) {
    std::cout << "kstudy submit: all " << count << " shards of " << e.name << " are complete in " << dir.string()
              << "; nothing to submit. Merge with:\n  " << merge_command << "\n";
    return 0;
  }
  const std::string sbatch = slurm_client(request);
  const std::string script = job_script(request, e, dir, count, plan.shards, self_exe);
  if (request.dry_run) {
    std::cout << script;
    std::cerr << "kstudy submit: --dry-run: would submit shards " << array_list(plan.shards) << " of " << count
              << " to sbatch";
    if (!plan.unreadable.empty())
      std::cerr << " (setting aside the unreadable archives of shards " << array_list(plan.unreadable) << ")";
    std::cerr << "; nothing written or submitted\n";
    return 0;
  }
  fs::path script_path;
  const auto job = submit_script(sbatch, script, e, dir, plan, count, script_path);
  std::cout << "submitted job array " << job << ": experiment " << e.name << ", shards " << array_list(plan.shards)
            << " of " << count;
  if (request.resume) std::cout << " (" << plan.complete << " complete, " << plan.incomplete.size() << " resumed)";
  std::cout << "\n  script: " << script_path.string() << "\n  watch:  squeue -j " << job
            << "\n  then:   " << merge_command << "\n";
  return 0;
}

}  // namespace kstudy
