#include "kstudy/runner/environment.hpp"

#include <Kokkos_Core.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "kstudy/build_info.hpp"
#include "kstudy/gpu_health.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/runner/kokkos_session.hpp"
#include "kstudy/platform/devices.hpp"

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy {

namespace {
std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}
std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}
}  // namespace

namespace {

// Root attributes: what ran, where, from which build and (under Slurm) which job.
void describe_run(std::map<std::string, std::string>& root, int argc, char** argv) {
  root["kstudy_version"] = build_info::version;
  root["git_commit"] = build_info::git_commit;
  root["git_dirty"] = build_info::git_dirty;
  // A dirty tree's diff against the commit, by hash (cmake/kstudy_write_build_info.cmake): a dirty build names
  // what it ran beyond the commit. Not written for a clean tree.
  if (std::string(build_info::git_dirty) == "true") root["git_diff_sha256"] = build_info::git_diff_sha256;
  root["flavour"] = build_info::flavour;
  root["created_utc"] = utc_now();
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  root["command_line"] = command;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  root["host"] = host;
  // Under Slurm: the job and array task that measured this archive (kstudy submit).
  const std::pair<const char*, const char*> slurm[] = {{"SLURM_JOB_ID", "slurm_job_id"},
                                                       {"SLURM_ARRAY_JOB_ID", "slurm_array_job_id"},
                                                       {"SLURM_ARRAY_TASK_ID", "slurm_array_task_id"}};
  for (const auto& [variable, key] : slurm)
    if (const char* value = std::getenv(variable)) root[key] = value;
}

// The Kokkos build: version, configuration, backends and the GPU architecture it was compiled for.
void describe_kokkos(std::map<std::string, std::string>& env) {
  env["kokkos_version"] = std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) +
                          "." + std::to_string(KOKKOS_VERSION % 100);
  std::ostringstream config;
  // print_configuration needs an initialised Kokkos (a CUDA build's queries the devices and throws
  // without one, 3.4 and 4.x alike): `kstudy info` on a machine without a GPU describes the build only.
  if (Kokkos::is_initialized())
    Kokkos::print_configuration(config, true);
  else
    config << "  (Kokkos not started in this process: its runtime configuration is not known)\n";
  env["kokkos_configuration"] = config.str();
  env["kokkos_dir"] = build_info::kokkos_dir;
  std::string backends;
#ifdef KOKKOS_ENABLE_SERIAL
  backends += "serial ";
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  backends += "openmp ";
  if (Kokkos::is_initialized()) env["openmp_threads"] = std::to_string(Kokkos::OpenMP().concurrency());
#endif
#ifdef KOKKOS_ENABLE_CUDA
  backends += "cuda ";
#endif
  env["backends"] = backends.empty() ? backends : backends.substr(0, backends.size() - 1);
  env["default_execution_space"] = Kokkos::DefaultExecutionSpace::name();
  // Kokkos 3.4's print_configuration omits GPU architectures it did not know (HOPPER90 is our patch),
  // so name the one this build was compiled for from its macros.
  std::string arch;
#ifdef KOKKOS_ARCH_VOLTA70
  arch += "VOLTA70 ";
#endif
#ifdef KOKKOS_ARCH_TURING75
  arch += "TURING75 ";
#endif
#ifdef KOKKOS_ARCH_AMPERE80
  arch += "AMPERE80 ";
#endif
#ifdef KOKKOS_ARCH_AMPERE86
  arch += "AMPERE86 ";
#endif
#ifdef KOKKOS_ARCH_ADA89
  arch += "ADA89 ";
#endif
#ifdef KOKKOS_ARCH_HOPPER90
  arch += "HOPPER90 ";
#endif
#ifdef KOKKOS_ARCH_BLACKWELL100
  arch += "BLACKWELL100 ";
#endif
#ifdef KOKKOS_ARCH_BLACKWELL120
  arch += "BLACKWELL120 ";
#endif
  env["kokkos_gpu_arch"] = arch.empty() ? "none" : arch.substr(0, arch.size() - 1);
  // What kstudy's own CUDA was compiled for (KSTUDY_CUDA_ARCH; "0" in the cpu flavour): with the GPU's compute
  // capability, why a rung that needs a newer target was skipped.
  env["kstudy_cuda_arch"] = build_info::cuda_arch;
}

// The compiler and build type kstudy was built with (build keys: this_build() reads them too).
void describe_compiler(std::map<std::string, std::string>& env) {
  env["compiler"] = build_info::cxx_compiler;
  env["build_type"] = build_info::build_type;
}

// The compiler and the host: CPU, cores, OpenMP binding, visible GPUs.
void describe_host(std::map<std::string, std::string>& env) {
  describe_compiler(env);
  env["omp_proc_bind"] = env_or("OMP_PROC_BIND", "unset");
  env["omp_places"] = env_or("OMP_PLACES", "unset");
  // Whether this process's OpenMP threads spin after a parallel region: with them bound across every core, spinning
  // delayed a Python rung's calls 12-fold at a small point (performance_notes, session 27), so two archives that
  // differ in it are not the same measurement.
  env["omp_wait_policy"] = env_or("OMP_WAIT_POLICY", "unset");
  env["cpu_model"] = cpu_model();
  // The GPUs this process may see (Slurm's per-task binding sets it; one shard per GPU).
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) env["cuda_visible_devices"] = visible;
  env["cpu_cores"] = std::to_string(std::thread::hardware_concurrency());
}

