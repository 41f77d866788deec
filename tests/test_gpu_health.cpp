// The GPU health guard: which NVML reasons flag a sample as throttled, how one point's records are held
// back and flagged, that the archive stores them, and that the NVML path itself (dlopen, the lookup by
// PCI bus id or index, the reads, every failure) works: against a stand-in libnvidia-ml on any machine,
// against the real one where a GPU is present.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_CUDA: without it the GPU-only tests skip on a GPU too

#include "kokkos_test_support.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/gpu_health.hpp"
#include "kstudy_test_paths.hpp"  // KSTUDY_SOURCE_DIR and the build's executables (tests/CMakeLists.txt)

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

namespace fs = std::filesystem;
using namespace kstudy;

gpu_reading reading(std::int64_t reasons, std::int64_t sm_clock = 1980) {
  gpu_reading r;
  r.available = true;
  r.sm_clock_mhz = sm_clock;
  r.memory_clock_mhz = 3201;
  r.temperature_c = 45;
  r.power_mw = 250000;
  r.throttle_reasons = reasons;
  return r;
}

// Scripted readings, in order; the last one repeats.
class scripted_source final : public gpu_health_source {
 public:
  explicit scripted_source(std::vector<gpu_reading> readings) : m_readings(std::move(readings)) {}
  std::string device() const override { return "Scripted GPU (0000:01:00.0)"; }
  gpu_reading read() override {
    const auto& r = m_readings[std::min(m_next, m_readings.size() - 1)];
    ++m_next;
    return r;
  }
  std::size_t reads() const { return m_next; }

 private:
  std::vector<gpu_reading> m_readings;
  std::size_t m_next = 0;
};

// Keeps every call, in order: a write by its table's name.
class recording_sink final : public result_sink {
 public:
  std::vector<std::string> calls;
  std::vector<sample_record> samples;
  std::vector<gate_record> gates;
  std::vector<attribution_record> attribution;
  std::vector<health_record> health;
  std::vector<variant_record> variants;
  std::vector<profile_record> profile;

  void begin(const run_metadata&) override { calls.push_back("begin"); }
  void begin_experiment(const experiment_record&) override { calls.push_back("begin_experiment"); }
  void flush() override { calls.push_back("flush"); }
  void end_experiment(const std::string&) override { calls.push_back("end_experiment"); }
  void finish() override { calls.push_back("finish"); }

 protected:
  void do_write(const record_batch& batch) override {
    calls.push_back(batch.schema().table);
    keep(batch, samples);
    keep(batch, gates);
    keep(batch, attribution);
    keep(batch, health);
    keep(batch, variants);
    keep(batch, profile);
  }

 private:
  template <class R>
  static void keep(const record_batch& batch, std::vector<R>& into) {
    if (const auto* records = batch.get<R>()) into.insert(into.end(), records->begin(), records->end());
  }
};

sample_record sample(std::int64_t point, int trial) {
  sample_record s;
  s.experiment = "guarded";
  s.variant = "fused_cuda_feature_major@cuda";
  s.point = point;
  s.trial = trial;
  s.seconds = 1e-4;
  s.gate = gate_verdict::passed;
  s.status = "ok";
  return s;
}

health_record keys(std::int64_t point) {
  health_record h;
  h.experiment = "guarded";
  h.point = point;
  h.replication = 1;
  h.rows = 1 << 20;
  h.features = 16;
  return h;
}

// Runs one point through the guard: begin_point, two sample writes, flush.
void run_point(health_guarded_sink& guard, std::int64_t point) {
  guard.begin_point(keys(point));
  guard.write_samples({sample(point, 0)});
  guard.write_samples({sample(point, 1), sample(point, 2)});
  guard.flush();
}

TEST(GpuHealth, OnlySlowdownReasonsCountAsThrottling) {
  // GPU idle and application-clock settings are states, not slowdowns; sync boost and display clocks
  // neither.
  for (std::int64_t benign : {0x0, 0x1, 0x2, 0x3, 0x10, 0x100})
    EXPECT_FALSE(shows_slowdown(reading(benign))) << std::hex << benign;
  for (std::int64_t slowdown : {0x4, 0x8, 0x20, 0x40, 0x80, 0x1 | 0x4, 0x2 | 0x40, 0xff})
    EXPECT_TRUE(shows_slowdown(reading(slowdown))) << std::hex << slowdown;
  EXPECT_FALSE(shows_slowdown(reading(-1)));  // not reported
  gpu_reading unavailable = reading(0x4);
  unavailable.available = false;
  EXPECT_FALSE(shows_slowdown(unavailable));
  EXPECT_EQ(throttle_reason::slowdown_mask, 0xecu);
}

