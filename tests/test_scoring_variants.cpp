// Every registered scoring variant, on every enabled backend, against the float64 reference: fresh data with
// outliers per shape, odd shapes, one row, one feature, outputs poisoned before each run, several
// block sizes, edge inputs (NaN, Inf, inv_std = 0) and malformed problems. Written once; the
// registry supplies the variants of whatever flavour is built.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "escape_families.hpp"
#include "kokkos_test_support.hpp"
#include "scoring/gate.hpp"
#include "scoring/pipeline.hpp"
#include "kstudy/probes.hpp"
#include "kstudy/variant.hpp"
#include "scoring/data_generator.hpp"

namespace {

using kstudy::host_dataset;
using kstudy::table_layout;

std::vector<std::string> variant_ids() {
  return kstudy::test::variant_ids([](const kstudy::variant_info& i) { return i.operation == "scoring"; });
}
using kstudy::test::variant_test_name;

class VariantCorrectness : public ::testing::TestWithParam<std::string> {
 protected:
  const kstudy::registered_variant& entry() const { return *kstudy::variant_registry::instance().find(GetParam()); }

  kstudy::table_shape shape_for(std::int64_t rows, std::int64_t features) const {
    // Padded tables get an odd padding so the pitch is not a multiple of anything convenient.
    return kstudy::make_shape(rows, features, entry().info.layout, 3);
  }

