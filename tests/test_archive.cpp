// The sinks: the HDF5 archive round-trips every record, resumes without duplicating, refuses what it
// must refuse before anything is measured, and keeps every flushed row through a crash; the JSON copy
// holds the same rows. None of this needs Kokkos.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <variant>

#include "scratch_dir.hpp"
#include "source_files.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/ceilings.hpp"
#include "kstudy/study.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kstudy;

const std::vector<timer_kind> k_all_timers{
    timer_kind::host_wall, timer_kind::resident_wall,    timer_kind::device_events,
    timer_kind::one_shot,  timer_kind::one_shot_alloc,   timer_kind::pipelined,
    timer_kind::cold,      timer_kind::compile,          timer_kind::launch,
    timer_kind::transfer,  timer_kind::layout_conversion};

const std::vector<gate_verdict> k_all_verdicts{gate_verdict::passed, gate_verdict::failed, gate_verdict::not_gated};

// A fresh directory per test, removed afterwards.
// Each test gets its own folder (tests/scratch_dir.hpp).
class scratch_dir : public kstudy::test::scratch_dir {
 public:
  scratch_dir() : kstudy::test::scratch_dir("archive") {}
};

// Every field non-default and varying, so a field the archive dropped or mixed up cannot read back equal.
sample_record make_sample(const std::string& experiment, std::int64_t i) {
  sample_record s;
  s.experiment = experiment;
  s.variant = "variant_" + std::to_string(i % 7) + "@openmp";
  s.layout = i % 2 ? "row_major" : "feature_major";
  s.memory_kind = i % 3 ? "pinned" : "pageable";
  s.direction = i % 3 ? "h2d" : "";  // empty strings must survive too
  s.rows = 1000 + i;
  s.features = 32 + i % 5;
  s.pitch = 40 + i % 2;
  s.block_size = 128 * (i % 3);
  s.bytes = (std::int64_t{1} << 40) + i;  // beyond 32 bits
  s.point = i / 10;
  s.replication = static_cast<std::int32_t>(i % 4);
  s.trial = static_cast<std::int32_t>(i);
  s.timer = k_all_timers[static_cast<std::size_t>(i) % k_all_timers.size()];
  s.seconds = 1e-6 * static_cast<double>(i + 1) + 1e-13;
  s.gate = k_all_verdicts[static_cast<std::size_t>(i / 5) % k_all_verdicts.size()];
  s.throttled = i % 7 == 0;
  s.status = s.gate != gate_verdict::failed ? "ok" : "rejected: µ-probe ✓";  // UTF-8
  return s;
}

gate_record make_gate(const std::string& experiment, std::int64_t i) {
  gate_record g;
  g.experiment = experiment;
  g.variant = "gate_variant_" + std::to_string(i);
  g.layout = "padded_row_major";
  g.rows = 10 + i;
  g.features = 3 + i;
  g.block_size = 64 * i;
  g.passed = i % 2 == 0;
  g.max_abs_error = 1.5e-7 * (i + 1);
  g.max_relative_error = 0.25 + i;
  g.rtol = 4.2e-6;
  g.atol = 1e-6;
  g.value_failures = i;
  g.discrete_mismatches = 2 * i;
  g.ambiguous = 3 * i;
  g.message = g.passed ? "" : "score out of tolerance at row " + std::to_string(i);
  return g;
}

ceiling_record make_ceiling(std::int64_t i) {
  ceiling_record c;
  c.name = i % 2 ? "device_copy" : "h2d_pinned";
  c.bytes = (std::int64_t{1} << 30) + i;
  c.seconds = 0.001 * (i + 1);
  c.bytes_per_second = static_cast<double>(c.bytes) / c.seconds;
  c.clock = i % 3 ? kstudy::timer_kind::host_wall : kstudy::timer_kind::device_events;
  return c;
}

summary_record make_summary(const std::string& experiment, std::int64_t i) {
  summary_record s;
  s.experiment = experiment;
  s.variant = "summary_variant_" + std::to_string(i);
  s.layout = "row_major";
  s.memory_kind = "device";
  s.direction = "d2h";
  s.rows = 1 << 20;
  s.features = 64 + i;
  s.block_size = 256;
  s.timer = k_all_timers[static_cast<std::size_t>(i + 3) % k_all_timers.size()];
  s.samples = 30 + i;
  s.median = 2e-4 * (i + 1);
  s.min = 1e-4;
  s.max = 9e-4;
  s.q1 = 1.5e-4;
  s.q3 = 3e-4;
  s.bytes_per_second = 1.2e12 + i;
  s.fraction_of_roof = 0.5 + 0.01 * i;
  return s;
}

attribution_record make_attribution(const std::string& experiment, std::int64_t i) {
  attribution_record a;
  a.experiment = experiment;
  a.variant = "composed_" + std::to_string(i);
  a.rows = 4096;
  a.features = 16;
  a.kernel = "kstudy::kernel_" + std::to_string(i);
  a.calls = 100 + i;
  a.seconds = 0.0123 * (i + 1);
  return a;
}

health_record make_health(const std::string& experiment, std::int64_t i) {
  health_record h;
  h.experiment = experiment;
  h.point = i;
  h.replication = static_cast<std::int32_t>(i % 3);
  h.rows = 1024 << i;
  h.features = 16 + i;
  h.block_size = 32 * i;
  h.bytes = (std::int64_t{1} << 33) + i;
  h.memory_kind = i % 2 ? "pinned" : "";
  h.direction = i % 2 ? "d2h" : "";
  h.available = i % 4 != 3;
  h.device = h.available ? "NVIDIA H200 (00000000:65:00.0)" : "unavailable: libnvidia-ml.so.1: not found";
  h.before_sm_clock_mhz = 1980 - i;
  h.before_memory_clock_mhz = 3201;
  h.before_temperature_c = 40 + i;
  h.before_power_mw = 120000 + i;
  h.before_throttle_reasons = i % 2 ? 0x1 : 0x4;
  h.after_sm_clock_mhz = 1755 + i;
  h.after_memory_clock_mhz = 3200;
  h.after_temperature_c = 60 + i;
  h.after_power_mw = 690000 - i;
  h.after_throttle_reasons = std::int64_t{1} << 40;  // unknown future bits survive too
  h.seconds = 0.25 * (i + 1);
  h.throttled = i % 2 == 0;
  h.reasons = h.throttled ? "sw_power_cap" : "gpu_idle";
  return h;
}

