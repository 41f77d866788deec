// Experiment files: every malformed file of the corpus is refused with an error naming the file, the
// field and the problem; the built-in experiments parse, expand and fingerprint as documented.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/experiment.hpp"
#include "kstudy/experiment_kind.hpp"
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

// The throttling policy: accept by default and then absent from the stored definition (fingerprints unchanged);
// remeasure states its cool-down and bound; --throttled overrides, dropping a bound the new policy does not take.
TEST(Experiments, ThrottlingPolicyParsesDefaultsAndOverrides) {
  const std::string base = R"({"name": "t", "operation": "scoring", "rows": [8], "features": [4])";
  const auto accept = kstudy::parse_experiment(base + "}", "a.json");
  EXPECT_EQ(accept.protocol.throttled, kstudy::throttle_policy::accept);
  EXPECT_EQ(accept.definition_json.find("throttled"), std::string::npos) << accept.definition_json;
  const auto remeasure = kstudy::parse_experiment(base + R"(, "protocol": {"throttled": "remeasure"}})", "r.json");
  EXPECT_EQ(remeasure.protocol.throttled, kstudy::throttle_policy::remeasure);
  EXPECT_EQ(remeasure.protocol.cool_down_seconds, 30.0);
  EXPECT_EQ(remeasure.protocol.max_remeasures, 2);
  EXPECT_NE(remeasure.definition_json.find(R"("cool_down_s":30.0)"), std::string::npos) << remeasure.definition_json;
  EXPECT_NE(remeasure.fingerprint(), accept.fingerprint());
  EXPECT_EQ(kstudy::parse_experiment(remeasure.definition_json, "again").fingerprint(), remeasure.fingerprint());
  const auto exclude = kstudy::parse_experiment(base + R"(, "protocol": {"throttled": "exclude"}})", "e.json");
  EXPECT_EQ(exclude.protocol.throttled, kstudy::throttle_policy::exclude);
  EXPECT_EQ(exclude.definition_json.find("cool_down_s"), std::string::npos) << exclude.definition_json;
  EXPECT_STREQ(kstudy::to_string(kstudy::parse_throttle_policy("remeasure")), "remeasure");

  const auto path = fs::temp_directory_path() / ("kstudy_throttled_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << remeasure.definition_json;
  kstudy::run_request request;
  request.throttled = "exclude";
  const auto overridden = kstudy::prepare_experiment(path.string(), request);
  EXPECT_EQ(overridden.protocol.throttled, kstudy::throttle_policy::exclude);
  EXPECT_EQ(overridden.definition_json.find("cool_down_s"), std::string::npos) << overridden.definition_json;
  request.throttled = "remeasure";  // the definition's own policy: its cool-down stays
  EXPECT_EQ(kstudy::prepare_experiment(path.string(), request).definition_json, remeasure.definition_json);
  const auto passed_on = kstudy::override_arguments(request);  // to a Slurm task or a run per device
  const auto flag = std::find(passed_on.begin(), passed_on.end(), "--throttled");
  ASSERT_NE(flag, passed_on.end());
  EXPECT_EQ(*std::next(flag), "remeasure");
  fs::remove(path);
}

}  // namespace

