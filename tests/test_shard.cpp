// Shards and their merge: every (point, replication) unit belongs to exactly one shard; kstudy merge takes
// the union of the shards' rows once, recomputes the summaries the runner's way, records the shards, and
// refuses mixed sets (definitions, build, overlapping units) and, without --partial, incomplete ones —
// never leaving a partial output. None of this needs Kokkos.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "scratch_dir.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/runner/merge.hpp"
#include "kstudy/study.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kstudy;

TEST(Shard, ParsesKOverN) {
  const auto s = parse_shard("2/8");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 8);
  EXPECT_EQ(s.text(), "2/8");
  EXPECT_EQ(parse_shard("0/1").count, 1);
  for (const char* bad :
       {"", "3", "3/3", "4/3", "-1/3", "1/0", "a/b", "1/", "/2", "1/2/3", "1.5/3", " 1/3", "1/9999999"})
    EXPECT_THROW(parse_shard(bad), std::invalid_argument) << bad;
}

// Every unit in exactly one shard, shards within one unit of each other in size, whatever the shape.
TEST(Shard, UnitsPartitionAcrossShards) {
  for (int points = 1; points <= 9; ++points)
    for (int replications = 1; replications <= 4; ++replications)
      for (int count = 1; count <= points * replications; ++count) {
        std::vector<int> sizes(static_cast<std::size_t>(count), 0);
        for (int p = 0; p < points; ++p)
          for (int r = 0; r < replications; ++r) {
            int owners = 0;
            for (int k = 0; k < count; ++k)
              if (in_shard({k, count}, p, r, replications)) {
                ++owners;
                ++sizes[static_cast<std::size_t>(k)];
              }
            ASSERT_EQ(owners, 1) << "point " << p << " replication " << r << " of " << count << " shards";
          }
        const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
        EXPECT_LE(*hi - *lo, 1) << points << " points x " << replications << " replications in " << count;
        EXPECT_GE(*lo, 1);
      }
  EXPECT_TRUE(in_shard({}, 5, 2, 3));  // not sharded: everything
}

TEST(Shard, PointCountsFollowTheAxes) {
  auto e = parse_experiment(
      R"({"name": "s", "operation": "scoring", "rows": [10, 20, 30], "features": [4, 8], "block_sizes": [0, 64],
                                "variants": ["cpu_reference"], "timers": ["host_wall"],
                                "protocol": {"replications": 3}})",
      "s.json");
  EXPECT_EQ(point_count(e), 12);
  EXPECT_EQ(shard_units(e, {}), 36);
  std::int64_t total = 0;
  for (int k = 0; k < 5; ++k) total += shard_units(e, {k, 5});
  EXPECT_EQ(total, 36);
  const auto transfer = load_experiment(resolve_experiment_path("transfer_calibration"));
  // The copies (6 sizes x 2 memory kinds x 2 directions), then the page-locking calls (6 sizes x 2 calls).
  EXPECT_EQ(point_count(transfer), 6 * 2 * 2 + 6 * 2);
}

// ---------------------------------------------------------------------------------------------- merge

// Each test gets its own folder (tests/scratch_dir.hpp).
class scratch_dir : public kstudy::test::scratch_dir {
 public:
  scratch_dir() : kstudy::test::scratch_dir("shard") {}
};

constexpr int k_points = 4, k_replications = 3, k_trials = 2;
const std::string k_definition =
    R"({"name": "merge_test", "operation": "scoring", "rows": [100, 200, 300, 400], "features": [8],
  "variants": ["cpu_reference"], "timers": ["host_wall"], "protocol": {"trials": 2, "replications": 3}})";

struct shard_options {
  std::string definition = k_definition;
  std::string git_commit = "abc123";
  bool complete = true;
  std::vector<std::pair<int, int>> extra_units;  // (point, replication) written besides the shard's own
};

sample_record sample(int point, int replication, int trial) {
  sample_record s;
  s.experiment = "merge_test";
  s.variant = "cpu_reference@serial";
  s.layout = "row_major";
  s.memory_kind = "host";
  s.rows = 100 * (point + 1);
  s.features = 8;
  s.bytes = s.rows * 8 * 4;
  s.point = point;
  s.replication = replication;
  s.trial = trial;
  s.timer = timer_kind::host_wall;
  s.seconds = 1e-3 * (point + 1) + 1e-5 * replication + 1e-7 * trial;
  s.gate = gate_verdict::passed;
  s.status = "ok";
  return s;
}