variant_record make_variant(std::int64_t i) {
  variant_record v;
  v.variant = "variant_" + std::to_string(i) + (i % 2 ? "@cuda" : "@openmp");
  v.operation = "scoring";
  v.family = i % 3 ? "fused_kokkos" : "composed";
  v.fusion_level = i % 3 ? "full" : "none";
  v.layout = i % 2 ? "padded_row_major" : "feature_major";
  v.backend = i % 2 ? "cuda" : "openmp";
  v.on_device = i % 2 == 1;
  v.kernels_launched = static_cast<std::int32_t>(1 + 4 * (i % 3 == 0));
  v.rung = static_cast<std::int32_t>(i % 5);
  v.rows = (std::int64_t{1} << 33) + i;  // beyond 32 bits
  v.features = 16 + i;
  v.block_size = 128 * (i % 4);
  v.modelled_bytes_read = (std::int64_t{5} << 36) + i;
  v.modelled_bytes_written = (std::int64_t{3} << 34) + i;
  v.essential_bytes = (std::int64_t{1} << 37) + i;
  v.essential_flops = (std::int64_t{5} << 37) + i;
  return v;
}

template <class R, class F>
std::vector<R> make_many(std::int64_t count, F make) {
  std::vector<R> records;
  for (std::int64_t i = 0; i < count; ++i) records.push_back(make(i));
  return records;
}

// Explicit member lists (not the archive's own field tables), so a member the tables lack is caught.
auto members(const sample_record& r) {
  return std::tie(r.experiment, r.variant, r.layout, r.memory_kind, r.direction, r.rows, r.features, r.pitch,
                  r.block_size, r.bytes, r.point, r.replication, r.trial, r.timer, r.seconds, r.gate, r.throttled,
                  r.status, r.occupancy);
}
auto members(const gate_record& r) {
  return std::tie(r.experiment, r.variant, r.layout, r.rows, r.features, r.block_size, r.passed, r.max_abs_error,
                  r.max_relative_error, r.rtol, r.atol, r.value_failures, r.discrete_mismatches, r.ambiguous,
                  r.message);
}
auto members(const ceiling_record& r) { return std::tie(r.name, r.bytes, r.seconds, r.bytes_per_second, r.clock); }
auto members(const summary_record& r) {
  return std::tie(r.experiment, r.variant, r.layout, r.memory_kind, r.direction, r.rows, r.features, r.block_size,
                  r.timer, r.samples, r.median, r.min, r.max, r.q1, r.q3, r.bytes_per_second, r.fraction_of_roof);
}
auto members(const attribution_record& r) {
  return std::tie(r.experiment, r.variant, r.rows, r.features, r.kernel, r.calls, r.seconds);
}
auto members(const health_record& r) {
  return std::tie(r.experiment, r.point, r.replication, r.rows, r.features, r.block_size, r.bytes, r.memory_kind,
                  r.direction, r.device, r.available, r.before_sm_clock_mhz, r.before_memory_clock_mhz,
                  r.before_temperature_c, r.before_power_mw, r.before_throttle_reasons, r.after_sm_clock_mhz,
                  r.after_memory_clock_mhz, r.after_temperature_c, r.after_power_mw, r.after_throttle_reasons,
                  r.seconds, r.throttled, r.reasons);
}

auto members(const variant_record& r) {
  return std::tie(r.variant, r.operation, r.family, r.fusion_level, r.layout, r.backend, r.on_device,
                  r.kernels_launched, r.rung, r.rows, r.features, r.block_size, r.modelled_bytes_read,
                  r.modelled_bytes_written, r.essential_bytes, r.essential_flops);
}

template <class R>
void expect_same_records(const std::vector<R>& expected, const std::vector<R>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(members(expected[i]), members(actual[i])) << "row " << i;
}

run_metadata make_metadata() {
  run_metadata m;
  m.root = {{"kstudy_version", "0.1.0"}, {"git_commit", "abc123"}, {"command_line", "kstudy run --output x.h5"}};
  m.environment = {{"kokkos_version", "3.4.01"}, {"gpu_name", "NVIDIA H200"}, {"note", "µ ✓ non-ASCII"}};
  return m;
}

experiment_record make_experiment(const std::string& name, const std::string& fingerprint = "fp-1") {
  return {name, R"({"name":")" + name + R"(","shapes":[[1000,32]]})", R"({"warmup":3,"trials":30})", fingerprint};
}

// What the writer of one experiment puts in the archive (also reused by the crash child).
struct experiment_content {
  std::vector<sample_record> samples;
  std::vector<gate_record> gates;
  std::vector<ceiling_record> ceilings;
  std::vector<summary_record> summaries;
  std::vector<attribution_record> attribution;
  std::vector<health_record> health;
  std::vector<variant_record> variants;
};

experiment_content make_content(const std::string& experiment, std::int64_t samples) {
  return {make_many<sample_record>(samples, [&](auto i) { return make_sample(experiment, i); }),
          make_many<gate_record>(5, [&](auto i) { return make_gate(experiment, i); }),
          make_many<ceiling_record>(4, [](auto i) { return make_ceiling(i); }),
          make_many<summary_record>(12, [&](auto i) { return make_summary(experiment, i); }),
          make_many<attribution_record>(3, [&](auto i) { return make_attribution(experiment, i); }),
          make_many<health_record>(9, [&](auto i) { return make_health(experiment, i); }),
          make_many<variant_record>(6, [](auto i) { return make_variant(i); })};
}

void write_content(result_sink& sink, const experiment_record& experiment, const experiment_content& content) {
  sink.begin_experiment(experiment);
  // Samples in uneven batches, across the 1024-row chunk boundary.
  const std::size_t half = content.samples.size() / 3;
  sink.write_samples({content.samples.begin(), content.samples.begin() + half});
  sink.write_samples({});
  sink.write_samples({content.samples.begin() + half, content.samples.end()});
  sink.write_gates(content.gates);
  sink.write_ceilings(content.ceilings);
  sink.write_summaries(content.summaries);
  sink.write_attribution(content.attribution);
  sink.write_health({content.health.begin(), content.health.begin() + 4});
  sink.write_health({content.health.begin() + 4, content.health.end()});
  sink.write_variants({content.variants.begin(), content.variants.begin() + 2});
  sink.write_variants({content.variants.begin() + 2, content.variants.end()});
  sink.flush();
  sink.end_experiment(experiment.name);
}

