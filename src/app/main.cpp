// kstudy: the command-line front end. One binary: list, info, run, profile (and the hidden children of run
// and profile); report and compare hand over to Python.
#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "kstudy/environment.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/profile.hpp"
#include "kstudy/study.hpp"
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

int list_command() {
  std::cout << "Variants (" << kstudy::variant_registry::instance().all().size() << "):\n";
  std::cout << std::left << std::setw(38) << "  id" << std::setw(16) << "family" << std::setw(9) << "fusion" << std::setw(18)
            << "layout" << std::setw(8) << "kernels" << std::setw(7) << "block" << "bytes @1Mx16  description\n";
  for (const auto* v : kstudy::variant_registry::instance().all()) {
    const auto& i = v->info;
    const auto shape = kstudy::make_shape(1 << 20, 16, i.layout, 3);
    std::cout << "  " << std::setw(36) << i.id() << std::setw(16) << i.implementation << std::setw(9) << i.fusion_level
              << std::setw(18) << kstudy::to_string(i.layout) << std::setw(8) << i.kernels_launched << std::setw(7)
              << (i.tunable_block_size ? "yes" : "no") << std::setw(14)
              << (std::to_string(i.traffic(shape).total() / 1000000) + " MB") << i.description << "\n";
  }
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
  CLI::App app{"kstudy profile: per-kernel hardware counters (Nsight Compute) of the device variants at "
               "representative points of scoring experiments, stored as each experiment's profile table",
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

int main(int argc, char** argv) {
  // report / compare are Python and run no Kokkos code: hand them over before binding or initialising.
  if (argc >= 2 && (std::string(argv[1]) == "report" || std::string(argv[1]) == "compare"))
    return kstudy::exec_python_tool(argc, argv);
  ensure_thread_binding(argv);
  if (argc >= 2 && std::string(argv[1]) == "profile") return profile_command(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "__profile_point") {
    Kokkos::ScopeGuard guard(argc, argv);
    try {
      return kstudy::run_profile_point(std::vector<std::string>(argv + 2, argv + argc));
    } catch (const std::exception& e) {
      std::cerr << "kstudy: error: " << e.what() << "\n";
      return 1;
    }
  }
  // Hidden child mode first: it has a fixed argument list and its own Kokkos arguments.
  if (argc >= 5 && std::string(argv[1]) == "__replicate") {
    Kokkos::ScopeGuard guard(argc, argv);
    try {
      return kstudy::run_replication(argv[2], argv[3], std::atoi(argv[4]));
    } catch (const std::exception& e) {
      std::cerr << "kstudy: error: " << e.what() << "\n";
      return 1;
    }
  }

  if (argc >= 5 && std::string(argv[1]) == "__first_call") {
    kstudy::wall_timer init;
    init.start();
    Kokkos::ScopeGuard guard(argc, argv);
    const double initialize_seconds = init.seconds();
    try {
      return kstudy::run_first_call(argv[2], std::atoll(argv[3]), std::atoll(argv[4]), initialize_seconds);
    } catch (const std::exception& e) {
      std::cerr << "kstudy: error: " << e.what() << "\n";
      return 1;
    }
  }

  CLI::App app{"kstudy: correctness-gated Kokkos/CUDA performance studies with HDF5 archives.\n"
               "Typical use: `kstudy list`, `kstudy run quick --out quick.h5`, `kstudy info`."};
  app.require_subcommand(1);
  auto* list = app.add_subcommand("list", "List variants (with metadata), built-in experiments and backends");
  auto* info = app.add_subcommand("info", "Print the environment: Kokkos configuration, compiler, GPU, CPU");
  auto* run = app.add_subcommand("run", "Run experiments (built-in names or JSON files) into an HDF5 archive");
  kstudy::run_request request;
  run->add_option("experiments", request.experiments, "Built-in experiment names or paths to experiment JSON files")->required();
  request.out = "kstudy-results.h5";
  run->add_option("-o,--out", request.out, "Archive to write")->capture_default_str();
  run->add_option("--trials", request.trials, "Measured trials per point (overrides the experiment)");
  run->add_option("--replications", request.replications, "Fresh-process replications (overrides the experiment)");
  run->add_option("--warmups", request.warmups, "Unmeasured warm-ups per point (overrides the experiment)");
  run->add_option("--variants", request.variants, "Only these variants (name, name@backend or family)");
  run->add_flag("--resume", request.resume, "Complete an interrupted archive: finished points are kept, not re-run");
  run->add_flag("--overwrite", request.overwrite, "Replace an existing archive");
  run->add_flag("-q,--quiet", request.quiet, "No progress line or result table");
  run->add_option("--json", request.json_out, "Also write the results as one JSON document");
  // Listed for --help; main() hands both to scripts/kstudy_report.py before CLI11 parses anything.
  app.add_subcommand("report", "Tables (CSV), figures (PNG) and report.md from archives: report ARCHIVE... --out DIR");
  app.add_subcommand("compare", "Medians, ratio B/A, Mann-Whitney U; --by backend|machine: performance portability");
  // Listed for --help; main() runs it before Kokkos starts (profile_command).
  kstudy::profile_request unused;
  add_profile_options(*app.add_subcommand("profile", "Per-kernel GPU hardware counters (Nsight Compute) into an archive"),
                      unused);

  // Kokkos takes its --kokkos-* arguments out of argv before CLI11 sees the rest.
  Kokkos::ScopeGuard guard(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*list) return list_command();
    if (*info) {
      std::cout << kstudy::describe_environment(kstudy::collect_metadata(argc, argv));
      return 0;
    }
    if (*run) return kstudy::run_study(request, self_exe(), argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kstudy: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
