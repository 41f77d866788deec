// kstudy: the command-line front end. One binary: list, info, run, profile, submit, merge (and the hidden
// children of run and profile); report and compare hand over to Python.
#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kstudy/runner/archive.hpp"
#include "kstudy/runner/archive_schema.hpp"
#include "kstudy/runner/devices_p2p.hpp"
#include "kstudy/runner/devices_run.hpp"
#include "kstudy/runner/environment.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/runner/kokkos_session.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/runner/merge.hpp"
#include "kstudy/platform/devices.hpp"
#include "kstudy/platform/process.hpp"
#include "kstudy/runner/profile.hpp"
#include "kstudy/runner/python_rungs.hpp"
#include "kstudy/study.hpp"
#include "kstudy/runner/submit.hpp"
#include "kstudy/timers.hpp"
#include "kstudy/variant.hpp"
#include "python_tool.hpp"

namespace {

std::string self_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("kstudy") : p.string();
}

// OpenMP reads its binding once, at start-up; without one Kokkos warns and threads wander between
// cores mid-measurement. Set the recommended binding and re-execute once, before OpenMP starts.
void ensure_thread_binding(char** argv) {
  if (std::getenv("OMP_PROC_BIND") != nullptr || std::getenv("KSTUDY_NO_REEXEC") != nullptr) return;
  setenv("OMP_PROC_BIND", "spread", 1);
  setenv("OMP_PLACES", "threads", 1);
  setenv("KSTUDY_NO_REEXEC", "1", 1);
  const auto exe = self_exe();
  execv(exe.c_str(), argv);  // returns only on failure; then carry on unbound
}

// The variants of an operation (in this build or not) that need more than any GPU, a line per requirement, each
// saying whether this machine meets it: what a user on an older card reads before the runner skips them.
// `built` and `device`: the build's target and this GPU's capability, asked once per listing (0: none).
void print_gpu_requirements(const std::string& operation, int built, int device) {
  std::map<std::string, std::pair<std::string, std::string>> by_need;  // describe() -> ids, unmet here
  const auto note = [&](const kstudy::variant_info& info) {
    if (info.operation != operation || !info.needs.any()) return;
    auto& [ids, unmet] = by_need[kstudy::describe(info.needs)];
    ids += (ids.empty() ? "" : ", ") + info.id();
    if (built > 0) unmet = kstudy::unmet_requirement(info.needs, device, built);
  };
  for (const auto* v : kstudy::variant_registry::instance().of_operation(operation)) note(v->info);
  for (const auto* info : kstudy::variant_registry::instance().declared_elsewhere()) note(*info);
  for (const auto& [need, entry] : by_need) {
    const auto& [ids, unmet] = entry;
    std::cout << "  needs " << need << ": " << ids;
    if (!unmet.empty()) std::cout << " -- not here: " << unmet.substr(unmet.find(';') + 2);
    std::cout << "\n";
  }
}

// The variants that run on something besides this build (Python rungs): a line each with what they run on, and
// why this machine cannot run them where that is known.
void print_runtimes(const std::vector<const kstudy::registered_variant*>& variants) {
  for (const auto* v : variants) {
    if (v->info.runtime.empty()) continue;
    std::cout << "  " << v->info.id() << " runs on " << v->info.runtime;
    if (!v->info.unavailable.empty()) std::cout << " -- not here: " << v->info.unavailable;
    std::cout << "\n";
  }
}

// Where the Python rungs came from, or why there are none, and the rung modules that could not be read.
void print_python_rungs() {
  const auto& rungs = kstudy::register_python_rungs();
  std::cout << "\nPython rungs: ";
  if (!rungs.problem.empty())
    std::cout << "none (" << rungs.problem << ")\n";
  else
    std::cout << rungs.registered << " from " << rungs.python << " (python " << rungs.python_version
              << "; KSTUDY_RUNG_PYTHON chooses the interpreter)\n";
  for (const auto& e : rungs.errors) std::cout << "  not registered: " << e << "\n";
}

