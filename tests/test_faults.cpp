// Faults inside a study, end to end through the real runner: `kstudy run` in a child process with a fault
// injected into one variant (KSTUDY_INJECT_FAULT, read by the runner), and points too big for memory.
//   throw  (every flavour): that sample fails with the error text, the study goes on, the archive is whole
//   launch (cuda): a CUDA error that leaves the context usable: the same, in the same process
//   trap   (cuda): a sticky error: the run stops with exit 69, the finished points are kept, and
//          --resume completes the archive
//   corrupt_late (every flavour): right at the gate, wrong afterwards: the runner's re-check of the last
//          timed run rejects the variant's samples
// The cuda flavour's tests need a GPU and report themselves skipped without one.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_CUDA: without it the GPU-only tests skip on a GPU too

#include "scratch_dir.hpp"
#include "source_files.hpp"
#include "kokkos_test_support.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/fault_injection.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/host_io.hpp"
#include "kstudy/point_inputs.hpp"
#include "scoring/gate.hpp"
#include "kstudy/variant.hpp"
#include "scoring/data_generator.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kstudy;

constexpr int exit_device_lost = 69;

// kstudy needs a device in the cuda flavour (Kokkos 3.4 aborts at initialisation without one): where the
// test process could not initialise Kokkos, neither can the kstudy it would start.
#define KSTUDY_REQUIRE_RUNNABLE_KSTUDY() KSTUDY_REQUIRE_KOKKOS()
#ifdef KOKKOS_ENABLE_CUDA
#define KSTUDY_REQUIRE_CUDA_FLAVOUR() KSTUDY_REQUIRE_KOKKOS()
#else
#define KSTUDY_REQUIRE_CUDA_FLAVOUR() GTEST_SKIP() << "CUDA faults need the cuda flavour"
#endif

// Each test gets its own folder (tests/scratch_dir.hpp).
class work_dir : public kstudy::test::scratch_dir {
 public:
  work_dir() : kstudy::test::scratch_dir("faults") {}
};

struct run_result {
  int rc = -1;
  std::string out, err;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `kstudy ARGS` with extra environment assignments, in dir; ceilings kept small.
run_result run_kstudy(const work_dir& dir, const std::string& environment, const std::string& args) {
  const std::string command = "cd '" + dir.path().string() + "' && env KSTUDY_CEILING_BYTES=33554432 " + environment +
                              " '" + kstudy_exe() + "' " + args + " > stdout.txt 2> stderr.txt";
  const int status = std::system(command.c_str());
  run_result r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = read_text(dir / "stdout.txt");
  r.err = read_text(dir / "stderr.txt");
  return r;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "\"" : ", \"") + n + "\"";
  return out;
}

// A small scoring experiment over four points.
void write_experiment(const fs::path& path, const std::vector<std::string>& variants, const std::string& rows) {
  std::ofstream(path) << R"({"name": "faults", "operation": "scoring", "rows": )" << rows << R"(, "features": [16],
 "variants": [)" << quoted_list(variants)
                      << R"(],
 "timers": ["host_wall", "resident_wall", "device_events", "one_shot"],
 "protocol": {"warmups": 1, "trials": 3, "replications": 2, "seed": 11, "threads": 2, "shuffle": true}})";
}

const char* const k_rows = "[1000, 3001, 9000, 20000]";

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// Variants of this flavour: one to fault, and others that must carry on.
#ifdef KOKKOS_ENABLE_CUDA
const std::vector<std::string> k_variants{"cpu_reference", "fused_kokkos_feature_major@cuda",
                                          "fused_cuda_feature_major@cuda", "composed_feature_major@cuda"};
#elif defined(KOKKOS_ENABLE_OPENMP)
const std::vector<std::string> k_variants{"cpu_reference", "fused_kokkos_feature_major@openmp",
                                          "fused_kokkos_row_major@openmp", "composed_feature_major@openmp"};
#else
const std::vector<std::string> k_variants{"cpu_reference", "fused_kokkos_feature_major@serial",
                                          "fused_kokkos_row_major@serial", "composed_feature_major@serial"};
#endif