TEST(GpuHealth, ReasonNames) {
  EXPECT_EQ(throttle_reason_names(0), "");
  EXPECT_EQ(throttle_reason_names(-1), "");
  EXPECT_EQ(throttle_reason_names(0x1), "gpu_idle");
  EXPECT_EQ(throttle_reason_names(0x4 | 0x40), "sw_power_cap,hw_thermal");
  EXPECT_EQ(throttle_reason_names(0x8 | 0x20 | 0x80), "hw_slowdown,sw_thermal,hw_power_brake");
  EXPECT_EQ(throttle_reason_names(0x2 | (std::int64_t{1} << 40)), "applications_clocks,0x10000000000");
}

TEST(GpuHealth, FillHealthKeepsBothReadingsAndFlagsEitherSide) {
  health_record h = keys(3);
  fill_health(h, "GPU", reading(0x1, 1980), reading(0x4, 1755), 0.5);
  EXPECT_TRUE(h.available);
  EXPECT_TRUE(h.throttled);  // after showed a power cap
  EXPECT_EQ(h.reasons, "gpu_idle,sw_power_cap");
  EXPECT_EQ(h.before_sm_clock_mhz, 1980);
  EXPECT_EQ(h.after_sm_clock_mhz, 1755);
  EXPECT_EQ(h.before_throttle_reasons, 0x1);
  EXPECT_EQ(h.after_throttle_reasons, 0x4);
  EXPECT_EQ(h.point, 3);
  EXPECT_EQ(h.seconds, 0.5);

  fill_health(h, "GPU", reading(0x40), reading(0x0), 0.1);
  EXPECT_TRUE(h.throttled);  // before showed HW thermal slowdown
  fill_health(h, "GPU", reading(0x1), reading(0x2), 0.1);
  EXPECT_FALSE(h.throttled);
  fill_health(h, "unavailable: no NVML", gpu_reading{}, gpu_reading{}, 0.1);
  EXPECT_FALSE(h.available);
  EXPECT_FALSE(h.throttled);
  EXPECT_EQ(h.before_power_mw, -1);
  EXPECT_EQ(h.device, "unavailable: no NVML");
}

TEST(GpuHealth, GuardFlagsEverySampleOfAThrottledPointOnly) {
  // Point 0: idle before and after. Point 1: a power cap after. Point 2: HW slowdown before. Point 3: clean.
  scripted_source source(
      {reading(0x1), reading(0x1), reading(0x0), reading(0x4), reading(0x8), reading(0x0), reading(0x2), reading(0x0)});
  recording_sink inner;
  health_guarded_sink guard(inner, source);
  for (std::int64_t point = 0; point < 4; ++point) run_point(guard, point);
  EXPECT_EQ(source.reads(), 8u);  // one before and one after each point
  ASSERT_EQ(inner.samples.size(), 12u);
  for (const auto& s : inner.samples) EXPECT_EQ(s.throttled, s.point == 1 || s.point == 2) << s.point;
  ASSERT_EQ(inner.health.size(), 4u);
  EXPECT_FALSE(inner.health[0].throttled);
  EXPECT_TRUE(inner.health[1].throttled);
  EXPECT_EQ(inner.health[1].after_throttle_reasons, 0x4);
  EXPECT_TRUE(inner.health[2].throttled);
  EXPECT_EQ(inner.health[2].reasons, "hw_slowdown");
  EXPECT_FALSE(inner.health[3].throttled);
  EXPECT_EQ(inner.health[3].reasons, "applications_clocks");
  for (std::size_t i = 0; i < inner.health.size(); ++i) {
    EXPECT_EQ(inner.health[i].point, std::int64_t(i));
    EXPECT_EQ(inner.health[i].replication, 1);
    EXPECT_EQ(inner.health[i].rows, 1 << 20);
    EXPECT_EQ(inner.health[i].device, "Scripted GPU (0000:01:00.0)");
    EXPECT_TRUE(inner.health[i].available);
    EXPECT_GE(inner.health[i].seconds, 0.0);
  }
}