// A shard archive as `kstudy run --shard K/N` writes it, with synthetic samples.
std::string write_shard(const scratch_dir& dir, int index, int count, const shard_options& options = {}) {
  const auto path = dir.file("shard-" + std::to_string(index) + ".h5");
  const auto e = parse_experiment(options.definition, "merge_test.json");
  run_metadata m;
  m.root = {{"kstudy_version", "0.1.0"},
            {"git_commit", options.git_commit},
            {"git_dirty", "false"},
            {"flavour", "cpu"},
            {"host", "node" + std::to_string(index)},
            {"created_utc", "2026-11-30T00:00:00Z"},
            {"command_line", "kstudy run --shard"},
            {"shard_index", std::to_string(index)},
            {"shard_count", std::to_string(count)},
            {"slurm_array_job_id", "77"}};
  if (options.complete) m.root["complete"] = "true";
  m.environment = {
      {"kokkos_version", "3.4.1"}, {"cpu_model", "Test CPU"}, {"openmp_threads", std::to_string(index + 1)}};
  std::vector<sample_record> samples;
  std::vector<gate_record> gates;
  std::vector<variant_record> variants;
  for (int p = 0; p < k_points; ++p)
    for (int r = 0; r < k_replications; ++r) {
      const bool extra = std::find(options.extra_units.begin(), options.extra_units.end(), std::make_pair(p, r)) !=
                         options.extra_units.end();
      if (!in_shard({index, count}, p, r, k_replications) && !extra) continue;
      for (int t = 0; t < k_trials; ++t) samples.push_back(sample(p, r, t));
      if (r == 0) {
        gate_record g;
        g.experiment = "merge_test";
        g.variant = "cpu_reference@serial";
        g.rows = 100 * (p + 1);
        g.features = 8;
        g.passed = true;
        gates.push_back(g);
        variant_record v;
        v.variant = g.variant;
        v.rows = g.rows;
        v.features = g.features;
        variants.push_back(v);
      }
    }
  // Each shard measured its own ceilings; bandwidth rises with the index so the median is shard 1's.
  std::vector<ceiling_record> ceilings{{"host_read", 1 << 20, 1e-3, 1e9 * (index + 1)}};
  hdf5_sink sink(path, open_mode::overwrite);
  sink.begin(m);
  sink.begin_experiment({e.name, e.definition_json, "{}", e.fingerprint()});
  sink.write_ceilings(ceilings);
  sink.write_gates(gates);
  sink.write_variants(variants);
  sink.write_samples(samples);
  sink.write_summaries(summarise(samples, ceilings));
  sink.end_experiment(e.name);
  sink.finish();
  return path;
}

auto key(const sample_record& s) { return std::make_tuple(s.point, s.replication, s.trial, s.seconds); }

std::string refusal_of(const merge_request& request) {
  try {
    merge_shards(request);
  } catch (const merge_refused& refused) {
    std::string all;
    for (const auto& p : refused.problems()) all += p + "\n";
    return all;
  }
  return "";
}