namespace {

// Archives under data/ record each experiment's fingerprint and --resume compares it, so no change to how kinds
// parse may move one. The values were computed before the kinds' parameters left the shared experiment struct
// (issue 42); a built-in added later needs its fingerprint added here.
TEST(Experiments, FingerprintsOfTheBuiltinsAreUnchanged) {
  const std::map<std::string, std::string> expected = {
      {"advise_check", "89e03af5425810e3"},
      {"alternatives_attention", "dfcc77d453a4bf89"},
      {"alternatives_cold", "e4874a6da4a369e2"},
      {"alternatives_gemm", "d0f535ab71db134a"},
      {"alternatives_layernorm", "d1be810ee24de1a3"},
      {"alternatives_quick", "cdc10088542b2f5a"},
      {"alternatives_reduce", "25e94c78952b5a0a"},
      // Session 25 added the GPU rungs; data/cpu-2core-2026-12-07-s24 holds the earlier definition (f80fe93cfa58fadf).
      {"alternatives_scoring", "3083ede5994a7b54"},
      {"alternatives_softmax", "5a78a24398763795"},
      {"alternatives_softmax_wide", "1f7ee2f7d9157400"},
      {"attention", "496fb5222dce2211"},
      {"attention_quick", "b257077ecf7d0fde"},
      {"block_size", "18dfb82ff3a7e3ac"},
      {"cache_modes", "887b55a618b2ad81"},
      {"cache_modes_stream", "5a44c57882fda846"},
      {"cold_compile", "2310fef3492c7f72"},
      {"energy_scoring", "a9461c7439845282"},
      {"energy_stream", "233c44db469634ee"},
      {"feature_sweep", "a9720c7e7427ddf3"},
      {"gemm", "393f9d0d67686000"},
      {"gemm_quick", "ca072adf8d8bfcc"},
      {"hopper_attention", "bde43d4b664e0b02"},
      {"hopper_attention_hd64", "f9995b7619ff1123"},
      {"hopper_gemm", "e2ee34b79209083f"},
      {"hopper_gemm_tf32", "28e7b3de1ce75bef"},
      {"kokkos_costs_attention", "2fc287587f426f81"},
      {"kokkos_costs_gemm", "a4ff3999fb2cfc42"},
      {"kokkos_costs_layernorm", "40bdefefa9a8f490"},
      {"kokkos_costs_scoring", "78421f55089c0e18"},
      {"kokkos_costs_softmax", "f476f08de86d814b"},
      {"kokkos_costs_transpose", "80ad732f1a30bc15"},
      {"kokkos_costs_vectors", "d43420c1b19cdc81"},
      {"launch_overhead", "76f4891fa50a6444"},
      {"layernorm", "60e27aa24ca9c70e"},
      {"layernorm_quick", "9ef90efda681ef0d"},
      {"layout_transpose", "ec137c61a99ccd10"},
      {"plain_baseline", "9a3a589facda5afc"},
      {"plain_minimal", "61d4742e432d094"},
      {"profile_alternatives_gemm", "7878ac02c4ae7240"},
      {"profile_alternatives_softmax", "925f7d40915b45a5"},
      {"profile_attention", "e9addc762ff987ee"},
      {"profile_gemm", "f1f21e5325fabf3b"},
      {"profile_hopper_attention", "dd9317223907de3f"},
      {"profile_layernorm", "6c290d5565e453a9"},
      {"profile_layouts", "7a4fa548d5852ba6"},
      {"profile_reduce_sum", "2d153bb0fe0c23e3"},
      {"profile_softmax", "7f65f239d686fd09"},
      {"profile_tensor_core_gemm", "86862ad739ed8aa9"},
      {"profile_transpose", "3800f50397fe8a9e"},
      {"quick", "f9a250f5f3955c7d"},
      {"reduce_sum", "4199e0f31222af63"},
      {"reduce_sum_quick", "2284d85fd7352d2b"},
      {"residual_layernorm", "2e95a6c8ef0c84ea"},
      {"residual_layernorm_quick", "380fd68d6696ef0a"},
      {"rows_sweep", "2bdd8e6a57baa28f"},
      {"sgemm_frontier", "16838f943318a14b"},
      {"softmax", "c118738e063e792f"},
      {"softmax_odd_widths", "3c1c8e2e3507c185"},
      {"softmax_quick", "12a56e1b332764d9"},
      {"stream", "8c454d655e7b2014"},
      {"stream_quick", "19dcf889eabc2506"},
      {"tensor_core_gemm", "a3a3d6621ec96158"},
      {"transfer_calibration", "e204ac7ec13335c9"},
      {"transpose", "82742d173f9e657a"},
      {"transpose_quick", "c669fcb0eda258ec"},
  };
  const auto names = kstudy::builtin_experiment_names();
  EXPECT_EQ(names.size(), expected.size());
  for (const auto& name : names) {
    const auto e = kstudy::load_experiment(kstudy::resolve_experiment_path(name));
    const auto it = expected.find(name);
    if (it == expected.end())
      ADD_FAILURE() << name << ": a new built-in; add its fingerprint " << e.fingerprint();
    else
      EXPECT_EQ(e.fingerprint(), it->second) << name << ": " << e.definition_json;
  }
}

// Every kind's defaults and alternative spellings (ranges, lists, cache both ways) normalise as before.
TEST(Experiments, FingerprintsOfEveryKindsDefaultsAreUnchanged) {
  const std::vector<std::pair<std::string, std::string>> documents = {
      {R"({"name": "t", "kind": "transfer", "sizes_bytes": [4096]})", "202c5d7f7cadf623"},
      {R"({"name": "t", "kind": "transfer", "sizes_bytes": {"from": 4096, "to": 65536}, "memory": ["pinned"],
                  "directions": ["d2h"]})",
       "27d46a3ff3237623"},
      {R"({"name": "l", "kind": "layout_conversion", "rows": [8, 16], "features": {"from": 2, "to": 8}})",
       "e70cbb9443078aa1"},
      {R"({"name": "c", "kind": "cold_compile", "operation": "scoring", "rows": [8], "features": [4]})",
       "bbdae7c80d537c02"},
      {R"({"name": "s", "operation": "scoring", "rows": [8], "features": [4], "cache": ["warm", "cold"],
                  "memory": ["pinned"], "row_padding": 0, "block_sizes": [0, 64]})",
       "1b4e6729989f13e6"},
      {R"({"name": "n", "kind": "launch"})", "59ef39a92dd165d4"},
  };
  for (const auto& [text, fingerprint] : documents) {
    const auto e = kstudy::parse_experiment(text, "x.json");
    EXPECT_EQ(e.fingerprint(), fingerprint) << text << "\n" << e.definition_json;
  }
}

}  // namespace