void expect_archive_holds(const std::string& path, const std::string& experiment, const experiment_content& content) {
  expect_same_records(content.samples, read_samples(path, experiment));
  expect_same_records(content.gates, read_gates(path, experiment));
  expect_same_records(content.ceilings, read_ceilings(path, experiment));
  expect_same_records(content.summaries, read_summaries(path, experiment));
  expect_same_records(content.attribution, read_attribution(path, experiment));
  expect_same_records(content.health, read_health(path, experiment));
  expect_same_records(content.variants, read_variants(path, experiment));
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Archive, TimerNamesRoundTrip) {
  std::set<std::string> names;
  for (timer_kind kind : k_all_timers) {
    names.insert(to_string(kind));
    EXPECT_EQ(parse_timer_kind(to_string(kind)), kind);
  }
  EXPECT_EQ(names.size(), k_all_timers.size());
  EXPECT_STREQ(to_string(timer_kind::one_shot_alloc), "one_shot_alloc");
  EXPECT_THROW(parse_timer_kind("wall_clock"), std::invalid_argument);
  EXPECT_NE(error_of([] { parse_timer_kind("wall_clock"); }).find("wall_clock"), std::string::npos);
  for (gate_verdict verdict : k_all_verdicts) EXPECT_EQ(parse_gate_verdict(to_string(verdict)), verdict);
  EXPECT_STREQ(to_string(gate_verdict::not_gated), "not_gated");
  EXPECT_NE(error_of([] { parse_gate_verdict("true"); }).find("'true'"), std::string::npos);
  EXPECT_EQ(parse_open_mode("resume"), open_mode::resume);
  EXPECT_THROW(parse_open_mode("truncate"), std::invalid_argument);
}

TEST(Archive, RoundTripOfEveryRecordType) {
  scratch_dir dir;
  const std::string path = dir.file("run.h5");
  const auto first = make_content("alpha", 2500);
  const auto second = make_content("beta", 7);
  {
    hdf5_sink sink(path, open_mode::create);
    sink.begin(make_metadata());
    write_content(sink, make_experiment("alpha"), first);
    write_content(sink, make_experiment("beta", "fp-2"), second);
    sink.finish();
    EXPECT_THROW(sink.flush(), std::logic_error);
  }
  expect_archive_holds(path, "alpha", first);
  expect_archive_holds(path, "beta", second);
  EXPECT_EQ(list_experiments(path), (std::vector<std::string>{"alpha", "beta"}));

  const run_metadata metadata = read_metadata(path);
  auto expected_root = make_metadata().root;
  expected_root["schema_version"] = archive_schema_version;
  EXPECT_EQ(metadata.root, expected_root);
  EXPECT_EQ(metadata.environment, make_metadata().environment);

  const experiment_record beta = read_experiment(path, "beta");
  EXPECT_EQ(beta.name, "beta");
  EXPECT_EQ(beta.definition_json, make_experiment("beta").definition_json);
  EXPECT_EQ(beta.protocol_json, make_experiment("beta").protocol_json);
  EXPECT_EQ(beta.fingerprint, "fp-2");
  EXPECT_THROW(read_samples(path, "gamma"), std::runtime_error);
}

TEST(Archive, EmptyExperimentHasEveryTable) {
  scratch_dir dir;
  const std::string path = dir.file("empty.h5");
  hdf5_sink sink(path);
  sink.begin_experiment(make_experiment("nothing"));
  sink.end_experiment("nothing");
  sink.finish();
  EXPECT_TRUE(read_samples(path, "nothing").empty());
  EXPECT_TRUE(read_gates(path, "nothing").empty());
  EXPECT_TRUE(read_ceilings(path, "nothing").empty());
  EXPECT_TRUE(read_summaries(path, "nothing").empty());
  EXPECT_TRUE(read_attribution(path, "nothing").empty());
  EXPECT_TRUE(read_health(path, "nothing").empty());
  EXPECT_TRUE(read_variants(path, "nothing").empty());
  // Versioned even without begin().
  EXPECT_EQ(read_metadata(path).root.at("schema_version"), archive_schema_version);
}

TEST(Archive, CallOrderMistakesAreRefused) {
  scratch_dir dir;
  hdf5_sink sink(dir.file("order.h5"));
  EXPECT_THROW(sink.write_samples({make_sample("alpha", 0)}), std::logic_error);
  sink.begin_experiment(make_experiment("alpha"));
  EXPECT_THROW(sink.begin_experiment(make_experiment("beta")), std::logic_error);
  EXPECT_THROW(sink.write_samples({make_sample("beta", 0)}), std::invalid_argument);  // wrong group otherwise
  EXPECT_THROW(sink.end_experiment("beta"), std::logic_error);
  EXPECT_THROW(hdf5_sink(dir.file("bad.h5")).begin_experiment(make_experiment("a/b")), std::invalid_argument);
  sink.end_experiment("alpha");
  sink.finish();
}

TEST(Archive, CreateRefusesAnExistingFileOverwriteReplacesIt) {
  scratch_dir dir;
  const std::string path = dir.file("run.h5");
  {
    hdf5_sink sink(path);
    write_content(sink, make_experiment("alpha"), make_content("alpha", 10));
    sink.finish();
  }
  const std::string error = error_of([&] { hdf5_sink sink(path, open_mode::create); });
  EXPECT_NE(error.find("already exists"), std::string::npos) << error;
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_EQ(read_samples(path, "alpha").size(), 10u);  // the refused create left it intact
  {
    hdf5_sink sink(path, open_mode::overwrite);
    write_content(sink, make_experiment("beta"), make_content("beta", 3));
    sink.finish();
  }
  EXPECT_EQ(list_experiments(path), std::vector<std::string>{"beta"});
}