// The GPU Kokkos runs on and the CUDA runtime and driver (cuda flavour).
void describe_gpu([[maybe_unused]] std::map<std::string, std::string>& env) {
#ifdef KOKKOS_ENABLE_CUDA
  int runtime = 0, driver = 0, device = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  cudaGetDevice(&device);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    env["gpu_name"] = prop.name;
    env["gpu_sm_count"] = std::to_string(prop.multiProcessorCount);
    env["gpu_memory_bytes"] = std::to_string(prop.totalGlobalMem);
    env["gpu_compute_capability"] = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    env["gpu_l2_bytes"] = std::to_string(prop.l2CacheSize);
    int clock_khz = 0, memory_clock_khz = 0, bus_width = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device);
    cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, device);
    cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, device);
    env["gpu_max_sm_clock_khz"] = std::to_string(clock_khz);
    env["gpu_memory_clock_khz"] = std::to_string(memory_clock_khz);
    env["gpu_memory_bus_bits"] = std::to_string(bus_width);
  }
  env["cuda_runtime_version"] = std::to_string(runtime);
  env["cuda_driver_version"] = std::to_string(driver);
  // The device-wide cache preference Kokkos' initialisation left, and the one the measurements ran under
  // (kstudy/runner/kokkos_session.hpp restores the default unless KSTUDY_KEEP_KOKKOS_DEVICE_SETTINGS=1).
  const auto& settings = device_settings_after_kokkos();
  if (!settings.cache_config_measured.empty()) {
    env["device_cache_config_set_by_kokkos"] = settings.cache_config_set_by_kokkos;
    env["device_cache_config"] = settings.cache_config_measured;
  }
#endif
}

// Which physical GPU this process ran on: the archive stamps every sample with it, so the runs of a study
// spread over a node's GPUs (kstudy run --devices) stay told apart after their merge.
void describe_device_identity(std::map<std::string, std::string>& env) {
  const auto device = platform::make_device_source()->current();
  if (!device) return;
  env["gpu_uuid"] = device->uuid;
  env["gpu_pci_bus_id"] = device->pci_bus_id;
  env.emplace("gpu_name", device->model);  // a fake device's model; the CUDA runtime's name is already there
}

// What the replications can read from the GPU during a point, said once for the run: the energy counter
// and the in-point sampler, or why not (no NVML, no counter).
void describe_gpu_monitoring(std::map<std::string, std::string>& env) {
#ifdef KOKKOS_ENABLE_CUDA
  // The NVML device is the CUDA device Kokkos runs on: unknown before Kokkos has started (kstudy info
  // on a machine without a GPU).
  if (!Kokkos::is_initialized()) {
    env["gpu_energy"] = env["gpu_sampling"] = "unknown: Kokkos not started in this process";
    return;
  }
#endif
  const auto source = make_gpu_health_source();
  env["gpu_energy"] = source->energy_status();
  env["gpu_sampling"] = gpu_sampling_status(*source);
}

}  // namespace

run_metadata collect_metadata(int argc, char** argv) {
  run_metadata m;
  describe_run(m.root, argc, argv);
  describe_kokkos(m.environment);
  describe_host(m.environment);
  describe_gpu(m.environment);
  describe_device_identity(m.environment);
  describe_gpu_monitoring(m.environment);
  return m;
}

const std::vector<build_key>& build_keys() {
  static const std::vector<build_key> keys{
      {"schema_version", false},  {"kstudy_version", false}, {"git_commit", false},    {"git_dirty", false},
      {"git_diff_sha256", false}, {"flavour", false},        {"kokkos_version", true}, {"kokkos_gpu_arch", true},
      {"kstudy_cuda_arch", true}, {"backends", true},        {"compiler", true},       {"build_type", true}};
  return keys;
}

run_metadata this_build() {
  run_metadata m;
  describe_run(m.root, 0, nullptr);
  m.root["schema_version"] = archive_schema_version;
  describe_kokkos(m.environment);
  describe_compiler(m.environment);
  return m;
}

std::string build_difference(const run_metadata& archive) {
  const auto ours = this_build();
  const auto value = [](const std::map<std::string, std::string>& map, const char* key) {
    const auto it = map.find(key);
    return it == map.end() ? std::string("(none)") : it->second;
  };
  std::string differences;
  for (const auto& key : build_keys()) {
    const auto& theirs_map = key.environment ? archive.environment : archive.root;
    const auto& ours_map = key.environment ? ours.environment : ours.root;
    const auto theirs = value(theirs_map, key.name), mine = value(ours_map, key.name);
    if (theirs != mine)
      differences += std::string(differences.empty() ? "" : "; ") + key.name + ": " + theirs + " there, " + mine +
                     " in this build";
  }
  return differences;
}

std::string describe_environment(const run_metadata& metadata) {
  std::ostringstream os;
  os << "kstudy " << metadata.root.at("kstudy_version") << " (" << metadata.root.at("flavour") << " flavour, commit "
     << metadata.root.at("git_commit").substr(0, 12) << (metadata.root.at("git_dirty") == "true" ? "+dirty" : "");
  if (const auto diff = metadata.root.find("git_diff_sha256"); diff != metadata.root.end())
    os << ", diff sha256 " << diff->second.substr(0, 12);
  os << ")\n";
  for (const auto& [key, value] : metadata.environment)
    if (key != "kokkos_configuration") os << "  " << key << ": " << value << "\n";
  os << "\nKokkos configuration:\n" << metadata.environment.at("kokkos_configuration");
  return os.str();
}

}  // namespace kstudy