// A surviving fault: the faulted variant has exactly one `failed` sample per point and replication (its
// first timed trial), carrying the error text; every other variant has all its samples at every point;
// the gate passed for every variant; the summary exists and leaves the faulted variant out.
void expect_failed_sample_and_study_went_on(const std::string& archive, const std::string& faulted,
                                            const std::string& error_text) {
  const auto samples = read_samples(archive, "faults");  // the archive opens
  std::map<std::tuple<std::string, std::int64_t, int>, std::vector<const sample_record*>> by_point;
  for (const auto& s : samples) by_point[{s.variant, s.point, s.replication}].push_back(&s);
  std::set<std::string> variants;
  for (const auto& [key, rows] : by_point) variants.insert(std::get<0>(key));
  ASSERT_GE(variants.size(), 4u);
  for (const auto& variant : variants)
    for (std::int64_t point = 0; point < 4; ++point)
      for (int replication = 0; replication < 2; ++replication) {
        const auto& rows = by_point[{variant, point, replication}];
        const std::string where = variant + " point " + std::to_string(point) + " rep " + std::to_string(replication);
        if (variant == faulted) {
          ASSERT_EQ(rows.size(), 1u) << where;
          EXPECT_TRUE(starts_with(rows[0]->status, "failed: ")) << where << ": " << rows[0]->status;
          EXPECT_NE(rows[0]->status.find(error_text), std::string::npos) << where << ": " << rows[0]->status;
          EXPECT_EQ(rows[0]->trial, 0) << where;
          EXPECT_EQ(rows[0]->gate, gate_verdict::passed) << where;  // its gate ran before the fault
        } else {
          ASSERT_FALSE(rows.empty()) << where << " is missing: the study did not go on";
          for (const auto* s : rows) EXPECT_EQ(s->status, "ok") << where;
          std::set<int> trials;
          for (const auto* s : rows) trials.insert(s->trial);
          EXPECT_EQ(trials, (std::set<int>{0, 1, 2})) << where;
        }
      }
  for (const auto& g : read_gates(archive, "faults")) EXPECT_TRUE(g.passed) << g.variant << ": " << g.message;
  const auto summary = read_summaries(archive, "faults");
  EXPECT_FALSE(summary.empty());
  for (const auto& s : summary) EXPECT_NE(s.variant, faulted);
  EXPECT_EQ(read_health(archive, "faults").size(), 8u);  // one row per point and replication
}