TEST(GpuHealth, GuardHoldsAPointsRecordsUntilItsFlush) {
  scripted_source source({reading(0x0)});
  recording_sink inner;
  health_guarded_sink guard(inner, source);
  guard.begin_experiment({});
  guard.write_samples({sample(-1, 0)});  // outside a point: straight through, no health row
  guard.begin_point(keys(0));
  EXPECT_TRUE(guard.in_point());
  guard.write_attribution({attribution_record{}});
  guard.write_gates({gate_record{}});
  guard.write_variants({variant_record{}});
  guard.write_samples({sample(0, 0)});
  EXPECT_EQ(inner.calls, (std::vector<std::string>{"begin_experiment", "samples"}));  // nothing of the point yet
  guard.flush();
  EXPECT_FALSE(guard.in_point());
  EXPECT_EQ(inner.calls, (std::vector<std::string>{"begin_experiment", "samples", "attribution", "gate", "variants",
                                                   "samples", "health", "flush"}));
  // A discarded point writes only what came after the discard (the runner's `aborted` row).
  guard.begin_point(keys(1));
  guard.write_samples({sample(1, 0), sample(1, 1)});
  guard.write_variants({variant_record{}});
  guard.discard_point_records();
  auto aborted = sample(1, -1);
  aborted.status = "aborted: CUDA context lost";
  guard.write_samples({aborted});
  guard.flush();
  ASSERT_EQ(inner.samples.size(), 3u);
  EXPECT_EQ(inner.samples.back().status, "aborted: CUDA context lost");
  EXPECT_EQ(inner.health.size(), 2u);
  EXPECT_EQ(inner.variants.size(), 1u);  // the discarded point's row went with it
  // The profile table is not per point: it passes straight through, never dropped.
  guard.write_profile({profile_record{}, profile_record{}}, {{"ncu_version", "test"}});
  EXPECT_EQ(inner.calls.back(), "profile");
  EXPECT_EQ(inner.profile.size(), 2u);
}

// The throttling policy at the guard (kstudy::throttle_policy): accept leaves a throttled point's samples ok;
// exclude sets its ok samples aside; remeasure does the same under its own name and drops the attempt's gate,
// attribution and variants rows (the next attempt writes them); a clean point is untouched by any policy, and
// begin_point() resets the policy.
TEST(GpuHealth, GuardAppliesTheThrottlingPolicyToThrottledPointsOnly) {
  // Per point two readings: 0 throttled (0x4 after), 1 clean, 2 throttled, 3 throttled, 4 throttled.
  scripted_source source({reading(0x1), reading(0x4), reading(0x0), reading(0x0), reading(0x0), reading(0x4),
                          reading(0x0), reading(0x4), reading(0x0), reading(0x4)});
  recording_sink inner;
  health_guarded_sink guard(inner, source);
  const auto point = [&](std::int64_t p, kstudy::throttle_policy policy, bool reset_by_begin = false) {
    if (!reset_by_begin) guard.begin_point(keys(p));
    guard.set_throttle_policy(policy);
    if (reset_by_begin) guard.begin_point(keys(p));  // a policy set before the point opens does not apply
    guard.write_gates({gate_record{}});
    guard.write_variants({variant_record{}});
    guard.write_attribution({attribution_record{}});
    auto failed = sample(p, 2);
    failed.status = "failed: boom";
    guard.write_samples({sample(p, 0), sample(p, 1), failed});
    guard.flush();
    return guard.last_point_throttled();
  };
  EXPECT_TRUE(point(0, kstudy::throttle_policy::exclude));
  EXPECT_FALSE(point(1, kstudy::throttle_policy::remeasure));
  EXPECT_TRUE(point(2, kstudy::throttle_policy::remeasure));
  EXPECT_TRUE(point(3, kstudy::throttle_policy::accept));
  EXPECT_TRUE(point(4, kstudy::throttle_policy::exclude, true));
  ASSERT_EQ(inner.samples.size(), 15u);
  const auto status_of = [&](std::int64_t p, int trial) {
    for (const auto& s : inner.samples)
      if (s.point == p && s.trial == trial) return s.status;
    return std::string("(none)");
  };
  EXPECT_EQ(status_of(0, 0), "excluded: throttled (gpu_idle,sw_power_cap)");
  EXPECT_EQ(status_of(0, 2), "failed: boom");  // what went wrong stays said
  EXPECT_EQ(status_of(1, 0), "ok");
  EXPECT_EQ(status_of(2, 1), "remeasured: throttled (sw_power_cap)");
  EXPECT_EQ(status_of(3, 0), "ok");
  EXPECT_EQ(status_of(4, 0), "ok");
  for (const auto& s : inner.samples) EXPECT_EQ(s.throttled, s.point != 1) << s.point;
  EXPECT_EQ(inner.gates.size(), 4u);  // point 2's went with its re-measured attempt
  EXPECT_EQ(inner.variants.size(), 4u);
  EXPECT_EQ(inner.attribution.size(), 4u);
  EXPECT_EQ(inner.health.size(), 5u);
}