  // Runs the variant on the dataset and returns the gate verdict.
  kstudy::scoring_gate_result run_gated(const host_dataset& data, kstudy::run_options options = {}) const {
    auto variant = kstudy::make_scoring_variant(entry());
    const auto problem = data.problem();
    variant->prepare_table(problem, options);
    variant->poison();
    variant->run();
    kstudy::scoring_results out;
    out.resize(problem.shape.rows);
    variant->download_scores(out.score.data(), out.flag.data());
    const auto reference = kstudy::compute_reference(problem);
    return kstudy::check_results(problem, reference, out.score.data(), out.flag.data(), variant->flagged_count());
  }
};

TEST_P(VariantCorrectness, MatchesReferenceOverShapes) {
  KSTUDY_REQUIRE_KOKKOS();
  const std::int64_t shapes[][2] = {
      {1, 1},
      {1, 16},
      {37, 1},
      {1000, 16},
      {1023, 17},
      {4099, 33},
      {333, 256},
      {65, 513},
      {20000, 7},
      {3, 5000},
      // enough rows (a multiple of 4) for the feature-major kernels' four-rows-per-thread path
      {1048580, 11}};
  std::uint64_t seed = 1;
  for (const auto& s : shapes) {
    kstudy::dataset_options options;
    options.seed = 0x5eed0000 + seed++;  // fresh data for every shape
    const host_dataset data(shape_for(s[0], s[1]), options);
    const auto gate = run_gated(data);
    EXPECT_TRUE(gate.passed) << GetParam() << " at " << s[0] << "x" << s[1] << ": " << gate.message;
  }
}

TEST_P(VariantCorrectness, PoisonIsCaughtWhenNothingRuns) {
  KSTUDY_REQUIRE_KOKKOS();
  // The gate must be able to fail: poisoned outputs that no run overwrote are rejected.
  const host_dataset data(shape_for(129, 8));
  auto variant = kstudy::make_scoring_variant(entry());
  variant->prepare_table(data.problem(), {});
  variant->poison();
  kstudy::scoring_results out;
  out.resize(129);
  variant->download_scores(out.score.data(), out.flag.data());
  const auto gate = kstudy::check_results(data.problem(), kstudy::compute_reference(data.problem()), out.score.data(),
                                          out.flag.data(), variant->flagged_count());
  EXPECT_FALSE(gate.passed);
  EXPECT_EQ(gate.score_failures, 129);
}

TEST_P(VariantCorrectness, EdgeValues) {
  KSTUDY_REQUIRE_KOKKOS();
  host_dataset data(shape_for(257, 9));
  const auto shape = data.shape();
  auto& x = data.x();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  x[shape.offset(3, 2)] = nan;     // row 3: NaN score, flag 0
  x[shape.offset(10, 0)] = inf;    // clips to +clip
  x[shape.offset(11, 8)] = -inf;   // clips to -clip
  x[shape.offset(12, 4)] = 1e30f;  // huge but finite
  const auto gate = run_gated(data);
  EXPECT_TRUE(gate.passed) << gate.message;

  // inv_std = 0 on one feature: that feature contributes nothing (Inf * 0 would be NaN).
  auto problem = data.problem();
  std::vector<float> inv_std(data.inv_std());
  inv_std[5] = 0.0f;
  problem.inv_std.data = inv_std.data();
  auto variant = kstudy::make_scoring_variant(entry());
  variant->prepare_table(problem, {});
  variant->poison();
  variant->run();
  kstudy::scoring_results out;
  out.resize(shape.rows);
  variant->download_scores(out.score.data(), out.flag.data());
  const auto g2 = kstudy::check_results(problem, kstudy::compute_reference(problem), out.score.data(), out.flag.data(),
                                        variant->flagged_count());
  EXPECT_TRUE(g2.passed) << g2.message;
  EXPECT_TRUE(std::isnan(out.score[3]));
  EXPECT_EQ(out.flag[3], 0);
}

TEST_P(VariantCorrectness, RejectsMalformedProblems) {
  KSTUDY_REQUIRE_KOKKOS();
  const host_dataset data(shape_for(64, 6));
  auto variant = kstudy::make_scoring_variant(entry());
  auto problem = data.problem();
  problem.mean.size = 5;  // extents disagree with x
  EXPECT_THROW(variant->prepare_table(problem, {}), std::invalid_argument);
  problem = data.problem();
  problem.shape.rows = 0;
  EXPECT_THROW(variant->prepare_table(problem, {}), std::invalid_argument);
  problem = data.problem();
  problem.shape.features = 0;
  EXPECT_THROW(variant->prepare_table(problem, {}), std::invalid_argument);
  problem = data.problem();
  problem.x = nullptr;
  EXPECT_THROW(variant->prepare_table(problem, {}), std::invalid_argument);
}

TEST_P(VariantCorrectness, RepeatedRunsAgree) {
  KSTUDY_REQUIRE_KOKKOS();
  // A race shows as results that move between runs on the same inputs.
  const host_dataset data(shape_for(10007, 16));
  auto variant = kstudy::make_scoring_variant(entry());
  variant->prepare_table(data.problem(), {});
  kstudy::scoring_results first, again;
  first.resize(10007);
  again.resize(10007);
  variant->run();
  variant->download_scores(first.score.data(), first.flag.data());
  const auto count = variant->flagged_count();
  for (int i = 0; i < 3; ++i) {
    variant->poison();
    variant->run();
    variant->download_scores(again.score.data(), again.flag.data());
    EXPECT_EQ(first.flag, again.flag);
    EXPECT_EQ(count, variant->flagged_count());
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, VariantCorrectness, ::testing::ValuesIn(variant_ids()), variant_test_name);

// Variants whose block size is a run-time parameter, at every size from a warp to the limit.
class TunableVariant : public VariantCorrectness {};

std::vector<std::string> tunable_variant_ids() {
  return kstudy::test::variant_ids(
      [](const kstudy::variant_info& i) { return i.operation == "scoring" && i.tunable_block_size; });
}

TEST_P(TunableVariant, HonoursBlockSizes) {
  KSTUDY_REQUIRE_KOKKOS();
  const host_dataset data(shape_for(5001, 19));
  for (const int block : {32, 64, 96, 128, 256, 512, 1024}) {
    const auto gate = run_gated(data, kstudy::run_options{block});
    EXPECT_TRUE(gate.passed) << GetParam() << " block " << block << ": " << gate.message;
  }
  // Wide rows too (the Kokkos row-major team kernel changes mapping above the tile size).
  const host_dataset wide(shape_for(301, 300));
  for (const int block : {32, 256, 1024}) {
    const auto gate = run_gated(wide, kstudy::run_options{block});
    EXPECT_TRUE(gate.passed) << GetParam() << " block " << block << " at 301x300: " << gate.message;
  }
}

// The CPU flavour has no tunable variant.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TunableVariant);
INSTANTIATE_TEST_SUITE_P(Tunable, TunableVariant, ::testing::ValuesIn(tunable_variant_ids()), variant_test_name);

TEST(VariantRegistry, EveryFamilyIsPresentWithMetadata) {
  const auto all = kstudy::variant_registry::instance().of_operation("scoring");
  ASSERT_FALSE(all.empty());
  for (const char* family : {"cpu_reference", "composed", "partial_fusion", "fused_kokkos"})
    EXPECT_FALSE(kstudy::variant_registry::instance().match(family).empty()) << family;
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  for (const char* name : {"fused_cuda_row_major", "fused_cuda_feature_major", "fused_cuda_padded"})
    EXPECT_FALSE(kstudy::variant_registry::instance().match(name).empty()) << name;
#endif
  const auto shape = kstudy::make_shape(1 << 20, 16, table_layout::row_major);
  for (const auto* v : all) {
    EXPECT_FALSE(v->info.description.empty()) << v->info.id();
    EXPECT_GE(v->info.traffic(shape).total(), kstudy::scoring_essential_traffic(shape).total()) << v->info.id();
    EXPECT_GE(v->info.kernels_launched, 1);
  }
  // The seed's plain kernel: the baseline every optimisation must beat.
  EXPECT_FALSE(kstudy::variant_registry::instance().match("plain_kokkos").empty());
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  EXPECT_FALSE(kstudy::variant_registry::instance().match("plain_cuda").empty());
#endif
}

// Every variant says who wrote its kernels, and a family is written one way: on the CUDA escape path
// (handwritten CUDA, a vendor library, or the two mixed) or not, never both. The report's "Kokkos /
// handwritten" ratio reads implementation, never family names. Declared variants count as well as built ones.
TEST(VariantRegistry, ImplementationMatchesTheFamily) {
  using kstudy::implementation;
  const auto& registry = kstudy::variant_registry::instance();
  auto infos = registry.declared_elsewhere();
  for (const auto* v : registry.all()) infos.push_back(&v->info);
  std::map<std::string, bool> escape_of_family;
  for (const auto* info : infos) {
    const bool escape = kstudy::test::written_without_kokkos(*info);
    const auto [known, first] = escape_of_family.emplace(info->family, escape);
    EXPECT_EQ(known->second, escape) << info->id() << " " << kstudy::to_string(info->implementation) << ": family "
                                     << info->family << " has variants of both kinds";
    EXPECT_EQ(info->implementation == implementation::reference, info->family == "cpu_reference") << info->id();
  }
#ifndef KSTUDY_HAVE_CUDA_VARIANTS
  // A build without CUDA compiles no escape-path code: it declares those variants and can run the others.
  for (const auto* info : infos)
    EXPECT_EQ(kstudy::test::written_without_kokkos(*info), registry.find(info->id()) == nullptr) << info->id();
#endif
}

// Labels that say what runs: a variant whose kernels include a library call is labelled by it, as the
// library (only the call) or as mixed (its own kernels around the call). The scoring operation's composed and
// partial-fusion variants run their own Kokkos kernels around KokkosBlas::gemv; attention's textbook rungs run
// kstudy's softmax kernel between two cuBLAS GEMMs.
TEST(VariantRegistry, VariantsAroundALibraryCallAreLabelledMixed) {
  using kstudy::implementation;
  EXPECT_EQ(kstudy::to_string(implementation::mixed), "mixed");
  EXPECT_EQ(kstudy::to_string(implementation::kokkos_mixed), "kokkos_mixed");
  int scoring = 0;
  for (const char* family : {"composed", "partial_fusion"})
    for (const auto* v : kstudy::variant_registry::instance().match(family)) {
      EXPECT_EQ(v->info.implementation, implementation::kokkos_mixed) << v->info.id();
      ++scoring;
    }
  EXPECT_GE(scoring, 4);  // two layouts each on at least one backend
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  for (const char* name : {"attention_textbook", "attention_bf16_textbook"}) {
    const auto found = kstudy::variant_registry::instance().match(name);
    ASSERT_EQ(found.size(), 1u) << name;
    EXPECT_EQ(found.front()->info.implementation, implementation::mixed) << name;
  }
  for (const char* name : {"attention_fused", "attention_bf16_fused_pipelined", "gemm_autotuned"})
    for (const auto* v : kstudy::variant_registry::instance().match(name))
      EXPECT_EQ(v->info.implementation, implementation::handwritten_cuda) << v->info.id();
#endif
}

// Autotuned rungs say how they chose: tuned_parameters() ends with the candidates timed and the earlier
// rung whose configuration won (0: one of the tuner's own), so that the report can say when a rung re-measures an
// earlier one. The kernel lab's tuners are CUDA variants: skipped on a build or machine without them.
TEST(VariantRegistry, AutotunedRungsSayHowTheyChose) {
  struct tuned {
    const char* id;
    std::vector<std::int64_t> extents;
    std::int64_t earlier_rung;  // the rung whose configuration the tuner's first candidate is (0: none)
  };
  const tuned rungs[] = {{"gemm_autotuned@cuda", {256, 256, 256}, 7},
                         {"gemm_tf32_mma@cuda", {256, 256, 256}, 0},
                         {"gemm_bf16_mma_autotuned@cuda", {256, 256, 256}, 3},
                         {"attention_bf16_fused_autotuned@cuda", {2, 300, 64}, 3}};
  int found = 0;
  for (const auto& rung : rungs) {
    const auto* entry = kstudy::variant_registry::instance().find(rung.id);
    if (entry == nullptr) continue;
    ++found;
    KSTUDY_REQUIRE_KOKKOS();
    kstudy::point_inputs inputs(kstudy::operation_of(*entry), rung.extents, 0, 20261201);
    auto variant = entry->make();
    variant->prepare(inputs.data(entry->info.layout), {});
    std::int64_t candidates = -1, same_as_rung = -1;
    for (const auto& [name, value] : variant->tuned_parameters()) {
      if (name == "candidates") candidates = value;
      if (name == "same_as_rung") same_as_rung = value;
    }
    EXPECT_GE(candidates, 2) << rung.id;
    EXPECT_TRUE(same_as_rung == 0 || same_as_rung == rung.earlier_rung) << rung.id << ": " << same_as_rung;
    EXPECT_LT(same_as_rung, entry->info.rung) << rung.id;
  }
  if (found == 0) GTEST_SKIP() << "no autotuned rung in this build (the cuda flavour's kernel lab)";
}

}  // namespace

namespace {

// The pipelined one-shot strategy over every variant: chunks that do not divide the rows (a tail slot),
// more chunks than slots (slot reuse), pageable input, every layout; the output must pass the gate.
class PipelinedOneShot : public VariantCorrectness {};

TEST_P(PipelinedOneShot, MatchesReference) {
  KSTUDY_REQUIRE_KOKKOS();
  for (const std::int64_t chunk : {std::int64_t(0), std::int64_t(1000), std::int64_t(4096), std::int64_t(1) << 20}) {
    const host_dataset data(shape_for(10007, 13));
    const auto problem = data.problem();
    kstudy::pipelined_one_shot pipeline(entry(), problem, kstudy::host_memory::pageable, {}, {chunk, 3});
    kstudy::scoring_results out;
    out.resize(problem.shape.rows);
    std::fill(out.score.begin(), out.score.end(), std::numeric_limits<float>::quiet_NaN());
    std::fill(out.flag.begin(), out.flag.end(), std::uint8_t(0xAB));
    for (int repeat = 0; repeat < 2; ++repeat) {  // slots are reused across runs
      const auto flagged = pipeline.run(problem.x, out.score.data(), out.flag.data());
      const auto gate = kstudy::check_results(problem, kstudy::compute_reference(problem), out.score.data(),
                                              out.flag.data(), flagged);
      EXPECT_TRUE(gate.passed) << GetParam() << " chunk " << chunk << ": " << gate.message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, PipelinedOneShot, ::testing::ValuesIn(variant_ids()), variant_test_name);

}  // namespace

// The layout_transpose probe times the resident row-major -> feature-major conversion on distinct values
// and keeps the times only if every element landed where it belongs (it throws otherwise): odd shapes,
// one row, one feature, and a width past a 32-lane tile.
TEST(LayoutConversion, TransposeProbeIsCheckedOnOddShapes) {
  KSTUDY_REQUIRE_KOKKOS();
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes{{1, 1}, {1, 33}, {37, 1}, {1000, 17}, {4099, 256}};
  for (const auto& [rows, features] : shapes) {
    const auto seconds = kstudy::probes::time_layout_conversion(rows, features, 1, 2);
    ASSERT_EQ(seconds.size(), 2u) << rows << "x" << features;
    for (const double t : seconds) EXPECT_GT(t, 0.0) << rows << "x" << features;
  }
}