TEST(Archive, ResumeAppendsWithoutDuplicating) {
  scratch_dir dir;
  const std::string path = dir.file("run.h5");
  EXPECT_THROW((hdf5_sink{path, open_mode::resume}), std::runtime_error);  // nothing to resume
  const auto experiment = make_experiment("alpha");
  auto point_samples = [](std::int64_t point) {
    std::vector<sample_record> samples;
    for (std::int64_t i = point * 10; i < point * 10 + 10; ++i) samples.push_back(make_sample("alpha", i));
    return samples;
  };
  // First run: points 0 and 1, then "interrupted".
  {
    hdf5_sink sink(path, open_mode::append);  // append creates a missing archive
    sink.begin(make_metadata());
    sink.begin_experiment(experiment);
    sink.write_samples(point_samples(0));
    sink.write_samples(point_samples(1));
    sink.end_experiment("alpha");
    sink.finish();
  }
  // Second run resumes: it skips the points the archive already has, as the runner does.
  std::set<std::int64_t> done;
  for (const auto& s : read_samples(path, "alpha")) done.insert(s.point);
  EXPECT_EQ(done, (std::set<std::int64_t>{0, 1}));
  {
    hdf5_sink sink(path, open_mode::resume);
    sink.begin(make_metadata());
    sink.begin_experiment(experiment);
    for (std::int64_t point = 0; point < 4; ++point)
      if (!done.count(point)) sink.write_samples(point_samples(point));
    sink.end_experiment("alpha");
    sink.finish();
  }
  std::vector<sample_record> expected;
  for (std::int64_t point = 0; point < 4; ++point)
    for (auto& s : point_samples(point)) expected.push_back(s);
  expect_same_records(expected, read_samples(path, "alpha"));
  EXPECT_EQ(list_experiments(path), std::vector<std::string>{"alpha"});
  EXPECT_EQ(read_experiment(path, "alpha").definition_json, experiment.definition_json);
}

TEST(Archive, FingerprintMismatchIsRefused) {
  scratch_dir dir;
  const std::string path = dir.file("run.h5");
  {
    hdf5_sink sink(path);
    write_content(sink, make_experiment("alpha", "fp-original"), make_content("alpha", 4));
    sink.finish();
  }
  hdf5_sink sink(path, open_mode::resume);
  const std::string error = error_of([&] { sink.begin_experiment(make_experiment("alpha", "fp-changed")); });
  for (const std::string& part : {path, std::string("alpha"), std::string("fp-original"), std::string("fp-changed")})
    EXPECT_NE(error.find(part), std::string::npos) << "'" << part << "' missing from: " << error;
  // Nothing was written, and another experiment can still go into the same archive.
  write_content(sink, make_experiment("beta", "fp-beta"), make_content("beta", 2));
  sink.finish();
  EXPECT_EQ(read_samples(path, "alpha").size(), 4u);
  EXPECT_EQ(read_experiment(path, "alpha").fingerprint, "fp-original");
}

TEST(Archive, UnwritablePathIsRefusedUpFront) {
  scratch_dir dir;
  // Tests run as root, where permission bits do not stop writes: use places no one can create a file in.
  const std::string regular_file = dir.file("plain_file");
  std::ofstream(regular_file) << "not a directory";
  const std::vector<std::string> bad_paths{regular_file + "/run.h5", "/proc/kstudy_archive_test.h5",
                                           dir.file("missing_dir/run.h5"), dir.file("")};
  for (const auto& path : bad_paths) {
    const std::string error = error_of([&] { hdf5_sink::check_writable(path); });
    EXPECT_FALSE(error.empty()) << path;
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_THROW((hdf5_sink{path, open_mode::create}), std::runtime_error) << path;
    EXPECT_THROW(json_sink{path}, std::runtime_error) << path;
  }
  EXPECT_NE(error_of([&] { hdf5_sink::check_writable(regular_file + "/run.h5"); }).find("not a directory"),
            std::string::npos);
  EXPECT_NO_THROW(hdf5_sink::check_writable(dir.file("fine.h5")));
  EXPECT_FALSE(fs::exists(dir.file("fine.h5")));  // the check leaves nothing behind
  EXPECT_THROW(hdf5_sink::check_openable(regular_file, open_mode::append), std::runtime_error);  // not HDF5
}

// A run killed after a flush (no close, no destructors) leaves an archive with every flushed row.
TEST(Archive, FlushedRowsSurviveACrash) {
  scratch_dir dir;
  const std::string path = dir.file("crash.h5");
  const auto content = make_content("alpha", 1500);
  const auto more = make_content("beta", 300);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 9;
    try {
      auto* sink = new hdf5_sink(path, open_mode::create);  // never deleted: the process dies holding it
      sink->begin(make_metadata());
      write_content(*sink, make_experiment("alpha"), content);
      sink->begin_experiment(make_experiment("beta"));
      sink->write_samples(more.samples);
      sink->flush();
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 9) << "the writing child failed before its crash";

  expect_archive_holds(path, "alpha", content);
  expect_same_records(more.samples, read_samples(path, "beta"));
  EXPECT_EQ(read_metadata(path).environment, make_metadata().environment);

  // And the crashed archive can be resumed.
  hdf5_sink sink(path, open_mode::resume);
  sink.begin_experiment(make_experiment("beta"));
  sink.write_summaries(more.summaries);
  sink.end_experiment("beta");
  sink.finish();
  expect_same_records(more.summaries, read_summaries(path, "beta"));
  expect_same_records(more.samples, read_samples(path, "beta"));
}