// A unit is finished by any row but an abort marker or a re-measured attempt's, which a later attempt follows.
TEST(GpuHealth, RemeasuredAndAbortedRowsDoNotFinishAUnit) {
  auto s = sample(0, 0);
  EXPECT_TRUE(kstudy::finishes_unit(s));
  s.status = "excluded: throttled (sw_power_cap)";
  EXPECT_TRUE(kstudy::finishes_unit(s));
  s.status = "remeasured: throttled (sw_power_cap)";
  EXPECT_FALSE(kstudy::finishes_unit(s));
  s.status = "aborted: CUDA context lost";
  EXPECT_FALSE(kstudy::finishes_unit(s));
}

TEST(GpuHealth, GuardAddsPhaseSecondsToTheOpenPointOnly) {
  scripted_source source({reading(0x0)});
  recording_sink inner;
  health_guarded_sink guard(inner, source);
  guard.add_phase_seconds(point_phase::trials, 5.0);  // outside a point: nowhere to go
  guard.begin_point(keys(0));
  guard.add_phase_seconds(point_phase::trials, 0.25);
  guard.add_phase_seconds(point_phase::trials, 0.5);  // a phase entered twice adds up
  guard.add_phase_seconds(point_phase::inputs, 0.0);  // timed and took no time: 0, not "not timed"
  guard.flush();
  guard.begin_point(keys(1));  // the next point starts from its keys: nothing timed yet
  guard.flush();
  ASSERT_EQ(inner.health.size(), 2u);
  EXPECT_DOUBLE_EQ(inner.health[0].trials_seconds, 0.75);
  EXPECT_EQ(inner.health[0].inputs_seconds, 0.0);
  for (const auto& phase : point_phases()) {
    auto second = inner.health[1];
    EXPECT_TRUE(std::isnan(phase_seconds(second, phase.phase))) << phase.name;
    if (phase.phase != point_phase::trials && phase.phase != point_phase::inputs) {
      auto first = inner.health[0];
      EXPECT_TRUE(std::isnan(phase_seconds(first, phase.phase))) << phase.name;
    }
  }
  // One declaration: each phase's column is its name and "_seconds", and phase_seconds reads that member.
  health_record r;
  r.recheck_seconds = 3.0;
  EXPECT_EQ(phase_seconds(r, point_phase::recheck), 3.0);
  for (const auto& phase : point_phases()) EXPECT_EQ(std::string(phase.column), std::string(phase.name) + "_seconds");
}

