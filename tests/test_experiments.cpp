// Experiment files: every malformed file of the corpus is refused with an error naming the file, the
// field and the problem; the built-in experiments parse, expand and fingerprint as documented.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "kstudy/experiment.hpp"
#include "kstudy/study.hpp"
#include "source_files.hpp"

namespace {

namespace fs = std::filesystem;

TEST(Experiments, EveryMalformedFileIsRefusedNamingFileAndField) {
  std::ifstream manifest(source_file("tests/malformed_experiments/expected.tsv"));
  ASSERT_TRUE(manifest) << "missing tests/malformed_experiments/expected.tsv";
  std::string line;
  int checked = 0;
  while (std::getline(manifest, line)) {
    const auto tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    const auto path = source_file("tests/malformed_experiments/" + line.substr(0, tab)).string();
    const auto expected = line.substr(tab + 1);
    try {
      kstudy::load_experiment(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const kstudy::experiment_error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << "error does not name the file: " << message;
      EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in: " << message;
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

TEST(Experiments, HugeFileIsRefusedBeforeParsing) {
  const auto path = fs::temp_directory_path() / "kstudy_huge_experiment.json";
  {
    std::ofstream out(path);
    out << R"({"name": "huge", "operation": "scoring", "rows": [1], "features": [1], "description": ")"
        << std::string(1100000, 'a') << "\"}";
  }
  try {
    kstudy::load_experiment(path.string());
    ADD_FAILURE() << "a 1.1 MB experiment file was accepted";
  } catch (const kstudy::experiment_error& e) {
    EXPECT_NE(std::string(e.what()).find("limited to 1 MiB"), std::string::npos) << e.what();
  }
  fs::remove(path);
}

TEST(Experiments, MissingFileIsNamed) {
  EXPECT_THROW(kstudy::load_experiment("/nonexistent/experiment.json"), kstudy::experiment_error);
  EXPECT_THROW(kstudy::resolve_experiment_path("no_such_builtin"), kstudy::experiment_error);
}

TEST(Experiments, BuiltinsParseWithDistinctFingerprints) {
  const auto names = kstudy::builtin_experiment_names();
  for (const char* required : {"quick", "rows_sweep", "feature_sweep", "transfer_calibration", "launch_overhead",
                               "layout_transpose", "block_size", "cold_compile", "profile_layouts"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  std::set<std::string> fingerprints;
  for (const auto& name : names) {
    const auto e = kstudy::load_experiment(kstudy::resolve_experiment_path(name));
    EXPECT_EQ(e.name, name);
    EXPECT_TRUE(fingerprints.insert(e.fingerprint()).second) << name;
    // Stable: parsing the normalised definition again gives the same fingerprint.
    EXPECT_EQ(kstudy::parse_experiment(e.definition_json, "again").fingerprint(), e.fingerprint());
  }
}

TEST(Experiments, RowsSweepExpandsTheSeedsDoublingRange) {
  const auto e = kstudy::load_experiment(kstudy::resolve_experiment_path("rows_sweep"));
  ASSERT_EQ(e.points.size(), 15u);  // rows 1024 .. 16M, doubling, at one feature count
  EXPECT_EQ(e.points.front(), (std::vector<std::int64_t>{1024, 16}));
  EXPECT_EQ(e.points.back(), (std::vector<std::int64_t>{16777216, 16}));
  EXPECT_EQ(e.protocol.warmups, 2);
  EXPECT_EQ(e.protocol.trials, 7);
  EXPECT_EQ(e.protocol.replications, 3);
}

TEST(Experiments, DefaultsAndFingerprintFollowTheDefinition) {
  const auto a =
      kstudy::parse_experiment(R"({"name": "a", "operation": "scoring", "rows": [8], "features": [3]})", "a.json");
  EXPECT_EQ(a.kind, "sweep");
  EXPECT_EQ(a.block_sizes, std::vector<std::int64_t>{0});
  const auto b = kstudy::parse_experiment(
      R"({"name": "a", "operation": "scoring", "rows": [8], "features": [3], "protocol": {"trials": 3}})", "b.json");
  EXPECT_NE(a.fingerprint(), b.fingerprint());
}

TEST(Experiments, ShapesReplaceTheGridInOrder) {
  const auto e = kstudy::parse_experiment(
      R"({"name": "s", "operation": "scoring", "shapes": [[64, 16], [8, 256]], "block_sizes": [0, 128]})", "s.json");
  EXPECT_EQ(e.points, (std::vector<std::vector<std::int64_t>>{{64, 16}, {8, 256}}));
  const auto points = kstudy::sweep_points(e);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[1].index, 1);
  EXPECT_EQ(points[1].extents, (std::vector<std::int64_t>{64, 16}));
  EXPECT_EQ(points[1].block_size, 128);
  EXPECT_EQ(points[2].extents, (std::vector<std::int64_t>{8, 256}));
  EXPECT_EQ(points[2].op->info().name, "scoring");
  // The shapes are part of the definition (and so of the fingerprint); the grid form expands the same way.
  EXPECT_NE(e.definition_json.find("\"shapes\":[[64,16],[8,256]]"), std::string::npos) << e.definition_json;
  EXPECT_EQ(kstudy::parse_experiment(e.definition_json, "again").fingerprint(), e.fingerprint());
  const auto grid = kstudy::parse_experiment(
      R"({"name": "g", "operation": "scoring", "rows": [8, 64], "features": [16, 256]})", "g.json");
  EXPECT_EQ(grid.points, (std::vector<std::vector<std::int64_t>>{{8, 16}, {8, 256}, {64, 16}, {64, 256}}));
}

}  // namespace

namespace {

// `kstudy run quick launch_overhead --variants fused_kokkos`: the restriction applies to the kinds that run
// variants; a calibration kind in the same run has none and is run as defined.
TEST(Experiments, VariantsOverrideSkipsKindsWithoutVariants) {
  kstudy::run_request request;
  request.variants = {"fused_kokkos"};
  const auto sweep = kstudy::prepare_experiment("quick", request);
  EXPECT_EQ(sweep.variants, std::vector<std::string>{"fused_kokkos"});
  const auto launch = kstudy::prepare_experiment("launch_overhead", request);
  EXPECT_EQ(launch.kind, "launch");
  EXPECT_EQ(launch.definition_json.find("fused_kokkos"), std::string::npos) << launch.definition_json;
}

}  // namespace

namespace {

// "cache": warm by default and then absent from the definition (older archives keep their fingerprint);
// "cold" or both modes, every point timed in each mode in turn; `run --cache` overrides it.
TEST(Experiments, CacheModesParseExpandAndOverride) {
  const auto warm =
      kstudy::parse_experiment(R"({"name": "c", "operation": "scoring", "rows": [8], "features": [4]})", "w.json");
  EXPECT_EQ(warm.cache, std::vector<kstudy::cache_mode>{kstudy::cache_mode::warm});
  EXPECT_EQ(warm.definition_json.find("cache"), std::string::npos) << warm.definition_json;
  const auto cold = kstudy::parse_experiment(
      R"({"name": "c", "operation": "scoring", "rows": [8], "features": [4], "cache": "cold"})", "c.json");
  EXPECT_EQ(cold.cache, std::vector<kstudy::cache_mode>{kstudy::cache_mode::cold});
  EXPECT_NE(cold.fingerprint(), warm.fingerprint());
  EXPECT_EQ(kstudy::parse_experiment(cold.definition_json, "again").fingerprint(), cold.fingerprint());
  const auto both = kstudy::parse_experiment(
      R"({"name": "c", "operation": "scoring", "rows": [8, 16], "features": [4], "cache": ["warm", "cold"]})",
      "b.json");
  const auto points = kstudy::sweep_points(both);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].cache, kstudy::cache_mode::warm);
  EXPECT_EQ(points[1].cache, kstudy::cache_mode::cold);
  EXPECT_EQ(points[1].extents, (std::vector<std::int64_t>{8, 4}));
  EXPECT_EQ(points[3].index, 3);
  kstudy::run_request request;
  request.cache = "cold";
  EXPECT_EQ(kstudy::prepare_experiment("quick", request).cache,
            std::vector<kstudy::cache_mode>{kstudy::cache_mode::cold});
  EXPECT_EQ(kstudy::prepare_experiment("launch_overhead", request).definition_json.find("cache"), std::string::npos);
  request.cache = "lukewarm";
  try {
    kstudy::prepare_experiment("quick", request);
    ADD_FAILURE() << "--cache lukewarm was accepted";
  } catch (const kstudy::experiment_error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'cache': unknown cache mode 'lukewarm'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