TEST(Faults, HostExceptionFailsThatSampleAndTheStudyGoesOn) {
  KSTUDY_REQUIRE_RUNNABLE_KSTUDY();
  work_dir dir;
  write_experiment(dir / "faults.json", k_variants, k_rows);
  const std::string faulted = k_variants[1];
  const auto r = run_kstudy(dir, "KSTUDY_INJECT_FAULT=" + faulted + ":throw", "run faults.json --out faults.h5");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("FAILED (" + faulted + ": failed: injected fault (throw)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("the study goes on without it"), std::string::npos) << r.err;
  expect_failed_sample_and_study_went_on((dir / "faults.h5").string(), faulted, "injected fault (throw) in " + faulted);
}

TEST(Faults, MalformedInjectionIsRefusedBeforeMeasuring) {
  KSTUDY_REQUIRE_RUNNABLE_KSTUDY();
  work_dir dir;
  write_experiment(dir / "faults.json", k_variants, k_rows);
  for (const std::string value : {"nonsense", "no_such_variant:throw", "cpu_reference:explode", "cpu_reference:throw:x",
                                  "cpu_reference:trap", "cpu_reference:slow=0.5"}) {
    const auto r = run_kstudy(dir, "KSTUDY_INJECT_FAULT=" + value, "run faults.json --out refused.h5");
    EXPECT_NE(r.rc, 0) << value;
    EXPECT_NE(r.err.find("KSTUDY_INJECT_FAULT='" + value + "'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "refused.h5")) << value;
  }
}

TEST(Faults, InvalidLaunchFailsThatSampleAndTheContextSurvives) {
  KSTUDY_REQUIRE_CUDA_FLAVOUR();
  work_dir dir;
  write_experiment(dir / "faults.json", k_variants, k_rows);
  const std::string faulted = "fused_cuda_feature_major@cuda";
  const auto r = run_kstudy(dir, "KSTUDY_INJECT_FAULT=" + faulted + ":launch", "run faults.json --out faults.h5");
  ASSERT_EQ(r.rc, 0) << r.err;
  // The other device variants kept measuring in the same process after the error: the context survived.
  // CUDA 12 names a 4,096-thread block cudaErrorInvalidConfiguration, CUDA 13 cudaErrorInvalidValue.
  expect_failed_sample_and_study_went_on((dir / "faults.h5").string(), faulted, "kernel launch failed: cudaError");
}

TEST(Faults, DeviceTrapStopsCleanlyAndResumeCompletes) {
  KSTUDY_REQUIRE_CUDA_FLAVOUR();
  work_dir dir;
  write_experiment(dir / "faults.json", k_variants, k_rows);
  const std::string faulted = "fused_kokkos_feature_major@cuda";
  const std::string archive = (dir / "faults.h5").string();
  const auto r = run_kstudy(dir, "KSTUDY_INJECT_FAULT=" + faulted + ":trap:2", "run faults.json --out faults.h5");
  ASSERT_EQ(r.rc, exit_device_lost) << r.err;
  EXPECT_NE(r.err.find("the CUDA context was lost"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--resume"), std::string::npos) << r.err;

  // Points 0 and 1 of replication 0 are whole; point 2 holds only the `aborted` row; nothing after it.
  const auto samples = read_samples(archive, "faults");
  std::map<std::int64_t, std::set<std::string>> ok_variants;
  std::vector<const sample_record*> aborted;
  for (const auto& s : samples) {
    EXPECT_EQ(s.replication, 0) << "the run went on after the context was lost";
    if (starts_with(s.status, "aborted: "))
      aborted.push_back(&s);
    else if (s.status == "ok")
      ok_variants[s.point].insert(s.variant);
    else
      ADD_FAILURE() << s.variant << " point " << s.point << ": " << s.status;
  }
  ASSERT_EQ(aborted.size(), 1u);
  EXPECT_EQ(aborted[0]->variant, faulted);
  EXPECT_EQ(aborted[0]->point, 2);
  EXPECT_EQ(aborted[0]->trial, -1);
  EXPECT_TRUE(starts_with(aborted[0]->status, "aborted: CUDA context lost (cuda")) << aborted[0]->status;
  EXPECT_NE(aborted[0]->status.find("injected fault (trap)"), std::string::npos) << aborted[0]->status;
  EXPECT_EQ(ok_variants[0].size(), ok_variants[1].size());
  EXPECT_GE(ok_variants[0].size(), 4u);
  EXPECT_EQ(ok_variants.count(2), 0u);
  EXPECT_EQ(ok_variants.count(3), 0u);
  EXPECT_TRUE(read_summaries(archive, "faults").empty());  // written only by a complete run
  EXPECT_EQ(read_health(archive, "faults").size(), 3u);    // points 0, 1 and the aborted 2

  // --resume (no fault now) runs point 2 again and completes the archive: every key once.
  const auto resumed = run_kstudy(dir, "", "run faults.json --resume --out faults.h5 -q");
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  std::set<std::tuple<std::string, std::string, std::int64_t, int, int, std::string>> keys;
  std::size_t ok = 0;
  for (const auto& s : read_samples(archive, "faults")) {
    if (starts_with(s.status, "aborted: ")) continue;
    EXPECT_EQ(s.status, "ok") << s.variant << " point " << s.point;
    ++ok;
    EXPECT_TRUE(keys.insert({s.variant, s.memory_kind, s.point, s.replication, s.trial, to_string(s.timer)}).second)
        << "duplicate sample: " << s.variant << " point " << s.point << " rep " << s.replication;
  }
  std::set<std::pair<std::int64_t, int>> points;
  for (const auto& k : keys) points.insert({std::get<2>(k), std::get<3>(k)});
  EXPECT_EQ(points.size(), 8u);  // 4 points x 2 replications
  EXPECT_EQ(ok, keys.size());
  EXPECT_FALSE(read_summaries(archive, "faults").empty());
}

// `corrupt` leaves the variant's runs alone and makes its output slightly wrong: one score just over its
// tolerance, nothing else, so the real gate fails it for exactly that (end to end: tests/check_cli.sh).
TEST(Faults, CorruptOutputIsOneScoreJustOverItsTolerance) {
  KSTUDY_REQUIRE_KOKKOS();
  const auto plan = parse_fault_plan(k_variants[1] + ":corrupt:2");
  EXPECT_EQ(plan.kind, fault_kind::corrupt_output);
  EXPECT_EQ(plan.point, 2);
  const auto* entry = variant_registry::instance().find(k_variants[1]);
  ASSERT_NE(entry, nullptr);
  const auto& op = operation_of(*entry);
  fault_injecting_variant variant(entry->make(), plan.kind, entry->info.id(), op);
  point_inputs inputs(op, {3001, 16}, 0, kstudy::protocol{}.seed);
  const auto& data = inputs.data(entry->info.layout);
  variant.prepare(data, {});
  variant.arm();  // as the runner does after the warm-ups: nothing changes for this kind
  for (int run = 0; run < 2; ++run) {
    variant.poison();
    variant.run();
    host_outputs out(op, data.shape());
    op.poison(out.spans());
    variant.download(out.spans());
    const auto g = op.check(data, inputs.reference(), out.spans());
    EXPECT_FALSE(g.passed) << "run " << run;
    EXPECT_EQ(g.value_failures, 1) << g.message;
    EXPECT_EQ(g.discrete_mismatches, 0) << g.message;
    EXPECT_LT(g.max_relative_error, 1e-3) << g.message;  // over its own tolerance, by at most about three
  }
}

// `corrupt_late` leaves the gated run right and corrupts every download after the first timed run: the
// gate passes, so only the runner's re-check of the last timed run's output can catch it. Every sample of
// the faulted variant is then rejected at every point, and the other variants' samples stay ok.
TEST(Faults, WrongOutputAfterTheGateRejectsThePointsSamples) {
  KSTUDY_REQUIRE_RUNNABLE_KSTUDY();
  work_dir dir;
  write_experiment(dir / "faults.json", k_variants, k_rows);
  const std::string faulted = k_variants[1];
  const auto r = run_kstudy(dir, "KSTUDY_INJECT_FAULT=" + faulted + ":corrupt_late", "run faults.json --out faults.h5");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("on the output of its last timed run"), std::string::npos) << r.err;
  const std::string archive = (dir / "faults.h5").string();
  std::size_t rejected = 0, ok = 0;
  for (const auto& s : read_samples(archive, "faults")) {
    const std::string where = s.variant + " point " + std::to_string(s.point) + " trial " + std::to_string(s.trial);
    if (s.variant == faulted) {
      EXPECT_EQ(s.status, "rejected") << where;
      EXPECT_EQ(s.gate, gate_verdict::failed) << where;
      ++rejected;
    } else {
      EXPECT_EQ(s.status, "ok") << where;
      ++ok;
    }
  }
  EXPECT_GE(rejected, 4u * 2 * 3);  // 4 points x 2 replications x 3 trials, at least one timer each
  EXPECT_GT(ok, 0u);
  // The gated run itself passed: the gates table says so; the rejection came from the re-check.
  for (const auto& g : read_gates(archive, "faults")) EXPECT_TRUE(g.passed) << g.variant << ": " << g.message;
  for (const auto& s : read_summaries(archive, "faults")) EXPECT_NE(s.variant, faulted);
}

// A variant this machine cannot run at all (variant_unavailable from prepare, here injected) gets one "skipped"
// sample per point and replication naming why, never a failure; the others are measured and the run succeeds.
TEST(Faults, UnavailableVariantIsSkippedNotFailed) {
  KSTUDY_REQUIRE_RUNNABLE_KSTUDY();
  work_dir dir;
  write_experiment(dir / "faults.json", k_variants, k_rows);
  const std::string skipped = k_variants[2];
  const auto r = run_kstudy(dir, "KSTUDY_INJECT_FAULT=" + skipped + ":unavailable",
                            "run faults.json --out unavailable.h5 --replications 1");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find(skipped + " skipped at point 0: injected fault (unavailable)"), std::string::npos) << r.err;
  std::map<std::int64_t, int> skips;
  for (const auto& s : read_samples((dir / "unavailable.h5").string(), "faults")) {
    if (s.variant != skipped) {
      EXPECT_EQ(s.status, "ok") << s.variant << " point " << s.point;
      continue;
    }
    EXPECT_TRUE(starts_with(s.status, "skipped: injected fault (unavailable)")) << s.status;
    EXPECT_EQ(s.gate, gate_verdict::not_gated);
    ++skips[s.point];
  }
  EXPECT_EQ(skips, (std::map<std::int64_t, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
}

// A point too big for memory is skipped before anything is allocated, with the reason, and the study
// goes on: device variants against device memory, host variants against host memory.
TEST(Faults, PointTooBigForMemoryIsSkippedWithTheReason) {
  KSTUDY_REQUIRE_RUNNABLE_KSTUDY();
  work_dir dir;
  write_experiment(dir / "faults.json", k_variants, "[1000, 68719476736]");  // 2^36 rows x 16: 4 TiB of input
  const auto r = run_kstudy(dir, "", "run faults.json --out huge.h5 --replications 1");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto samples = read_samples((dir / "huge.h5").string(), "faults");
  std::set<std::string> skipped, measured;
  for (const auto& s : samples) {
    if (s.point == 0) {
      EXPECT_EQ(s.status, "ok") << s.variant;
      measured.insert(s.variant);
      continue;
    }
    ASSERT_TRUE(starts_with(s.status, "skipped: needs ")) << s.variant << ": " << s.status;
    EXPECT_EQ(s.trial, -1);
    EXPECT_EQ(s.gate, gate_verdict::not_gated);  // nothing was run to gate
    const bool device = s.variant.find("@cuda") != std::string::npos;
    EXPECT_NE(s.status.find(device ? " device bytes, " : " host bytes, "), std::string::npos)
        << s.variant << ": " << s.status;
    EXPECT_TRUE(skipped.insert(s.variant).second) << s.variant << " skipped twice";
  }
  EXPECT_EQ(skipped, measured);  // every variant: measured at the small point, one skip row at the huge one
  EXPECT_GE(skipped.size(), 4u);
  EXPECT_NE(r.out.find("skipped"), std::string::npos) << r.out;
}

}  // namespace