namespace {

// A kind's own parameters travel with the experiment (copies included), typed: code reading another type, or an
// experiment whose parser set none, gets a logic_error naming the experiment and its kind, not garbage.
TEST(Experiments, KindParametersAreTypedAndMisreadsNamed) {
  struct counted {
    int n = 0;
  };
  struct other {};
  kstudy::experiment e;
  e.name = "e";
  e.kind = "transfer";
  e.source = "e.json";
  const auto refused = [](const kstudy::experiment& x, auto read, const std::string& why) {
    try {
      read(x);
      ADD_FAILURE() << "read without an error: " << why;
    } catch (const std::logic_error& ex) {
      const std::string message = ex.what();
      EXPECT_NE(message.find("'e' (kind transfer, e.json)"), std::string::npos) << message;
      EXPECT_NE(message.find(why), std::string::npos) << message;
    }
  };
  refused(
      e, [](const kstudy::experiment& x) { x.parameters<counted>(); }, "set no parameters");
  e.set_parameters(counted{7});
  const auto copy = e;
  EXPECT_EQ(copy.parameters<counted>().n, 7);
  refused(
      copy, [](const kstudy::experiment& x) { x.parameters<other>(); }, "not of the type asked for");

  // The built-in kinds' point counts read what their parsers set.
  const auto transfer = kstudy::parse_experiment(
      R"({"name": "t", "kind": "transfer", "sizes_bytes": [4096, 8192, 16384], "pinning": ["host_alloc"]})", "t.json");
  EXPECT_EQ(kstudy::kind_of(transfer).point_count(transfer), 3 * 1 * 2 + 3 * 1);
  const auto conversion = kstudy::parse_experiment(
      R"({"name": "l", "kind": "layout_conversion", "rows": [8, 16], "features": [2, 4, 8]})", "l.json");
  EXPECT_EQ(kstudy::kind_of(conversion).point_count(conversion), 2 * 3);
  try {
    transfer.parameters<counted>();
    ADD_FAILURE() << "a transfer's parameters were read as another type";
  } catch (const std::logic_error& ex) {
    EXPECT_NE(std::string(ex.what()).find("kind transfer"), std::string::npos) << ex.what();
  }
}

}  // namespace