TEST(GpuHealth, ArchiveStoresTheFlagsAndTheHealthTable) {
  const auto dir = fs::temp_directory_path() / ("kstudy_health_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "guarded.h5").string();
  scripted_source source({reading(0x1), reading(0x20), reading(0x0), reading(0x0)});
  {
    hdf5_sink archive(path, open_mode::create);
    health_guarded_sink guard(archive, source);
    guard.begin_experiment({"guarded", "{}", "{}", "fp"});
    run_point(guard, 0);
    guard.begin_point(keys(1));
    guard.add_phase_seconds(point_phase::attribution, 0.125);
    guard.write_samples({sample(1, 0), sample(1, 1), sample(1, 2)});
    guard.flush();
    guard.end_experiment("guarded");
    guard.finish();
  }
  const auto samples = read_samples(path, "guarded");
  ASSERT_EQ(samples.size(), 6u);
  for (const auto& s : samples) EXPECT_EQ(s.throttled, s.point == 0);
  const auto health = read_health(path, "guarded");
  ASSERT_EQ(health.size(), 2u);
  EXPECT_TRUE(health[0].throttled);
  EXPECT_EQ(health[0].after_throttle_reasons, 0x20);
  EXPECT_EQ(health[0].reasons, "gpu_idle,sw_thermal");
  EXPECT_FALSE(health[1].throttled);
  EXPECT_EQ(health[1].before_temperature_c, 45);
  EXPECT_TRUE(std::isnan(health[0].attribution_seconds));  // not timed: NaN through the archive
  EXPECT_EQ(health[1].attribution_seconds, 0.125);
  fs::remove_all(dir);
}

// --- the NVML path --------------------------------------------------------------------------------

// The stand-in libnvidia-ml: in a GPU bundle it sits in lib/ beside the test binary, in a build tree
// where CMake built it.
std::string fake_nvml() {
  std::error_code ec;
  const auto beside =
      fs::read_symlink("/proc/self/exe", ec).parent_path() / "lib" / fs::path(KSTUDY_FAKE_NVML).filename();
  if (!ec && fs::is_regular_file(beside)) return beside.string();
  return KSTUDY_FAKE_NVML;
}

// Sets an environment variable for one scope.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) {
      m_old = old;
      m_had = true;
    }
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~scoped_env() {
    if (m_had)
      setenv(m_name, m_old.c_str(), 1);
    else
      unsetenv(m_name);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* m_name;
  std::string m_old;
  bool m_had = false;
};