TEST(Merge, HoldsExactlyTheUnionOfTheShards) {
  scratch_dir dir;
  merge_request request;
  request.out = dir.file("merged.h5");
  std::multiset<std::tuple<std::int64_t, std::int32_t, std::int32_t, double>> expected;
  for (int k = 2; k >= 0; --k) {  // argument order must not matter
    request.shards.push_back(write_shard(dir, k, 3));
    for (const auto& s : read_samples(request.shards.back(), "merge_test")) expected.insert(key(s));
  }
  ASSERT_EQ(expected.size(), std::size_t(k_points * k_replications * k_trials));
  const auto report = merge_shards(request);
  ASSERT_TRUE(report.written);
  EXPECT_EQ(report.samples, k_points * k_replications * k_trials);
  EXPECT_EQ(report.merged, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(report.missing.empty());

  const auto samples = read_samples(request.out, "merge_test");
  std::multiset<std::tuple<std::int64_t, std::int32_t, std::int32_t, double>> got;
  for (const auto& s : samples) got.insert(key(s));
  EXPECT_EQ(got, expected);
  // In the runner's order: replication by replication, points in order.
  EXPECT_TRUE(std::is_sorted(samples.begin(), samples.end(), [](const auto& a, const auto& b) {
    return std::tie(a.replication, a.point) < std::tie(b.replication, b.point);
  }));
  EXPECT_EQ(read_gates(request.out, "merge_test").size(), std::size_t(k_points));
  EXPECT_EQ(read_variants(request.out, "merge_test").size(), std::size_t(k_points));
  // Summaries recomputed from all samples against the median shard's ceilings (shard 1's).
  const auto ceilings = read_ceilings(request.out, "merge_test");
  ASSERT_EQ(ceilings.size(), 1u);
  EXPECT_EQ(ceilings[0].bytes_per_second, 2e9);
  const auto summaries = read_summaries(request.out, "merge_test");
  const auto expected_summaries = summarise(samples, ceilings);
  ASSERT_EQ(summaries.size(), expected_summaries.size());
  ASSERT_EQ(summaries.size(), std::size_t(k_points));
  for (std::size_t i = 0; i < summaries.size(); ++i) {
    EXPECT_EQ(summaries[i].samples, k_replications * k_trials);
    EXPECT_EQ(summaries[i].median, expected_summaries[i].median);
    EXPECT_EQ(summaries[i].fraction_of_roof, expected_summaries[i].fraction_of_roof);
  }
  // Provenance: what the shards share, the merge, and each shard under /shards.
  const auto root = read_metadata(request.out).root;
  EXPECT_EQ(root.at("merged_shards"), "0,1,2");
  EXPECT_EQ(root.at("shard_count"), "3");
  EXPECT_EQ(root.at("complete"), "true");
  EXPECT_EQ(root.at("git_commit"), "abc123");
  EXPECT_EQ(root.at("slurm_array_job_id"), "77");
  EXPECT_EQ(root.at("host"), "node0, node1, node2");
  EXPECT_EQ(root.count("shard_index"), 0u);
  const auto environment = read_metadata(request.out).environment;
  EXPECT_EQ(environment.at("cpu_model"), "Test CPU");
  EXPECT_NE(environment.at("openmp_threads").find("differs between shards"), std::string::npos);
  const auto shards = read_shards(request.out);
  ASSERT_EQ(shards.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(shards[k].index, k);
    EXPECT_EQ(shards[k].metadata.root.at("host"), "node" + std::to_string(k));
    EXPECT_EQ(shards[k].metadata.environment.at("openmp_threads"), std::to_string(k + 1));
    EXPECT_EQ(fs::path(shards[k].source).filename(), "shard-" + std::to_string(k) + ".h5");
    ASSERT_EQ(shards[k].ceilings.size(), 1u);
    EXPECT_EQ(shards[k].ceilings[0].bytes_per_second, 1e9 * (k + 1));
  }
  // Only the output: no temporary left beside it.
  EXPECT_EQ(dir.entries().size(), 4u);
}

TEST(Merge, RefusesDifferentExperimentDefinitionsUnlessForced) {
  scratch_dir dir;
  merge_request request;
  request.out = dir.file("merged.h5");
  shard_options other;
  other.definition = R"({"name": "merge_test", "operation": "scoring", "rows": [100, 200, 300, 400], "features": [8],
    "variants": ["cpu_reference"], "timers": ["host_wall"], "protocol": {"trials": 2, "replications": 3, "seed": 5}})";
  request.shards = {write_shard(dir, 0, 2), write_shard(dir, 1, 2, other)};
  const auto refusal = refusal_of(request);
  EXPECT_NE(refusal.find("experiment 'merge_test' is defined differently"), std::string::npos) << refusal;
  EXPECT_FALSE(fs::exists(request.out));
  request.force = true;
  const auto report = merge_shards(request);
  EXPECT_TRUE(report.written);
  EXPECT_EQ(report.warnings.size(), 1u);
}

TEST(Merge, RefusesDifferentBuilds) {
  scratch_dir dir;
  merge_request request;
  request.out = dir.file("merged.h5");
  shard_options other;
  other.git_commit = "def456";
  request.shards = {write_shard(dir, 0, 2), write_shard(dir, 1, 2, other)};
  const auto refusal = refusal_of(request);
  EXPECT_NE(refusal.find("git_commit differs"), std::string::npos) << refusal;
  EXPECT_FALSE(fs::exists(request.out));
}