// Operations with their variants (traffic at the operation's first bench point) and the variants declared but
// not in this build, then experiment kinds, built-in experiments and backends: everything here is read from
// the registries.
int list_command() {
  const auto& operations = kstudy::operation_registry::instance().all();
  const int built = kstudy::platform::build_compute_capability();  // 0: the cpu flavour, no GPU to ask
  const int device = built > 0 ? kstudy::platform::gpu_compute_capability() : 0;
  std::cout << "Operations (" << operations.size() << "), each with its variants:\n";
  for (const auto* op : operations) {
    const auto& o = op->info();
    std::string axes;
    for (const auto& a : o.axes) axes += (axes.empty() ? "" : " x ") + a;
    std::vector<std::int64_t> at =
        o.bench_points.empty() ? std::vector<std::int64_t>(o.axes.size(), 1024) : o.bench_points.front();
    std::string at_text;
    for (const auto x : at) at_text += (at_text.empty() ? "" : "x") + std::to_string(x);
    std::cout << "\n" << o.name << " (" << axes << "): " << o.description << "\n";
    const auto variants = kstudy::variant_registry::instance().of_operation(o.name);
    std::size_t id_width = 4, family_width = 8;  // the widest id and family, so no column runs into the next
    for (const auto* v : variants) {
      id_width = std::max(id_width, v->info.id().size() + 2);
      family_width = std::max(family_width, v->info.family.size() + 2);
    }
    const auto w = [](std::size_t width) { return std::setw(static_cast<int>(width)); };
    const std::string traffic_header = "MB @" + at_text;  // 4096x4096x4096 is wider than the numbers
    const std::size_t traffic_width = std::max<std::size_t>(16, traffic_header.size() + 2);
    std::cout << std::left << "  " << w(id_width) << "id" << w(family_width) << "family" << w(18) << "implementation"
              << w(5) << "rung" << w(9) << "fusion" << w(18) << "layout" << w(8) << "kernels" << w(7) << "block"
              << w(traffic_width) << traffic_header << "description\n";
    for (const auto* v : variants) {
      const auto& i = v->info;
      const auto shape = op->shape(at, i.layout, 3);
      std::cout << "  " << w(id_width) << i.id() << w(family_width) << i.family << w(18)
                << kstudy::to_string(i.implementation) << w(5) << (i.rung > 0 ? std::to_string(i.rung) : "-") << w(9)
                << kstudy::to_string(i.fusion) << w(18) << kstudy::to_string(i.layout) << w(8) << i.kernels_launched
                << w(7) << (i.tunable_block_size ? "yes" : "no") << w(traffic_width)
                << std::to_string(i.traffic(shape).total() / 1000000) << i.description << "\n";
    }
    // Declared by every build, compiled by another (the CUDA variants of a CPU build): named, not described.
    std::string elsewhere;
    for (const auto* info : kstudy::variant_registry::instance().declared_elsewhere())
      if (info->operation == o.name) elsewhere += (elsewhere.empty() ? "" : ", ") + info->id();
    if (!elsewhere.empty()) std::cout << "  not in this build: " << elsewhere << "\n";
    print_gpu_requirements(o.name, built, device);
    print_runtimes(variants);
  }
  print_python_rungs();
  std::cout << "\nExperiment kinds:\n";
  std::size_t width = 0;  // the longest registered name, plus a gap
  for (const auto* k : kstudy::experiment_kind_registry::instance().all()) width = std::max(width, k->name.size() + 2);
  for (const auto* k : kstudy::experiment_kind_registry::instance().all())
    std::cout << "  " << std::left << std::setw(static_cast<int>(width)) << k->name << k->description << "\n";
  std::cout << "\nBuilt-in experiments:";
  for (const auto& name : kstudy::builtin_experiment_names()) std::cout << " " << name;
  std::cout << "\n\nBackends:";
#ifdef KOKKOS_ENABLE_SERIAL
  std::cout << " serial";
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  std::cout << " openmp";
#endif
#ifdef KOKKOS_ENABLE_CUDA
  std::cout << " cuda";
#endif
  std::cout << " (default: " << Kokkos::DefaultExecutionSpace::name() << ")\n";
  return 0;
}