TEST(GpuHealth, MissingNvmlIsRecordedAsUnavailableNeverAnError) {
  auto source = make_nvml_health_source("", "/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(source->device().rfind("unavailable: ", 0), 0u) << source->device();
  EXPECT_NE(source->device().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << source->device();
  const auto r = source->read();
  EXPECT_FALSE(r.available);
  EXPECT_EQ(r.throttle_reasons, -1);
  // A library that is not NVML at all: a symbol is missing.
  auto not_nvml = make_nvml_health_source("", "libm.so.6");
  EXPECT_EQ(not_nvml->device().rfind("unavailable: ", 0), 0u) << not_nvml->device();
  EXPECT_FALSE(not_nvml->read().available);
}

TEST(GpuHealth, NvmlPathReadsThroughTheLoadedLibrary) {
  scoped_env reasons("KSTUDY_FAKE_NVML_REASONS", "0x1,0x4,0x0");
  scoped_env power("KSTUDY_FAKE_NVML_NO_POWER", "1");
  auto source = make_nvml_health_source("", fake_nvml());
  EXPECT_EQ(source->device(), "Fake NVML GPU (NVML index 0)");
  const auto first = source->read(), second = source->read(), third = source->read(), fourth = source->read();
  for (const auto& r : {first, second, third, fourth}) {
    EXPECT_TRUE(r.available);
    EXPECT_EQ(r.memory_clock_mhz, 2619);
    EXPECT_EQ(r.power_mw, -1);  // not supported: -1, and the other values are still read
  }
  EXPECT_EQ(first.sm_clock_mhz, 1980);
  EXPECT_EQ(second.sm_clock_mhz, 1979);
  EXPECT_EQ(second.temperature_c, 41);
  EXPECT_EQ(first.throttle_reasons, 0x1);
  EXPECT_EQ(second.throttle_reasons, 0x4);
  EXPECT_EQ(third.throttle_reasons, 0x0);
  EXPECT_EQ(fourth.throttle_reasons, 0x1);  // cycled
  EXPECT_FALSE(shows_slowdown(first));
  EXPECT_TRUE(shows_slowdown(second));
}

TEST(GpuHealth, NvmlDeviceByPciBusIdAndItsFailures) {
  auto by_bus = make_nvml_health_source("0000:65:00.0", fake_nvml());
  EXPECT_EQ(by_bus->device(), "Fake NVML GPU (0000:65:00.0)");
  EXPECT_TRUE(by_bus->read().available);
  by_bus.reset();
  auto wrong_bus = make_nvml_health_source("0000:ff:00.0", fake_nvml());
  EXPECT_EQ(wrong_bus->device(), "unavailable: no NVML device with PCI bus id 0000:ff:00.0: Not Found (6)");
  EXPECT_FALSE(wrong_bus->read().available);
  wrong_bus.reset();
  scoped_env fails("KSTUDY_FAKE_NVML_INIT_FAILS", "1");
  auto no_driver = make_nvml_health_source("", fake_nvml());
  EXPECT_EQ(no_driver->device(), "unavailable: nvmlInit_v2 failed: Driver Not Loaded (9)");
  EXPECT_FALSE(no_driver->read().available);
}

// The runner's source honours KSTUDY_NVML_LIBRARY; in the cuda flavour it looks the device up by the PCI
// bus id of the CUDA device Kokkos uses, which the stand-in does not know.
TEST(GpuHealth, RunnerSourceUsesTheConfiguredLibrary) {
  KSTUDY_REQUIRE_KOKKOS();
  const std::string path = fake_nvml();
  scoped_env library("KSTUDY_NVML_LIBRARY", path.c_str());
  const auto source = make_gpu_health_source();
#ifdef KOKKOS_ENABLE_CUDA
  const auto device = source->device();
  EXPECT_TRUE(device.rfind("unavailable: no NVML device with PCI bus id ", 0) == 0 ||
              device.rfind("Fake NVML GPU (", 0) == 0)
      << device;
#else
  EXPECT_EQ(source->device(), "Fake NVML GPU (NVML index 0)");
  EXPECT_TRUE(source->read().available);
#endif
}

// On a GPU machine: the real libnvidia-ml, the device Kokkos runs on, plausible values.
TEST(GpuHealth, RealNvmlOnTheDeviceInUse) {
  KSTUDY_REQUIRE_KOKKOS();
#ifndef KOKKOS_ENABLE_CUDA
  GTEST_SKIP() << "the cuda flavour maps the CUDA device to NVML; this build has no CUDA";
#else
  scoped_env library("KSTUDY_NVML_LIBRARY", nullptr);
  const auto source = make_gpu_health_source();
  char bus_id[32] = {};
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device), cudaSuccess);
  ASSERT_EQ(source->device().rfind("unavailable", 0), std::string::npos) << source->device();
  EXPECT_NE(source->device().find(bus_id), std::string::npos) << source->device() << " vs " << bus_id;
  const auto r = source->read();
  ASSERT_TRUE(r.available);
  EXPECT_GT(r.sm_clock_mhz, 0);
  EXPECT_GT(r.memory_clock_mhz, 0);
  EXPECT_GT(r.temperature_c, 0);
  EXPECT_GT(r.power_mw, 0);
  EXPECT_GE(r.throttle_reasons, 0);
  std::cout << "[ health   ] " << source->device() << ": SM " << r.sm_clock_mhz << " MHz, memory " << r.memory_clock_mhz
            << " MHz, " << r.temperature_c << " C, " << r.power_mw << " mW, reasons 0x" << std::hex
            << r.throttle_reasons << std::dec << " (" << throttle_reason_names(r.throttle_reasons) << ")\n";
#endif
}

}  // namespace