TEST(Merge, RefusesDifferentShardings) {
  scratch_dir dir;
  merge_request request;
  request.out = dir.file("merged.h5");
  request.shards = {write_shard(dir, 0, 2), write_shard(dir, 1, 3)};
  const auto refusal = refusal_of(request);
  EXPECT_NE(refusal.find("different shardings"), std::string::npos) << refusal;
  EXPECT_FALSE(fs::exists(request.out));
}

// A unit in two shards: refused; with --force kept once (the lower shard's copy).
TEST(Merge, DetectsDuplicateSamples) {
  scratch_dir dir;
  merge_request request;
  request.out = dir.file("merged.h5");
  shard_options overlapping;
  overlapping.extra_units = {{0, 0}, {1, 1}};  // units of shard 0 (0 = 0*3+0) and shard 0 (4 = 1*3+1)
  request.shards = {write_shard(dir, 0, 2), write_shard(dir, 1, 2, overlapping)};
  const auto refusal = refusal_of(request);
  EXPECT_NE(refusal.find("duplicate samples"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("outside its shard's slice"), std::string::npos) << refusal;
  EXPECT_FALSE(fs::exists(request.out));
  request.force = true;
  const auto report = merge_shards(request);
  EXPECT_EQ(report.duplicate_samples, 2 * k_trials);
  EXPECT_EQ(report.samples, k_points * k_replications * k_trials);
  auto samples = read_samples(request.out, "merge_test");
  std::set<std::tuple<std::int64_t, std::int32_t, std::int32_t>> keys;
  for (const auto& s : samples) keys.insert({s.point, s.replication, s.trial});
  EXPECT_EQ(keys.size(), samples.size());
  EXPECT_EQ(read_gates(request.out, "merge_test").size(), std::size_t(k_points));
  EXPECT_EQ(read_variants(request.out, "merge_test").size(), std::size_t(k_points));
}

TEST(Merge, ReportsMissingAndIncompleteShards) {
  scratch_dir dir;
  merge_request request;
  request.out = dir.file("merged.h5");
  shard_options interrupted;
  interrupted.complete = false;
  request.shards = {write_shard(dir, 0, 4), write_shard(dir, 2, 4, interrupted)};
  auto report = merge_shards(request);
  EXPECT_FALSE(report.written);
  EXPECT_EQ(report.missing, (std::vector<int>{1, 3}));
  EXPECT_EQ(report.incomplete, (std::vector<int>{2}));
  EXPECT_FALSE(fs::exists(request.out));
  request.partial = true;
  report = merge_shards(request);
  ASSERT_TRUE(report.written);
  const auto root = read_metadata(request.out).root;
  EXPECT_EQ(root.at("complete"), "false");
  EXPECT_EQ(root.at("missing_shards"), "1,3");
  EXPECT_EQ(root.at("incomplete_shards"), "2");
  EXPECT_EQ(root.at("merged_shards"), "0,2");
}

TEST(Merge, RefusesBadInputWithoutWritingAnything) {
  scratch_dir dir;
  const auto shard = write_shard(dir, 0, 1);
  merge_request request;
  request.out = dir.file("merged.h5");
  request.shards = {shard, dir.file("./shard-0.h5")};
  EXPECT_THROW(merge_shards(request), std::runtime_error);  // the same file twice
  request.shards = {shard, dir.file("missing.h5")};
  EXPECT_THROW(merge_shards(request), std::runtime_error);
  // An archive that is not a shard.
  const auto plain = dir.file("plain.h5");
  {
    hdf5_sink sink(plain, open_mode::create);
    sink.begin({{{"git_commit", "abc123"}}, {}});
    sink.finish();
  }
  request.shards = {shard, plain};
  try {
    merge_shards(request);
    ADD_FAILURE() << "a non-shard archive was merged";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a shard archive"), std::string::npos) << e.what();
  }
  request.shards = {shard, request.out};
  EXPECT_THROW(merge_shards(request), std::runtime_error);  // the output among the inputs
  EXPECT_FALSE(fs::exists(request.out));
  // An existing output is kept unless --overwrite.
  request.shards = {shard};
  ASSERT_TRUE(merge_shards(request).written);
  EXPECT_THROW(merge_shards(request), std::runtime_error);
  request.overwrite = true;
  EXPECT_TRUE(merge_shards(request).written);
}

}  // namespace