TEST(Archive, JsonSinkHoldsTheSameRows) {
  scratch_dir dir;
  const std::string h5_path = dir.file("run.h5"), json_path = dir.file("run.json");
  const auto content = make_content("alpha", 1100);
  std::ostringstream console;
  {
    sink_fanout sinks;
    sinks.add(std::make_unique<hdf5_sink>(h5_path));
    sinks.add(std::make_unique<json_sink>(json_path));
    sinks.add(std::make_unique<console_sink>(console));
    sinks.begin(make_metadata());
    write_content(sinks, make_experiment("alpha"), content);
    EXPECT_FALSE(fs::exists(json_path));  // written whole at finish, never partially
    sinks.finish();
  }
  EXPECT_FALSE(fs::exists(json_path + ".tmp"));
  std::ifstream in(json_path);
  const auto doc = nlohmann::json::parse(in);  // throws on invalid JSON
  EXPECT_EQ(doc.at("schema_version"), archive_schema_version);
  EXPECT_EQ(doc.at("environment").at("gpu_name"), "NVIDIA H200");
  const auto& alpha = doc.at("experiments").at("alpha");
  EXPECT_EQ(alpha.at("fingerprint"), "fp-1");
  EXPECT_EQ(alpha.at("protocol").at("trials"), 30);  // embedded as JSON, not as text
  EXPECT_EQ(alpha.at("samples").size(), read_samples(h5_path, "alpha").size());
  EXPECT_EQ(alpha.at("gate").size(), read_gates(h5_path, "alpha").size());
  EXPECT_EQ(alpha.at("ceilings").size(), read_ceilings(h5_path, "alpha").size());
  EXPECT_EQ(alpha.at("summary").size(), read_summaries(h5_path, "alpha").size());
  EXPECT_EQ(alpha.at("attribution").size(), read_attribution(h5_path, "alpha").size());
  EXPECT_EQ(alpha.at("health").size(), read_health(h5_path, "alpha").size());
  EXPECT_EQ(alpha.at("variants").size(), read_variants(h5_path, "alpha").size());
  EXPECT_EQ(alpha.at("variants").at(1).at("family"), content.variants[1].family);
  EXPECT_EQ(alpha.at("variants").at(1).at("on_device"), true);
  EXPECT_EQ(alpha.at("health").at(0).at("before_throttle_reasons"), 0x4);
  EXPECT_EQ(alpha.at("samples").size(), 1100u);
  const auto& row = alpha.at("samples").at(3);
  EXPECT_EQ(row.at("timer"), to_string(content.samples[3].timer));
  EXPECT_EQ(row.at("bytes"), content.samples[3].bytes);
  EXPECT_EQ(row.at("gate"), to_string(content.samples[3].gate));

  // The console got the failed gates prominently and one aligned summary table.
  const std::string text = console.str();
  EXPECT_NE(text.find("!! GATE FAILED: gate_variant_1"), std::string::npos) << text;
  EXPECT_NE(text.find("% of roof"), std::string::npos) << text;
  EXPECT_NE(text.find("µs"), std::string::npos) << text;
}

// A sink that knows no record type: it reads every write over its columns, as a CSV writer would.
class column_sink final : public result_sink {
 public:
  explicit column_sink(bool refuse = false) : m_refuse(refuse) {}
  std::map<std::string, std::vector<std::string>> columns;  // per table, as the last write named them
  std::map<std::string, std::vector<std::vector<std::string>>> rows;
  std::map<std::string, std::map<std::string, std::string>> attributes;

  void begin(const run_metadata&) override {}
  void begin_experiment(const experiment_record&) override {}
  void flush() override {}
  void end_experiment(const std::string&) override {}
  void finish() override {}

 protected:
  void do_write(const record_batch& batch) override {
    if (m_refuse) throw std::runtime_error("column_sink refuses");
    const record_schema& schema = batch.schema();
    auto& names = columns[schema.table];
    names.clear();
    for (const auto& f : schema.fields) names.push_back(f.name);
    for (std::size_t r = 0; r < batch.size(); ++r) {
      std::vector<std::string> cells;
      for (std::size_t f = 0; f < schema.fields.size(); ++f)
        std::visit(
            [&](const auto& value) {
              if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string_view>)
                cells.emplace_back(value);
              else
                cells.push_back(nlohmann::json(value).dump());
            },
            schema.read(batch.record(r), f));
      rows[schema.table].push_back(std::move(cells));
    }
    for (const auto& [key, value] : batch.attributes()) attributes[schema.table][key] = value;
  }

 private:
  bool m_refuse;
};

// Every record type reaches every sink through one write: a sink written over the columns sees the JSON copy's
// columns and values, and the profile's attributes; the fanout gives every sink each call and rethrows the
// first error afterwards.
TEST(Archive, EveryRecordTypeReachesASinkOverItsColumns) {
  scratch_dir dir;
  const std::string json_path = dir.file("run.json");
  const auto content = make_content("alpha", 20);
  sink_fanout sinks;
  auto& refusing = static_cast<column_sink&>(sinks.add(std::make_unique<column_sink>(true)));
  sinks.add(std::make_unique<json_sink>(json_path));
  auto& columns = static_cast<column_sink&>(sinks.add(std::make_unique<column_sink>()));
  sinks.begin(make_metadata());
  sinks.begin_experiment(make_experiment("alpha"));
  // The first sink refuses every write: each reaches the others all the same, and then throws.
  EXPECT_THROW(sinks.write(content.samples), std::runtime_error);
  EXPECT_THROW(sinks.write(content.gates), std::runtime_error);
  EXPECT_THROW(sinks.write(content.ceilings), std::runtime_error);
  EXPECT_THROW(sinks.write(content.summaries), std::runtime_error);
  EXPECT_THROW(sinks.write(content.attribution), std::runtime_error);
  EXPECT_THROW(sinks.write(content.health), std::runtime_error);
  EXPECT_THROW(sinks.write(content.variants), std::runtime_error);
  EXPECT_THROW(sinks.write_profile({profile_record{}}, {{"ncu_version", "fixture"}}), std::runtime_error);
  sinks.end_experiment("alpha");
  sinks.finish();
  EXPECT_TRUE(refusing.rows.empty());
  std::ifstream in(json_path);
  const auto doc = nlohmann::ordered_json::parse(in);
  const auto& alpha = doc.at("experiments").at("alpha");
  ASSERT_EQ(columns.rows.size(), 8u);  // seven tables and the profile
  for (const auto& [table, rows] : columns.rows) {
    ASSERT_EQ(rows.size(), alpha.at(table).size()) << table;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const auto& row = alpha.at(table).at(r);
      std::vector<std::string> keys, cells;
      for (const auto& [key, value] : row.items()) {
        keys.push_back(key);
        cells.push_back(value.is_string() ? value.get<std::string>() : value.dump());
      }
      EXPECT_EQ(columns.columns.at(table), keys) << table;
      EXPECT_EQ(rows[r], cells) << table << " row " << r;
    }
  }
  EXPECT_EQ(columns.attributes.at("profile").at("ncu_version"), "fixture");
  EXPECT_EQ(alpha.at("profile_attributes").at("ncu_version"), "fixture");
}