namespace {

// Energy and in-point readings through the real NVML path, from the stand-in's scripted sequence. Reads, in
// order: the source's own energy probe (step 1), begin_point (reading 1, energy step 2), open_window (reading
// 2, step 3), close_window (step 4, reading 3), flush (step 5, reading 4). With steps 100,100,100,750,100 the
// window counts 0.75 J; the point, from step 2 to step 5, 0.95 J. Only the reading at the window's end shows a
// SW power cap: before and after the point the GPU looks fine, yet every sample of the point is flagged, and
// the one timed in the window carries the reason itself.
TEST(GpuHealth, EnergyPerCallAndThrottlingInsideAPointFromTheStandIn) {
  scoped_env steps("KSTUDY_FAKE_NVML_ENERGY_STEPS_MJ", "100,100,100,750,100");
  scoped_env reasons("KSTUDY_FAKE_NVML_REASONS", "0,0,0x4,0");
  auto source = make_nvml_health_source("", fake_nvml());
  EXPECT_EQ(source->energy_status(), "nvmlDeviceGetTotalEnergyConsumption (mJ)");
  recording_sink inner;
  health_guarded_sink guard(inner, *source);  // no sampler thread: the sequence stays scripted
  guard.begin_point(keys(0));
  guard.open_window();
  const auto window = guard.close_window();
  auto timed = sample(0, 0);
  record_window(timed, window);
  guard.write_samples({timed, sample(0, 1)});
  guard.flush();
  EXPECT_EQ(window.readings, 2);
  EXPECT_DOUBLE_EQ(window.energy_joules, 0.75);
  // The stand-in's reading k (from 1) has power 100000 + k - 1 mW and SM clock 1980 - (k - 1) MHz.
  EXPECT_DOUBLE_EQ(window.power_watts, (100001.0 + 100002.0) / 2 / 1000);
  EXPECT_EQ(window.min_sm_clock_mhz, 1978);
  EXPECT_EQ(window.throttle_reasons, 0x4);
  ASSERT_EQ(inner.samples.size(), 2u);
  EXPECT_DOUBLE_EQ(inner.samples[0].energy_joules, 0.75);
  EXPECT_EQ(inner.samples[0].throttle_reasons, 0x4);
  EXPECT_TRUE(inner.samples[0].throttled);
  EXPECT_TRUE(inner.samples[1].throttled);  // the point's flag: a slowdown during it
  EXPECT_TRUE(std::isnan(inner.samples[1].energy_joules));
  EXPECT_EQ(inner.samples[1].throttle_reasons, -1);
  ASSERT_EQ(inner.health.size(), 1u);
  const auto& h = inner.health.front();
  EXPECT_EQ(h.before_throttle_reasons, 0);
  EXPECT_EQ(h.after_throttle_reasons, 0);
  EXPECT_TRUE(h.throttled);
  EXPECT_EQ(h.reasons, "sw_power_cap");
  EXPECT_DOUBLE_EQ(h.energy_joules, 0.95);
  EXPECT_EQ(h.sampled_readings, 2);
  EXPECT_EQ(h.sampled_throttle_reasons, 0x4);
  EXPECT_EQ(h.sampled_min_sm_clock_mhz, 1978);
}

// The sampler thread reads the GPU while a timed region runs; without a counter the energy is NaN, said once
// by energy_status(), and the rest goes on.
TEST(GpuHealth, SamplerReadsDuringARegionAndNoCounterMeansNaN) {
  scoped_env no_energy("KSTUDY_FAKE_NVML_NO_ENERGY", "1");
  auto source = make_nvml_health_source("", fake_nvml());
  EXPECT_EQ(source->energy_status(), "unavailable: nvmlDeviceGetTotalEnergyConsumption failed: Not Supported (3)");
  recording_sink inner;
  health_guarded_sink guard(inner, *source, std::chrono::milliseconds(2));
  guard.begin_point(keys(0));
  guard.open_window();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const auto window = guard.close_window();
  guard.flush();
  EXPECT_GT(window.readings, 2) << "the sampler took no reading in 60 ms";
  EXPECT_TRUE(std::isnan(window.energy_joules));
  EXPECT_GT(window.power_watts, 100.0);
  ASSERT_EQ(inner.health.size(), 1u);
  EXPECT_TRUE(std::isnan(inner.health.front().energy_joules));
  EXPECT_GE(inner.health.front().sampled_readings, window.readings);
  EXPECT_FALSE(inner.health.front().throttled);
}

TEST(GpuHealth, SamplingPeriodComesFromTheEnvironment) {
  {
    scoped_env period("KSTUDY_GPU_SAMPLING_MS", nullptr);
    EXPECT_EQ(gpu_sampling_period().count(), 15);
  }
  scoped_env period("KSTUDY_GPU_SAMPLING_MS", "0");
  EXPECT_EQ(gpu_sampling_period().count(), 0);
  scoped_env bad("KSTUDY_GPU_SAMPLING_MS", "fast");
  EXPECT_THROW(gpu_sampling_period(), std::invalid_argument);
}

}  // namespace