std::string join(const std::vector<int>& values) {
  std::string out;
  for (const auto v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// Exit codes: 0 merged; 3 shards missing or incomplete and no --partial (nothing written); 1 refused or failed.
int merge_command(kstudy::merge_request request) {
  kstudy::merge_report report;
  try {
    report = kstudy::merge_shards(request);
  } catch (const kstudy::merge_refused& refused) {
    for (const auto& p : refused.problems()) std::cerr << "kstudy merge: refusing: " << p << "\n";
    std::cerr << "kstudy merge: these archives are not the shards of one run; nothing written (--force merges "
                 "them anyway, keeping the lowest shard's copy of any duplicated unit)\n";
    return 1;
  }
  for (const auto& w : report.warnings) std::cerr << "kstudy merge: warning (--force): " << w << "\n";
  const int n = report.shard_count;
  if (!report.missing.empty())
    std::cerr << "kstudy merge: missing shards of 0.." << n - 1 << ": " << join(report.missing)
              << " (no archive given)\n";
  if (!report.incomplete.empty())
    std::cerr << "kstudy merge: incomplete shards: " << join(report.incomplete)
              << " (interrupted, failed or still running: not marked complete)\n";
  if (!report.written) {
    std::cerr << "kstudy merge: nothing written to " << request.out
              << ". Resubmit those shards with `kstudy submit EXPERIMENT --resume --out-dir DIR`, or pass --partial "
                 "to merge what is there\n";
    return 3;
  }
  std::cout << "merged shards " << join(report.merged) << " of " << n << " into " << request.out << ": "
            << report.samples << " samples"
            << (report.duplicate_samples
                    ? ", " + std::to_string(report.duplicate_samples) + " duplicate samples dropped"
                    : "")
            << (report.missing.empty() && report.incomplete.empty() ? ", complete"
                                                                    : ", PARTIAL (recorded in the archive)")
            << "\n";
  return 0;
}

void add_profile_options(CLI::App& app, kstudy::profile_request& request) {
  app.add_option("experiments", request.experiments, "Built-in experiment names or paths to experiment JSON files")
      ->required();
  request.out = "kstudy-profile.h5";
  app.add_option("-o,--out", request.out, "Archive to write (once, at the end)")->capture_default_str();
  app.add_option("--variants", request.variants, "Only these variants (name, name@backend or family)");
  app.add_option("--points", request.points,
                 "Points per experiment, spread evenly over its points (first and last included); 0 = every point")
      ->capture_default_str();
  app.add_option("--ncu", request.ncu, "Path to ncu (default: $KSTUDY_NCU, PATH, /usr/local/cuda/bin, /opt/nvidia)");
  app.add_option("--keep-ncu", request.keep, "Keep ncu's reports (.ncu-rep), raw CSVs and logs in this folder");
  app.add_flag("--overwrite", request.overwrite, "Replace an existing archive");
  app.add_flag("-q,--quiet", request.quiet, "No progress lines or result table");
}

// `kstudy profile`: parsed and checked before Kokkos starts, so a machine without a GPU gets a clear
// error instead of a CUDA initialisation failure; run_profile initialises Kokkos once the checks pass.
int profile_command(int argc, char** argv) {
  CLI::App app{
      "kstudy profile: per-kernel hardware counters (Nsight Compute) of the device variants at "
      "representative points of any timing experiment (every operation), stored as each experiment's profile table",
      "kstudy profile"};
  kstudy::profile_request request;
  add_profile_options(app, request);
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return kstudy::run_profile(request, self_exe(), argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kstudy: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

namespace {

// The hidden children of run and profile: fixed argument lists and their own Kokkos arguments. Returns
// whether argv named one (and its exit code in rc).
bool run_hidden_child(int argc, char** argv, int& rc) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (mode == "__profile_point" || mode == "__replicate" || mode == "__first_call") {
    // Their parent checked; a child started by hand on a machine without a GPU gets the same one line.
    if (const auto reason = kstudy::kokkos_unavailable_reason(); !reason.empty()) {
      std::cerr << "kstudy " << mode << ": no GPU is visible (" << reason << "); nothing run\n";
      rc = kstudy::exit_no_gpu;
      return true;
    }
  }
  const auto guarded = [&](auto&& body) {
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::cerr << "kstudy: error: " << e.what() << "\n";
      rc = 1;
    }
    return true;
  };
  if (mode == "__profile_point") {
    kstudy::kokkos_session guard(argc, argv);
    return guarded([&] { return kstudy::run_profile_point(std::vector<std::string>(argv + 2, argv + argc)); });
  }
  if (argc >= 5 && mode == "__replicate") {
    kstudy::kokkos_session guard(argc, argv);
    return guarded([&] { return kstudy::run_replication(argv[2], argv[3], std::atoi(argv[4])); });
  }
  if (argc >= 4 && mode == "__first_call") {
    kstudy::wall_timer init;
    init.start();
    kstudy::kokkos_session guard(argc, argv);
    const double initialize_seconds = init.seconds();
    return guarded([&] {
      std::vector<std::int64_t> extents;
      for (int i = 3; i < argc; ++i) extents.push_back(std::atoll(argv[i]));
      return kstudy::run_first_call(argv[2], extents, initialize_seconds);
    });
  }
  return false;
}

// Kokkos' own arguments (--kokkos-num-threads=4, ...) are Kokkos' business: the commands that start no
// Kokkos accept and ignore them, as Kokkos' initialisation would have taken them out of argv.
std::vector<char*> without_kokkos_arguments(int argc, char** argv) {
  std::vector<char*> out;
  for (int i = 0; i < argc; ++i)
    if (std::string(argv[i]).rfind("--kokkos-", 0) != 0) out.push_back(argv[i]);
  return out;
}

// The variants of the requested experiments that run on the host, as a --variants filter (name@backend,
// the OpenMP ones where a variant has both backends); empty when there are none or the experiments do not
// load (their error is then the next run's to report).
std::string host_variants_filter(const kstudy::run_request& request) {
  std::vector<std::string> ids;
  std::set<std::string> seen, openmp;
  try {
    std::vector<const kstudy::registered_variant*> host;
    for (const auto& name : request.experiments)
      for (const auto* v : kstudy::select_variants(kstudy::prepare_experiment(name, request)))
        if (!v->info.on_device) host.push_back(v);
    for (const auto* v : host)
      if (v->info.backend == "openmp") openmp.insert(v->info.name);
    for (const auto* v : host)
      if ((v->info.backend == "openmp" || !openmp.count(v->info.name)) && seen.insert(v->info.id()).second)
        ids.push_back(v->info.id());
  } catch (const std::exception&) {
    return {};
  }
  std::string filter;
  for (const auto& id : ids) filter += " " + id;
  return filter.empty() ? filter : "--variants" + filter;
}

// One line, nothing written: a cuda build's Kokkos cannot start without a GPU, and it starts its CUDA
// backend whatever the variants, so not even the host variants run in this build here.
int refuse_without_gpu(const std::string& reason, const kstudy::run_request& request) {
  std::string experiments;
  for (const auto& e : request.experiments) experiments += " " + e;
  const auto filter = host_variants_filter(request);
  std::cerr << "kstudy run: no GPU is visible (" << reason
            << "); this cuda build cannot start Kokkos without one, not even for host variants, so nothing was run or "
               "written; the cpu flavour runs the host variants: kstudy run"
            << experiments << " " << (filter.empty() ? "(host variants: see kstudy list)" : filter) << "\n";
  return kstudy::exit_no_gpu;
}

std::string base_name(std::string exe) {
  const std::string deleted = " (deleted)";  // a binary rebuilt while it ran
  if (exe.size() > deleted.size() && exe.compare(exe.size() - deleted.size(), deleted.size(), deleted) == 0)
    exe.resize(exe.size() - deleted.size());
  return std::filesystem::path(exe).filename().string();
}

// A kstudy process holding the archive that goes away by itself: killed or exiting, or a hidden child
// (replication, profile point) whose kstudy parent is gone. Its parent-death signal normally kills such a
// child with its parent, but until the kernel has torn it down it still holds HDF5's lock on the archive.
// A child that a run forked for a replication is "kstudy run" by name until its exec: when the run was
// killed in that moment it exits at once (its parent is gone), else it becomes the replication, judged then.
bool on_its_way_out(const kstudy::platform::file_holder& h, const std::string& kstudy_name) {
  const bool hidden_child = h.argv.size() >= 2 && h.argv[1].rfind("__", 0) == 0;
  return h.exiting || h.between_fork_and_exec || (hidden_child && base_name(h.parent_exe) != kstudy_name);
}

std::string describe(const kstudy::platform::file_holder& h, const std::string& kstudy_name) {
  const bool is_kstudy = base_name(h.exe) == kstudy_name;
  std::string text = "PID " + std::to_string(h.pid) + " (" + (is_kstudy ? std::string("kstudy") : base_name(h.exe));
  if (is_kstudy && h.argv.size() >= 2) text += " " + h.argv[1];
  if (h.exe.empty()) text += h.argv.empty() ? "?" : h.argv.front();
  return text + (h.exiting ? ", exiting)" : ")");
}

// Before --resume or --overwrite replaces or completes an archive. HDF5 holds flock on an open archive; who
// holds it decides:
//   a live kstudy run                      refused at once with its PID (exit 1);
//   another live program that locks it    refused at once with its PID and name (an h5py reader, say);
//   a process on its way out               waited for (a run just killed with kill -9, or its replication
//                                          child still being torn down);
//   a lock that no visible process holds   waited for too: a killed process drops its descriptors from /proc
//                                          (exit_files) a moment before the kernel releases their locks
//                                          (the deferred fput), and on a loaded machine that moment is long.
// Every wait is bounded (wait_seconds) and said in one line. Returns 0 to go on, else the exit code.
int wait_for_archive_release(const std::string& archive, bool resume) {
  constexpr int wait_seconds = 30;
  const std::string kstudy_name = base_name(self_exe());
  const std::string then = resume ? "--resume" : "run again";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_seconds);
  bool announced = false;
  for (;;) {
    const bool locked = kstudy::platform::flock_held_elsewhere(archive);
    std::optional<kstudy::platform::file_holder> leaving;
    for (const auto& h : kstudy::platform::processes_holding(archive)) {
      const bool is_kstudy = base_name(h.exe) == kstudy_name;
      if (is_kstudy ? on_its_way_out(h, kstudy_name) : h.exiting) {
        leaving = h;
      } else if (is_kstudy) {
        std::cerr << "kstudy: error: archive '" << archive
                  << "' is open in another process: " << describe(h, kstudy_name)
                  << ", a live run; wait for it to finish or stop it, then " << then << "\n";
        return 1;
      } else if (locked) {  // a program that only has it open (no lock) does not stop HDF5
        std::cerr << "kstudy: error: archive '" << archive
                  << "' is open in another process: " << describe(h, kstudy_name)
                  << ", which holds its lock; close it there, then " << then << "\n";
        return 1;
      }
    }
    if (!locked && !leaving) return 0;
    if (!announced) {
      std::cerr << "kstudy: archive '" << archive << "' is still "
                << (leaving ? "held by " + describe(*leaving, kstudy_name) + ", left by a run that is gone"
                            : std::string("locked by a process on its way out (none lists it any more)"))
                << "; waiting up to " << wait_seconds << " s for it to end\n";
      announced = true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::cerr << "kstudy: error: archive '" << archive << "' is still "
                << (leaving
                        ? "held after " + std::to_string(wait_seconds) + " s by " + describe(*leaving, kstudy_name) +
                              "; stop it (kill " + std::to_string(leaving->pid) + "), then " + then
                        : "locked after " + std::to_string(wait_seconds) +
                              " s by a process this user cannot see (another user's, or another host's on a "
                              "network file system); stop it, then " +
                              then)
                << "\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// --precision ("1%" or 0.01: a percentage is how people say it), --max-time and --throttled, for run and for
// submit: how much to measure and what to do with what the GPU's throttling spoiled.
void add_precision_options(CLI::App* app, kstudy::run_request& request) {
  const CLI::Validator percent(
      [](std::string& value) {
        if (value.empty() || value.back() != '%') return std::string();
        char* end = nullptr;
        const double x = std::strtod(value.c_str(), &end);
        if (end != value.c_str() + value.size() - 1) return "'" + value + "' is not a percentage";
        value = std::to_string(x / 100.0);
        return std::string();
      },
      "FRACTION|PERCENT%");
  app->add_option("--precision", request.precision,
                  "Adaptive sampling: measure each point until the 95% interval of every median is within +-this "
                  "(1% or 0.01); the protocol's trials and replications become the least a point gets")
      ->transform(percent)
      ->check(CLI::Range(1e-6, 0.5));
  app->add_option("--max-time", request.max_time,
                  "With --precision: the most seconds of timed regions a point gets before it stops short of it")
      ->check(CLI::PositiveNumber);
  app->add_option("--throttled", request.throttled,
                  "A point the GPU ran throttled (power cap, thermal, HW slowdown): accept its samples (flagged), "
                  "exclude them from the summaries, or remeasure the point after a cool-down (overrides the "
                  "protocol's \"throttled\")")
      ->check(CLI::IsMember({"accept", "exclude", "remeasure"}));
}

void add_run_options(CLI::App* run, kstudy::run_request& request, std::string& shard_text) {
  run->add_option("experiments", request.experiments, "Built-in experiment names or paths to experiment JSON files")
      ->required();
  request.out = "kstudy-results.h5";
  run->add_option("-o,--out", request.out, "Archive to write")->capture_default_str();
  run->add_option("--trials", request.trials, "Measured trials per point (overrides the experiment)");
  run->add_option("--replications", request.replications, "Fresh-process replications (overrides the experiment)");
  run->add_option("--warmups", request.warmups, "Unmeasured warm-ups per point (overrides the experiment)");
  add_precision_options(run, request);
  run->add_option("--variants", request.variants, "Only these variants (name, name@backend or family)");
  run->add_option("--cache", request.cache,
                  "warm or cold: the caches every timed region starts from (overrides the sweeps' \"cache\")");
  run->add_flag("--resume", request.resume, "Complete an interrupted archive: finished points are kept, not re-run");
  run->add_flag("--overwrite", request.overwrite, "Replace an existing archive");
  run->add_flag("-q,--quiet", request.quiet, "No progress line or result table");
  run->add_option("--json", request.json_out, "Also write the results as one JSON document");
  run->add_option("--shard", shard_text,
                  "Run only shard K of N (K/N, 0 <= K < N): the (point, replication) units u = point * replications "
                  "+ replication with u % N == K; one Slurm array task each (see submit)");
}

void add_devices_options(CLI::App* run, kstudy::devices_request& request, std::string& devices) {
  run->add_option("--devices", devices,
                  "Spread the run over this node's GPUs, one process each at once (all, or indices such as 0,2,3): "
                  "the points are sharded across them and merged into the archive; a GPU failing its health "
                  "check is left out");
  run->add_flag("--replicate-on-every-device", request.replicate,
                "With --devices: every GPU runs every point (device-to-device variance; kstudy compare --by device)");
  run->add_option("--parts-dir", request.parts_dir,
                  "With --devices: the per-device archives and logs (default OUT.devices; --resume completes them)");
}

// kstudy p2p: the peer-to-peer copy matrix of the visible GPUs, printed (kstudy run --devices stores it).
int p2p_command(const kstudy::peer_copy_options& options) {
  if (!kstudy::peer_copy_available()) {
    std::cerr << "kstudy p2p: peer-to-peer copies need the cuda flavour of kstudy (this is the cpu flavour)\n";
    return kstudy::exit_no_gpu;
  }
  const auto source = kstudy::platform::make_device_source();
  std::vector<int> devices;
  for (const auto& d : source->list()) {
    if (d.healthy)
      devices.push_back(d.index);
    else
      std::cerr << "kstudy p2p: " << d.describe() << " failed its health check (" << d.health_note << "): left out\n";
  }
  if (devices.empty()) {
    std::cerr << "kstudy p2p: no GPU found (" << source->name() << ")\n";
    return kstudy::exit_no_gpu;
  }
  if (devices.size() < 2) {
    std::cout << kstudy::format_peer_matrix({}, devices);
    return 0;
  }
  std::cout << "kstudy p2p: cudaMemcpyPeerAsync of " << options.bytes << " bytes, median of " << options.trials
            << " trials, for every ordered pair of " << devices.size() << " devices\n";
  std::cout << kstudy::format_peer_matrix(kstudy::measure_peer_copies(devices, options), devices);
  return 0;
}

void add_submit_options(CLI::App* submit, kstudy::submit_request& submit_request) {
  submit->add_option("experiment", submit_request.experiment, "Built-in experiment name or path to a JSON file")
      ->required();
  submit->add_option("--array", submit_request.array, "Number of shards N (array tasks 0..N-1)");
  submit->add_option("--partition", submit_request.partition, "Slurm partition (#SBATCH --partition)");
  submit->add_option("--time", submit_request.time, "Time limit per task (#SBATCH --time), e.g. 01:00:00");
  submit
      ->add_option("--stop-before", submit_request.stop_before,
                   "SIGTERM each task this many seconds before its time limit, so it stops cleanly (0: never)")
      ->capture_default_str();
  submit->add_option("--gpus-per-task", submit_request.gpus_per_task,
                     "GPUs per task; 1 runs one shard per GPU, Slurm binding each task's GPU (CUDA_VISIBLE_DEVICES)");
  submit->add_option("--cpus-per-task", submit_request.cpus_per_task,
                     "CPUs per task (default: the experiment's OpenMP thread count)");
  submit->add_option("--out-dir", submit_request.out_dir,
                     "Folder for the shard archives, logs and job script "
                     "(default ./<experiment>-shards)");
  submit->add_option("--sbatch-option", submit_request.sbatch_options,
                     "Extra #SBATCH line, e.g. --sbatch-option=--account=abc (repeatable)");
  submit->add_flag("--dry-run", submit_request.dry_run, "Print the job script; write and submit nothing");
  submit->add_flag("--resume", submit_request.resume,
                   "Resubmit only the shards whose archives are missing or incomplete (they resume)");
  submit->add_option("--trials", submit_request.overrides.trials, "Passed on to every task's run");
  submit->add_option("--replications", submit_request.overrides.replications, "Passed on to every task's run");
  submit->add_option("--warmups", submit_request.overrides.warmups, "Passed on to every task's run");
  submit->add_option("--variants", submit_request.overrides.variants, "Passed on to every task's run");
  add_precision_options(submit, submit_request.overrides);
}

void add_merge_options(CLI::App* merge, kstudy::merge_request& merge_request) {
  merge->add_option("out", merge_request.out, "Merged archive to write")->required();
  merge->add_option("shards", merge_request.shards, "Shard archives (kstudy run --shard)")->required();
  merge->add_flag("--force", merge_request.force,
                  "Merge a mixed set (schema, experiment, build or hardware differ, overlapping shards) with warnings");
  merge->add_flag("--partial", merge_request.partial,
                  "Merge although shards are missing or incomplete; the archive records which (complete=false)");
  merge->add_flag("--overwrite", merge_request.overwrite, "Replace an existing output archive");
}

// The commands Python runs (scripts/kstudy_report.py), listed for --help only: main() hands them over before CLI11
// parses anything.
const std::vector<std::pair<std::string, std::string>>& python_tool_commands() {
  static const std::vector<std::pair<std::string, std::string>> commands{
      {"report", "Tables (CSV), figures (PNG) and report.md from archives: report ARCHIVE... --out DIR"},
      {"compare",
       "Medians, ratio B/A, Mann-Whitney U; --by backend|machine: performance portability; --by kokkos: Kokkos "
       "versions; --by device: spread between GPUs (run --devices)"},
      {"history", "Results across commits: history add ARCHIVE... | show --variant V [--plot PNG] | list"},
      {"advise",
       "Which variant for your shape, layout, host memory and reuse, predicted from archives: advise ARCHIVE... "
       "--shape 3000000x48 [--layout row-major] [--memory pinned] [--reuse 20]"},
  };
  return commands;
}

void add_python_tool_commands(CLI::App& app) {
  for (const auto& [name, description] : python_tool_commands()) app.add_subcommand(name, description);
}

bool is_python_tool_command(const std::string& name) {
  for (const auto& command : python_tool_commands())
    if (command.first == name) return true;
  return false;
}

// kstudy info: Kokkos' runtime configuration where Kokkos can start; else what the build knows, and why not.
int info_command(int argc, char** argv, std::optional<kstudy::kokkos_session>& kokkos) {
  const auto reason = kstudy::kokkos_unavailable_reason();
  if (reason.empty()) kokkos.emplace(argc, argv);
  auto metadata = kstudy::collect_metadata(argc, argv);
  if (!reason.empty()) metadata.environment["gpu"] = "none visible (" + reason + "); Kokkos not started";
  std::cout << kstudy::describe_environment(metadata);
  return 0;
}

// kstudy run: over several devices (a process each; the parent starts no Kokkos, it would hold a GPU), or here.
int run_command(kstudy::run_request& request, const std::string& shard_text, kstudy::devices_request& devices,
                const std::string& devices_text, int argc, char** argv, std::optional<kstudy::kokkos_session>& kokkos) {
  if (!shard_text.empty()) request.shard = kstudy::parse_shard(shard_text);
  if (devices.replicate && devices_text.empty())
    throw std::invalid_argument("--replicate-on-every-device needs --devices");
  if (!devices_text.empty()) {
    if (!request.json_out.empty())
      throw std::invalid_argument("--json is not taken with --devices; kstudy report reads the merged archive");
    devices.run = request;
    devices.devices = devices_text;
    for (int i = 0; i < argc; ++i) devices.command_line += (i ? " " : "") + std::string(argv[i]);
    return kstudy::run_on_devices(devices, self_exe(), std::cout, std::cerr);
  }
  if (const auto reason = kstudy::kokkos_unavailable_reason(); !reason.empty())
    return refuse_without_gpu(reason, request);
  if (request.resume || request.overwrite)
    if (const int rc = wait_for_archive_release(request.out, request.resume); rc != 0) return rc;
  kokkos.emplace(argc, argv);  // takes its --kokkos-* arguments out of argv
  try {
    return kstudy::run_study(request, self_exe(), argc, argv);
  } catch (const kstudy::archive_in_use& in_use) {
    std::cerr << "kstudy: error: " << in_use.what() << "; wait for it to finish or stop it, then "
              << (request.resume ? "--resume" : "run again") << "\n";
    return 1;
  }
}

int salvage_command(const std::string& in, const std::string& out, bool overwrite) {
  const auto report = kstudy::salvage_archive(in, out, overwrite);
  for (const auto& lost : report.lost) std::cerr << "kstudy salvage: left out: " << lost << "\n";
  std::cout << "salvaged " << report.units_kept << " finished (point, replication) units, " << report.samples_kept
            << " samples, into " << out << "; complete it with: kstudy run EXPERIMENT... --resume --out " << out
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // report / compare are Python and run no Kokkos code: hand them over before binding or initialising.
  if (argc >= 2 && is_python_tool_command(argv[1])) return kstudy::exec_python_tool(argc, argv);
  ensure_thread_binding(argv);
  // The Python rungs beside the C++ variants, for the commands that choose variants (the hidden children
  // included), before anything asks the registry; a missing interpreter or a broken rung module only shows in
  // `kstudy list`. The others (schema, merge, salvage, info, p2p) start no Python.
  std::string command;  // the first argument that is not an option (Kokkos' may come first)
  for (int i = 1; i < argc && command.empty(); ++i)
    if (argv[i][0] != '-') command = argv[i];
  if (command == "list" || command == "run" || command == "submit" || command == "profile" ||
      command.rfind("__", 0) == 0)
    kstudy::register_python_rungs();
  if (argc >= 2 && std::string(argv[1]) == "profile") return profile_command(argc, argv);
  if (int rc = 0; run_hidden_child(argc, argv, rc)) return rc;

  CLI::App app{
      "kstudy: correctness-gated Kokkos/CUDA performance studies with HDF5 archives.\n"
      "Typical use: `kstudy list`, `kstudy run quick --out quick.h5`, `kstudy info`."};
  app.require_subcommand(1);
  auto* list = app.add_subcommand(
      "list", "List operations with their variants, experiment kinds, built-in experiments and backends");
  auto* info = app.add_subcommand("info", "Print the environment: Kokkos configuration, compiler, GPU, CPU");
  auto* run = app.add_subcommand("run", "Run experiments (built-in names or JSON files) into an HDF5 archive");
  kstudy::run_request request;
  std::string shard_text;
  add_run_options(run, request, shard_text);
  kstudy::devices_request devices_request;
  std::string devices_text;
  add_devices_options(run, devices_request, devices_text);

  auto* submit = app.add_subcommand(
      "submit", "Run an experiment as a Slurm job array: task K runs `run --shard K/N` into DIR/shard-K.h5");
  kstudy::submit_request submit_request;
  add_submit_options(submit, submit_request);

  auto* merge = app.add_subcommand(
      "merge", "Merge shard archives into one (checks they are one run; exit 3 if shards are missing)");
  kstudy::merge_request merge_request;
  add_merge_options(merge, merge_request);
  auto* salvage = app.add_subcommand(
      "salvage", "Copy the finished points a damaged archive still holds into a new one (then run --resume it)");
  std::string salvage_in, salvage_out;
  bool salvage_overwrite = false;
  salvage->add_option("archive", salvage_in, "The damaged archive (read only)")->required();
  salvage->add_option("-o,--out", salvage_out, "New archive to write")->required();
  salvage->add_flag("--overwrite", salvage_overwrite, "Replace an existing output archive");
  auto* p2p = app.add_subcommand(
      "p2p", "Peer-to-peer copy bandwidth between every pair of GPUs, with and without peer access (cuda flavour)");
  kstudy::peer_copy_options p2p_options;
  p2p->add_option("--bytes", p2p_options.bytes, "Bytes per copy")->capture_default_str();
  p2p->add_option("--trials", p2p_options.trials, "Timed copies per pair (the median is reported)")
      ->capture_default_str();
  auto* schema = app.add_subcommand(
      "schema", "Print the archive schema (every table, its columns, types and former names) as JSON");
  add_python_tool_commands(app);
  // Listed for --help; main() runs it before Kokkos starts (profile_command).
  kstudy::profile_request unused;
  add_profile_options(
      *app.add_subcommand("profile", "Per-kernel GPU hardware counters (Nsight Compute) into an archive"), unused);

  // Only the commands that measure start Kokkos (a cuda build's Kokkos cannot start without a GPU), and
  // only after the command line parsed: the others run on a login node without one.
  const auto cli_args = without_kokkos_arguments(argc, argv);
  try {
    app.parse(static_cast<int>(cli_args.size()), cli_args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::optional<kstudy::kokkos_session> kokkos;
  try {
    if (*list) return list_command();
    if (*schema) {
      std::cout << kstudy::archive_schema_json();
      return 0;
    }
    if (*info) return info_command(argc, argv, kokkos);
    if (*p2p) return p2p_command(p2p_options);
    if (*run) return run_command(request, shard_text, devices_request, devices_text, argc, argv, kokkos);
    if (*submit) return kstudy::submit_study(submit_request, self_exe());
    if (*merge) {
      for (int i = 0; i < argc; ++i) merge_request.command_line += (i ? " " : "") + std::string(argv[i]);
      return merge_command(merge_request);
    }
    if (*salvage) return salvage_command(salvage_in, salvage_out, salvage_overwrite);
  } catch (const std::exception& e) {
    std::cerr << "kstudy: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