TEST(Archive, JsonSinkWritesNothingWithoutFinish) {
  scratch_dir dir;
  const std::string path = dir.file("run.json");
  {
    json_sink sink(path);
    write_content(sink, make_experiment("alpha"), make_content("alpha", 3));
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(Archive, ConsoleTableIsAligned) {
  std::ostringstream out;
  console_sink sink(out);
  sink.begin_experiment(make_experiment("alpha"));
  auto summaries = make_many<summary_record>(4, [](auto i) { return make_summary("alpha", i); });
  summaries[1].median = 0.5;   // ms
  summaries[2].median = 3e-8;  // ns
  summaries[3].variant = "a_much_longer_variant_name@cuda";
  sink.write_summaries(summaries);
  sink.end_experiment("alpha");
  // Every line of the table (header, rule, rows) has the same width in terminal columns.
  std::istringstream lines(out.str());
  std::string line;
  std::set<std::size_t> widths;
  std::size_t table_lines = 0;
  bool in_table = false;
  while (std::getline(lines, line)) {
    in_table = in_table || (line.find("variant") != std::string::npos && line.find("median") != std::string::npos);
    if (!in_table) continue;
    if (line.rfind(" 0 samples", 0) == 0) break;  // the experiment's closing count line
    std::size_t width = 0;
    for (unsigned char c : line) width += (c & 0xC0) != 0x80;
    widths.insert(width);
    ++table_lines;
  }
  EXPECT_EQ(table_lines, 2u + summaries.size()) << out.str();
  EXPECT_EQ(widths.size(), 1u) << out.str();
  EXPECT_NE(out.str().find("500 ms"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("30.0 ns"), std::string::npos) << out.str();
}

// Writes the archive that tests/check_archive_pandas.py loads with pandas (ctest fixture); run alone, it
// writes to a scratch directory and checks the same row count.
TEST(Archive, PandasFixture) {
  scratch_dir dir;
  const char* fixture = std::getenv("KSTUDY_ARCHIVE_FIXTURE");
  const std::string path = fixture ? fixture : dir.file("test_archive_fixture.h5");
  const auto content = make_content("pandas_fixture", 1500);
  hdf5_sink sink(path, open_mode::overwrite);
  sink.begin(make_metadata());
  write_content(sink, make_experiment("pandas_fixture"), content);
  sink.finish();
  EXPECT_EQ(read_samples(path, "pandas_fixture").size(), 1500u);
}

}  // namespace

namespace {
// Archives of schema version 1 (the first H200 dataset's cold_compile archive) remain readable;
// occupancy reads as 0.
TEST(Archive, ReadsVersionOneArchives) {
  const std::string path = source_file("tests/fixtures/h200_v1_cold.h5").string();
  const auto samples = kstudy::read_samples(path, "cold_compile");
  ASSERT_FALSE(samples.empty());
  for (const auto& s : samples) EXPECT_EQ(s.occupancy, 0.0);
  EXPECT_EQ(kstudy::read_metadata(path).root.at("schema_version"), "1");
  EXPECT_TRUE(kstudy::read_health(path, "cold_compile").empty());  // no health table before version 3
}

// A global heap object whose stored length runs past its collection, a collection under HDF5's least size, a
// string attribute referring to an object the collection does not hold or one longer than the string: HDF5 1.10
// follows each unchecked, past its buffers, and whether that crashes depends on the reading process's heap (the
// archive fuzzer crashed a reader so after a verifying child had read the file unharmed). Each is refused from
// the file's bytes, by every reader and by salvage, naming the collection or the string.
TEST(Archive, DamagedGlobalHeapIsRefusedBeforeHdf5ReadsIt) {
  scratch_dir dir;
  std::ifstream in(source_file("tests/fixtures/cpu_v3_small.h5"), std::ios::binary);
  const std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t at = original.find("GCOL");
  ASSERT_NE(at, std::string::npos);
  // The fixture with little-endian values written over it: (offset, value, width in bytes) each.
  using edit = std::tuple<std::size_t, std::uint64_t, int>;
  const auto patched = [&](std::initializer_list<edit> edits, const std::string& name) {
    std::string bytes = original;
    for (const auto& [offset, value, width] : edits)
      for (int i = 0; i < width; ++i) bytes[offset + i] = static_cast<char>((value >> (8 * i)) & 0xFF);
    const std::string path = (dir.path() / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  };
  const auto stored = [&](std::size_t offset, int width) {
    std::uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(original[offset + i]);
    return value;
  };
  const std::uint64_t length = stored(at + 24, 8);  // the first object's, after the 16-byte collection header
  const std::string past_end = patched({edit{at + 24, length + 8192, 8}}, "object_length.h5");
  const std::string too_small = patched({edit{at + 8, 64, 8}}, "collection_size.h5");
  // The attribute `flavour`'s stored string at byte 6208: its length (4 bytes), the collection's address
  // (8), the object's index (4). The archive fuzzer's crash pointed the index past the collection's objects.
  const std::size_t string_at = 6208;
  ASSERT_EQ(stored(string_at + 4, 8), at);
  const std::string no_object = patched({edit{string_at + 12, 52483, 4}}, "string_index.h5");
  const std::string overflow = patched({edit{string_at, 1, 4}}, "string_length.h5");
  const std::string collection = "global heap collection at byte " + std::to_string(at);
  const std::string string_where = "string at byte " + std::to_string(string_at);
  for (const auto& [path, where, says] :
       {std::tuple{past_end, collection, std::string("past the collection's end")},
        std::tuple{too_small, collection, std::string("under HDF5's least 4096")},
        std::tuple{no_object, string_where,
                   std::string("refers to object 52483 of the " + collection + ", which holds no such object")},
        std::tuple{overflow, string_where, std::string("bytes overflow its 1")}}) {
    try {
      kstudy::read_metadata(path);
      ADD_FAILURE() << path << " was read";
    } catch (const kstudy::archive_damaged& e) {
      EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_THROW(kstudy::salvage_archive(path, (dir.path() / "salvaged.h5").string(), true), std::runtime_error);
    EXPECT_FALSE(fs::exists(dir.path() / "salvaged.h5"));
  }
  // A file cut inside a collection (a run killed while writing) is a cut file, not a damaged heap: what lies past
  // its end is unknown, and salvage pads it with zeros.
  const std::string cut = (dir.path() / "cut.h5").string();
  std::ofstream(cut, std::ios::binary) << original.substr(0, at + 100);
  try {
    kstudy::read_metadata(cut);
    ADD_FAILURE() << "a cut file was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).find("global heap"), std::string::npos) << e.what();
  }
  // The undamaged file still reads.
  EXPECT_NO_THROW(kstudy::read_metadata(patched({edit{at + 24, length, 8}}, "intact.h5")));
}

// Older archives (the committed CPU fixtures, schema 1 and 3) read with no variants rows (and no health rows
// before 3); appending to them (and so resuming them) is refused rather than mixing two layouts in one file.
TEST(Archive, ReadsOlderArchivesButDoesNotAppendToThem) {
  for (const char* fixture : {"cpu_small.h5", "cpu_v3_small.h5"}) {
    const std::string path = source_file(std::string("tests/fixtures/") + fixture).string();
    const auto version = kstudy::read_metadata(path).root.at("schema_version");
    ASSERT_NE(version, kstudy::archive_schema_version) << fixture;
    for (const auto& name : kstudy::list_experiments(path)) {
      EXPECT_FALSE(kstudy::read_samples(path, name).empty()) << fixture << " " << name;
      EXPECT_EQ(kstudy::read_health(path, name).empty(), version != "3") << fixture << " " << name;
      EXPECT_TRUE(kstudy::read_variants(path, name).empty()) << fixture << " " << name;
    }
    const auto copy = fs::temp_directory_path() / ("kstudy_old_copy_" + std::to_string(::getpid()) + ".h5");
    fs::copy_file(path, copy, fs::copy_options::overwrite_existing);
    EXPECT_THROW(kstudy::hdf5_sink(copy.string(), kstudy::open_mode::append), std::runtime_error) << fixture;
    fs::remove(copy);
  }
}

// Columns a version-3 archive did not have read as each record's own default, as docs/archive_schema.md says they
// read ("not measured", depth 1, warm caches), never as the zeros HDF5 leaves in a member the file lacks.
TEST(Archive, ColumnsAnOlderSchemaLackedReadAsTheirDefaults) {
  const std::string path = source_file("tests/fixtures/cpu_v3_small.h5").string();
  ASSERT_EQ(kstudy::read_metadata(path).root.at("schema_version"), "3");
  std::size_t health_rows = 0, summary_rows = 0;
  for (const auto& name : kstudy::list_experiments(path)) {
    for (auto h : kstudy::read_health(path, name)) {
      EXPECT_EQ(h.depth, 1);
      EXPECT_TRUE(std::isnan(h.energy_joules));
      EXPECT_EQ(h.sampled_min_sm_clock_mhz, -1);
      for (const auto& phase : kstudy::point_phases()) EXPECT_TRUE(std::isnan(phase_seconds(h, phase.phase)));
      ++health_rows;
    }
    for (const auto& s : kstudy::read_samples(path, name)) {
      EXPECT_EQ(s.depth, 1);
      EXPECT_EQ(s.cache, kstudy::cache_mode::warm);
      EXPECT_EQ(s.min_sm_clock_mhz, -1);
      EXPECT_EQ(s.device_uuid, "");
    }
    for (const auto& r : kstudy::read_summaries(path, name)) {
      EXPECT_EQ(r.depth, 1);
      EXPECT_TRUE(std::isnan(r.interval_low) && std::isnan(r.interval_high));
      EXPECT_EQ(r.stopped, "");
      ++summary_rows;
    }
  }
  EXPECT_GT(health_rows, 0u);
  EXPECT_GT(summary_rows, 0u);
}

// Before version 10 the gate table named its counts score_failures, flag_mismatches and ambiguous_rows; they read
// into the fields of today's names (the fixture's gates have 20 and 72 ambiguous rows, no failures).
TEST(Archive, ReadsTheGateCountsUnderTheirFormerNames) {
  const std::string path = source_file("tests/fixtures/cpu_small.h5").string();
  std::int64_t ambiguous = 0, failures = 0;
  for (const auto& name : kstudy::list_experiments(path))
    for (const auto& g : kstudy::read_gates(path, name)) {
      ambiguous += g.ambiguous;
      failures += g.value_failures + g.discrete_mismatches;
    }
  EXPECT_EQ(ambiguous, 92);
  EXPECT_EQ(failures, 0);
}

// Version 5 had no variants.rung: a committed H200 archive of that version reads every variant as rung 0.
TEST(Archive, ReadsVersionFiveVariantsAsRungZero) {
  const std::string path = source_file("data/h200-2026-11-30-s5/stream.h5").string();
  if (!fs::exists(path)) GTEST_SKIP() << "that dataset is no longer in the tree";
  ASSERT_EQ(kstudy::read_metadata(path).root.at("schema_version"), "5");
  std::size_t rows = 0;
  for (const auto& name : kstudy::list_experiments(path)) {
    for (const auto& v : kstudy::read_variants(path, name)) {
      EXPECT_EQ(v.rung, 0) << v.variant;
      EXPECT_GT(v.kernels_launched, 0) << v.variant;  // the fields around it still read
      ++rows;
    }
  }
  EXPECT_GT(rows, 0u);
}

// Version 3 stored gate_passed (calibration samples as 1); it reads as the verdict passed / failed.
TEST(Archive, ReadsVersionThreeGatePassedAsAVerdict) {
  const std::string path = source_file("tests/fixtures/cpu_v3_small.h5").string();
  ASSERT_EQ(kstudy::read_metadata(path).root.at("schema_version"), "3");
  std::size_t failed = 0;
  for (const auto& s : kstudy::read_samples(path, "feature_small")) {
    const bool ok = s.status == "ok";
    EXPECT_EQ(s.gate, ok ? kstudy::gate_verdict::passed : kstudy::gate_verdict::failed) << s.variant << " " << s.status;
    failed += !ok;
  }
  EXPECT_EQ(failed, 1u);  // the fixture's injected throw (tests/fixtures/README.md)
  const auto launch = kstudy::read_samples(path, "launch_overhead");
  ASSERT_FALSE(launch.empty());
  for (const auto& s : launch) EXPECT_EQ(s.gate, kstudy::gate_verdict::passed) << s.variant;
  // The summary this kstudy computes from those samples is the one version 3 stored.
  for (const auto& name : kstudy::list_experiments(path)) {
    const auto stored = kstudy::read_summaries(path, name);
    const auto recomputed = kstudy::summarise(kstudy::read_samples(path, name), kstudy::read_ceilings(path, name));
    ASSERT_EQ(recomputed.size(), stored.size()) << name;
    for (std::size_t i = 0; i < stored.size(); ++i) EXPECT_EQ(members(recomputed[i]), members(stored[i])) << name;
  }
}

// The summary takes ok samples of measured trials whose gate passed or that had nothing to gate (calibration
// probes), and nothing the gate rejected.
TEST(Archive, SummaryTakesPassedAndNotGatedSamplesOnly) {
  std::vector<kstudy::sample_record> samples;
  const auto add = [&](const std::string& variant, kstudy::gate_verdict gate, const std::string& status, int trial) {
    kstudy::sample_record s;
    s.experiment = "rule";
    s.variant = variant;
    s.gate = gate;
    s.status = status;
    s.trial = trial;
    s.seconds = 1e-3 * (trial + 1);
    samples.push_back(s);
  };
  for (int trial = 0; trial < 3; ++trial) {
    add("scored", kstudy::gate_verdict::passed, "ok", trial);
    add("probe", kstudy::gate_verdict::not_gated, "ok", trial);
    add("wrong", kstudy::gate_verdict::failed, "rejected", trial);
  }
  add("scored", kstudy::gate_verdict::passed, "ok", -1);            // a warm-up
  add("scored", kstudy::gate_verdict::passed, "failed: threw", 3);  // after its gate passed
  add("probe", kstudy::gate_verdict::not_gated, "failed: no device", -1);
  const auto summary = kstudy::summarise(samples, {});
  ASSERT_EQ(summary.size(), 2u);
  std::map<std::string, std::int64_t> counts;
  for (const auto& s : summary) counts[s.variant] = s.samples;
  EXPECT_EQ(counts, (std::map<std::string, std::int64_t>{{"probe", 3}, {"scored", 3}}));
}

// A number is divided only by a roof timed on its own clock: device_events by the roof timed with CUDA events,
// resident_wall by the one timed on the host clock, and no fraction at all where the run has no roof of that
// clock (an archive before schema 8 recorded host-clock roofs only).
TEST(Archive, SummaryDividesOnlyByARoofOfItsOwnClock) {
  std::vector<sample_record> samples;
  for (const auto timer : {kstudy::timer_kind::device_events, kstudy::timer_kind::resident_wall})
    for (int trial = 0; trial < 3; ++trial) {
      sample_record s;
      s.experiment = "e";
      s.variant = "v@cuda";
      s.rows = 1000;
      s.features = 1;
      s.bytes = 4'000'000'000;
      s.timer = timer;
      s.trial = trial;
      s.seconds = 1e-3;  // 4e12 B/s
      s.gate = kstudy::gate_verdict::passed;
      s.status = "ok";
      samples.push_back(s);
    }
  const auto roof = [](kstudy::timer_kind clock, double bytes_per_second) {
    ceiling_record c;
    c.name = "device_read";
    c.bytes = 1 << 30;
    c.bytes_per_second = bytes_per_second;
    c.seconds = c.bytes / bytes_per_second;
    c.clock = clock;
    return c;
  };
  const auto fraction = [&](const std::vector<ceiling_record>& ceilings, kstudy::timer_kind timer) {
    for (const auto& s : kstudy::summarise(samples, ceilings))
      if (s.timer == timer) return s.fraction_of_roof;
    return -1.0;
  };
  const std::vector<ceiling_record> both{roof(kstudy::timer_kind::device_events, 5e12),
                                         roof(kstudy::timer_kind::host_wall, 8e12)};
  EXPECT_DOUBLE_EQ(fraction(both, kstudy::timer_kind::device_events), 0.8);
  EXPECT_DOUBLE_EQ(fraction(both, kstudy::timer_kind::resident_wall), 0.5);
  const std::vector<ceiling_record> host_only{roof(kstudy::timer_kind::host_wall, 8e12)};
  EXPECT_EQ(fraction(host_only, kstudy::timer_kind::device_events), 0.0);
  EXPECT_DOUBLE_EQ(fraction(host_only, kstudy::timer_kind::resident_wall), 0.5);
  EXPECT_EQ(kstudy::clock_of(kstudy::timer_kind::device_events), kstudy::timer_kind::device_events);
  EXPECT_EQ(kstudy::clock_of(kstudy::timer_kind::one_shot), kstudy::timer_kind::host_wall);
}
}  // namespace

// A gated number faster than the roof of its own run and clock says so instead of printing 102%.
TEST(Archive, ConsoleSaysRoofExceededInsteadOfAShareAboveOne) {
  std::ostringstream out;
  console_sink console(out);
  summary_record s;
  s.experiment = "e";
  s.variant = "dot_cub@cuda";
  s.layout = "row_major";
  s.rows = 1 << 28;
  s.features = 1;
  s.timer = kstudy::timer_kind::device_events;
  s.samples = 7;
  s.median = 1e-3;
  s.bytes_per_second = 4.4e12;
  s.fraction_of_roof = 1.02;
  console.write_summaries({s});
  s.variant = "dot_kokkos@cuda";
  s.fraction_of_roof = 0.95;
  console.write_summaries({s});
  console.finish();
  EXPECT_NE(out.str().find("roof exceeded"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("102.0%"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("95.0%"), std::string::npos) << out.str();
}

// Host-in/host-out timers run once per host memory kind: the console says which row is which.
TEST(Archive, ConsoleTableNamesTheHostMemoryKind) {
  std::ostringstream out;
  console_sink console(out);
  std::vector<summary_record> summaries(3);
  for (auto& s : summaries) {
    s.experiment = "quick";
    s.variant = "fused_cuda_feature_major@cuda";
    s.layout = "feature_major";
    s.rows = 1048576;
    s.features = 16;
    s.timer = timer_kind::one_shot;
    s.median = 1e-3;
    s.samples = 5;
  }
  summaries[0].memory_kind = "pageable";
  summaries[1].memory_kind = "pinned";
  summaries[2].timer = timer_kind::device_events;
  summaries[2].memory_kind = "device";
  console.write_summaries(summaries);
  console.finish();
  const std::string text = out.str();
  EXPECT_NE(text.find("host memory"), std::string::npos) << text;
  EXPECT_NE(text.find("pageable"), std::string::npos) << text;
  EXPECT_NE(text.find("pinned"), std::string::npos) << text;

  // Without host-in/host-out rows the column is left out.
  std::ostringstream resident_out;
  console_sink resident(resident_out);
  resident.write_summaries({summaries[2]});
  resident.finish();
  EXPECT_EQ(resident_out.str().find("host memory"), std::string::npos) << resident_out.str();
}
