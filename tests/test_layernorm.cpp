// The LayerNorm operations (variants/layernorm): registration, essential bytes and flops, the seeded
// generator (offset rows, outliers), the gate's tolerance model (it accepts float32 two-pass and Welford
// results, and rejects outputs just past their bound, poison, a misrounded h and the one-pass
// E[x^2] - E[x]^2 formula on offset rows), and every registered layernorm and residual_layernorm variant of
// this build against the reference at odd shapes. The CUDA variants exist only in the CUDA flavour; without
// a GPU their tests skip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "escape_families.hpp"
#include "kokkos_test_support.hpp"
#include "kstudy/host_io.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/variant.hpp"
#include "layernorm/layernorm.hpp"

namespace {

using kstudy::operation;
using kstudy::operation_registry;
using kstudy::table_layout;
using kstudy::layernorm::layernorm_data;
using kstudy::layernorm::layernorm_kind;

const layernorm_kind k_kinds[] = {layernorm_kind::plain, layernorm_kind::residual};
constexpr std::uint64_t k_seed = 20261130;

const operation& op_of(layernorm_kind kind) {
  return kstudy::test::registered_operation(kstudy::layernorm::operation_name(kind));
}

std::unique_ptr<kstudy::problem_data> generate(layernorm_kind kind, std::int64_t rows, std::int64_t hidden,
                                               std::uint64_t seed = k_seed) {
  const auto& op = op_of(kind);
  return op.generate(op.shape({rows, hidden}, table_layout::row_major, 0), seed);
}

const layernorm_data& typed(const kstudy::problem_data& p) { return dynamic_cast<const layernorm_data&>(p); }

// How a float32 implementation computes a row's statistics.
enum class statistics { two_pass, welford, naive_one_pass };

// A float32 statistic the way a GPU kernel accumulates it: sequential chunks of `chunk` elements (one
// thread's share), the chunk partials combined pairwise (the block's tree).
template <class State, class Add, class Merge>
State chunked(const std::vector<float>& v, std::size_t chunk, Add add, Merge merge) {
  std::vector<State> partials;
  for (std::size_t begin = 0; begin < v.size(); begin += chunk) {
    State s{};
    for (std::size_t j = begin; j < std::min(v.size(), begin + chunk); ++j) add(s, v[j]);
    partials.push_back(s);
  }
  while (partials.size() > 1) {
    std::vector<State> next;
    for (std::size_t i = 0; i + 1 < partials.size(); i += 2) next.push_back(merge(partials[i], partials[i + 1]));
    if (partials.size() % 2 == 1) next.push_back(partials.back());
    partials.swap(next);
  }
  return partials.front();
}

struct welford_state {
  float count = 0.0f, mean = 0.0f, m2 = 0.0f;
};

// Outputs as a float32 implementation leaves them: statistics accumulated in chunks of 64 and a tree.
void fill_float(layernorm_kind kind, const layernorm_data& p, statistics how,
                const std::vector<kstudy::host_span>& outputs) {
  const std::int64_t n = p.hidden();
  constexpr std::size_t chunk = 64;
  float* y = outputs[0].as<float>();
  float* h = kind == layernorm_kind::residual ? outputs[1].as<float>() : nullptr;
  std::vector<float> v(static_cast<std::size_t>(n));
  const auto sum_of = [&](auto term) {
    return chunked<float>(
        v, chunk, [&](float& s, float value) { s += term(value); }, [](float a, float b) { return a + b; });
  };
  for (std::int64_t row = 0; row < p.rows(); ++row) {
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t i = row * n + j;
      v[j] = h != nullptr ? p.x()[i] + p.r()[i] : p.x()[i];
      if (h != nullptr) h[i] = v[j];
    }
    float mean = 0.0f, var = 0.0f;
    if (how == statistics::welford) {
      const auto w = chunked<welford_state>(
          v, chunk,
          [](welford_state& s, float value) {
            s.count += 1.0f;
            const float d = value - s.mean;
            s.mean += d / s.count;
            s.m2 += d * (value - s.mean);
          },
          [](const welford_state& a, const welford_state& b) {
            const float count = a.count + b.count, d = b.mean - a.mean, wb = b.count / count;
            return welford_state{count, a.mean + d * wb, a.m2 + b.m2 + d * d * a.count * wb};
          });
      mean = w.mean;
      var = w.m2 / float(n);
    } else {
      mean = sum_of([](float value) { return value; }) / float(n);
      if (how == statistics::naive_one_pass) {
        var = sum_of([](float value) { return value * value; }) / float(n) - mean * mean;
      } else {
        var = sum_of([mean](float value) { return (value - mean) * (value - mean); }) / float(n);
      }
    }
    const float rstd = 1.0f / std::sqrt(var + kstudy::layernorm::epsilon);
    for (std::int64_t j = 0; j < n; ++j) y[row * n + j] = (v[j] - mean) * rstd * p.gamma()[j] + p.beta()[j];
  }
}

TEST(LayernormOperation, TwoOperationsOnRowsAndHidden) {
  for (const auto kind : k_kinds) {
    const auto& op = op_of(kind);
    const auto& info = op.info();
    EXPECT_EQ(info.axes, (std::vector<std::string>{"rows", "hidden"})) << info.name;
    EXPECT_EQ(info.layouts, std::vector<table_layout>{table_layout::row_major}) << info.name;
    EXPECT_EQ(info.outputs,
              kind == layernorm_kind::plain ? std::vector<std::string>{"y"} : (std::vector<std::string>{"y", "h"}));
    EXPECT_FALSE(info.bench_points.empty());
    EXPECT_EQ(kstudy::test::escape_families(info.name),
              std::set<std::string>{kind == layernorm_kind::plain ? "layernorm_cuda" : "residual_layernorm_cuda"});
    const auto shape = op.shape({37, 4099}, table_layout::row_major, 0);
    EXPECT_EQ(shape.rows, 37);
    EXPECT_EQ(shape.features, 4099);
    EXPECT_THROW(op.shape({37, 4099}, table_layout::feature_major, 0), std::invalid_argument);
    EXPECT_THROW(op.shape({0, 5}, table_layout::row_major, 0), std::invalid_argument);
    EXPECT_THROW(op.shape({5, 0}, table_layout::row_major, 0), std::invalid_argument);
    EXPECT_EQ(op.output_bytes(shape), std::vector<std::int64_t>(kind == layernorm_kind::plain ? 1 : 2, 37 * 4099 * 4));
  }
}

TEST(LayernormOperation, EssentialBytesAndFlops) {
  const std::int64_t rows = 65536, hidden = 4096, m = rows * hidden;
  const auto& plain = op_of(layernorm_kind::plain);
  const auto s = plain.shape({rows, hidden}, table_layout::row_major, 0);
  // x read once, y written once, gamma and beta read once.
  EXPECT_EQ(plain.essential_traffic(s).bytes_read, 4 * m + 8 * hidden);
  EXPECT_EQ(plain.essential_traffic(s).bytes_written, 4 * m);
  EXPECT_EQ(plain.essential_flops(s), 8 * m + 4 * rows);
  EXPECT_EQ(plain.input_bytes(s), 4 * m + 8 * hidden);
  EXPECT_EQ(plain.reference_bytes(s), 24 * rows);
  // Seed 002's pass model: the fused kernel moves 4 matrices (read x, r; write h, y), the unfused pair 5.
  const auto& residual = op_of(layernorm_kind::residual);
  EXPECT_EQ(residual.essential_traffic(s).bytes_read, 8 * m + 8 * hidden);
  EXPECT_EQ(residual.essential_traffic(s).bytes_written, 8 * m);
  EXPECT_EQ(residual.essential_flops(s), 9 * m + 4 * rows);
  EXPECT_EQ(residual.input_bytes(s), 8 * m + 8 * hidden);
  EXPECT_EQ(kstudy::layernorm::pass_traffic(rows, hidden, 3, 2).total() - 8 * hidden, 5 * 4 * m);
}

TEST(LayernormOperation, GeneratorIsDeterministicWithOffsetRowsAndOutliers) {
  const std::int64_t rows = 400, n = 1031;
  const auto a = generate(layernorm_kind::residual, rows, n), b = generate(layernorm_kind::residual, rows, n);
  const auto& pa = typed(*a);
  EXPECT_EQ(std::memcmp(pa.x(), typed(*b).x(), rows * n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(pa.r(), typed(*b).r(), rows * n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(pa.gamma(), typed(*b).gamma(), n * sizeof(float)), 0);
  const auto c = generate(layernorm_kind::residual, rows, n, k_seed + 1);
  EXPECT_NE(std::memcmp(pa.x(), typed(*c).x(), rows * n * sizeof(float)), 0);
  // The operations share x; layernorm streams x alone.
  const auto plain = generate(layernorm_kind::plain, rows, n);
  EXPECT_EQ(std::memcmp(pa.x(), typed(*plain).x(), rows * n * sizeof(float)), 0);
  EXPECT_EQ(typed(*plain).r(), nullptr);
  EXPECT_EQ(plain->streamed_inputs().size(), 1u);
  EXPECT_EQ(a->streamed_inputs().size(), 2u);

  std::int64_t offset_rows = 0, outliers = 0, plain_elements = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    double sum = 0.0;
    for (std::int64_t j = 0; j < n; ++j) sum += pa.x()[row * n + j];
    const double mean = sum / double(n);
    if (std::fabs(mean) > 200.0) {
      ++offset_rows;
      ASSERT_LT(std::fabs(mean), 4100.0);
      for (std::int64_t j = 0; j < n; ++j) ASSERT_LE(std::fabs(pa.x()[row * n + j] - mean), 1.1) << row;
    } else {
      for (std::int64_t j = 0; j < n; ++j) {
        const float v = pa.x()[row * n + j];
        ASSERT_TRUE(std::isfinite(v));
        ASSERT_LE(std::fabs(v), 1000.0f);
        outliers += std::fabs(v) >= 100.0f;
        ++plain_elements;
      }
    }
  }
  EXPECT_GT(offset_rows, rows / 3);
  EXPECT_LT(offset_rows, 2 * rows / 3);
  EXPECT_GT(double(outliers) / double(plain_elements), 0.008);
  EXPECT_LT(double(outliers) / double(plain_elements), 0.012);
  for (std::int64_t j = 0; j < n; ++j) {
    EXPECT_LE(std::fabs(pa.gamma()[j]), 2.0f);
    EXPECT_LE(std::fabs(pa.beta()[j]), 1.0f);
  }
  const auto copied = op_of(layernorm_kind::residual).relayout(*a, a->shape());
  EXPECT_EQ(std::memcmp(pa.r(), typed(*copied).r(), rows * n * sizeof(float)), 0);
  EXPECT_NE(pa.r(), typed(*copied).r());
}

TEST(LayernormGate, AcceptsFloat32AndRejectsCorruptedOutputs) {
  KSTUDY_REQUIRE_KOKKOS();  // host_outputs are Kokkos host Views
  const std::vector<std::vector<std::int64_t>> shapes = {{1, 1}, {1, 33}, {7, 1}, {9, 1031}, {40, 4096}, {12, 8192}};
  for (const auto kind : k_kinds) {
    const auto& op = op_of(kind);
    for (const auto& e : shapes) {
      const auto problem = generate(kind, e[0], e[1]);
      const auto reference = op.reference(*problem);
      kstudy::host_outputs out(op, problem->shape());
      const auto spans = out.spans();
      const std::string where = op.info().name + " " + std::to_string(e[0]) + "x" + std::to_string(e[1]);
      for (const auto how : {statistics::two_pass, statistics::welford}) {
        fill_float(kind, typed(*problem), how, spans);
        const auto good = op.check(*problem, *reference, spans);
        EXPECT_TRUE(good.passed) << where << ": " << good.message;
        EXPECT_EQ(good.checked, kstudy::layernorm::output_count(kind) * e[0] * e[1]);
        EXPECT_LE(good.max_relative_error, good.rtol) << where;
      }
      op.corrupt(*problem, spans);
      const auto bad = op.check(*problem, *reference, spans);
      EXPECT_FALSE(bad.passed) << where;
      EXPECT_EQ(bad.value_failures, 1) << where << ": " << bad.message;
      EXPECT_NE(bad.message.find("y[0][0]"), std::string::npos) << bad.message;
      EXPECT_NE(bad.message.find("bound"), std::string::npos) << bad.message;

      op.poison(spans);
      const auto poisoned = op.check(*problem, *reference, spans);
      EXPECT_FALSE(poisoned.passed) << where;
      EXPECT_EQ(poisoned.value_failures, e[0] * e[1]) << where;
    }
  }
}

TEST(LayernormGate, RejectsOnePassVarianceOnOffsetRows) {
  KSTUDY_REQUIRE_KOKKOS();
  for (const auto kind : k_kinds) {
    for (const std::int64_t n : {33, 1031, 4096}) {
      const auto& op = op_of(kind);
      const auto problem = generate(kind, 16, n);
      const auto reference = op.reference(*problem);
      kstudy::host_outputs out(op, problem->shape());
      const auto spans = out.spans();
      fill_float(kind, typed(*problem), statistics::naive_one_pass, spans);
      const auto g = op.check(*problem, *reference, spans);
      EXPECT_FALSE(g.passed) << op.info().name << " n=" << n;
      // It fails on the offset rows (about half; residual rows whose r has an outlier have a variance large
      // enough to hide it), by far more than the bound.
      EXPECT_GT(g.value_failures, kind == layernorm_kind::plain ? n : 0) << op.info().name << " n=" << n;
      EXPECT_GT(g.max_relative_error, (kind == layernorm_kind::plain ? 10 : 1) * g.rtol)
          << op.info().name << " n=" << n;
    }
  }
}

TEST(LayernormGate, HMustBeOneRoundingOfXPlusR) {
  KSTUDY_REQUIRE_KOKKOS();
  const auto& op = op_of(layernorm_kind::residual);
  const auto problem = generate(layernorm_kind::residual, 5, 257);
  const auto reference = op.reference(*problem);
  kstudy::host_outputs out(op, problem->shape());
  const auto spans = out.spans();
  fill_float(layernorm_kind::residual, typed(*problem), statistics::two_pass, spans);
  ASSERT_TRUE(op.check(*problem, *reference, spans).passed);
  float& h = spans[1].as<float>()[3 * 257 + 10];
  for (int step = 0; step < 3; ++step) h = std::nextafter(h, INFINITY);  // 3 ulps: past one rounding
  const auto g = op.check(*problem, *reference, spans);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.value_failures, 1);
  EXPECT_NE(g.message.find("h[3][10]"), std::string::npos) << g.message;
}

TEST(LayernormGate, RejectsAnotherOperationsProblem) {
  const auto plain = generate(layernorm_kind::plain, 4, 16);
  EXPECT_THROW(op_of(layernorm_kind::residual).reference(*plain), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------------
// Every registered layernorm and residual_layernorm variant of this build

std::vector<std::string> layernorm_variant_ids() {
  return kstudy::test::variant_ids(
      [](const kstudy::variant_info& i) { return i.operation == "layernorm" || i.operation == "residual_layernorm"; });
}
using kstudy::test::variant_test_name;

class LayernormVariants : public kstudy::test::registered_variant_test {};

TEST_P(LayernormVariants, PassesTheGateAtOddShapes) {
  // Odd shapes of the brief, a float4 shape (768, 8192) and a row past the register and scratch limits.
  const std::vector<std::vector<std::int64_t>> shapes = {{1, 1},      {1, 33},   {7, 1},   {37, 4099},
                                                         {257, 1031}, {3, 8192}, {5, 768}, {2, 12288}};
  for (const auto& e : shapes)
    kstudy::test::expect_gate_passes(op(), entry(), e, k_seed + std::uint64_t(e[0] * 131 + e[1]));
}

TEST_P(LayernormVariants, OneShotAndQueuedPathsPass) {
  kstudy::test::expect_one_shot_and_queued_paths_pass(op(), entry(), {19, 1029}, k_seed);
}

TEST_P(LayernormVariants, PoisonIsCaughtWhenNothingRuns) {
  const auto g = kstudy::test::poisoned_outputs_gate(op(), entry(), {3, 129}, k_seed);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.value_failures, 3 * 129);
}

TEST_P(LayernormVariants, RejectsAnotherOperationsProblem) {
  const auto other = entry().info.operation == "layernorm" ? layernorm_kind::residual : layernorm_kind::plain;
  const auto problem = generate(other, 4, 64);
  auto impl = entry().make();
  EXPECT_THROW(impl->prepare(*problem, {}), std::invalid_argument);
}

TEST_P(LayernormVariants, MetadataIsComplete) {
  const auto& info = entry().info;
  EXPECT_EQ(info.layout, table_layout::row_major);
  EXPECT_FALSE(info.family.empty());
  EXPECT_FALSE(info.description.empty());
  ASSERT_TRUE(static_cast<bool>(info.traffic));
  const auto shape = op().shape({65536, 4096}, table_layout::row_major, 0);
  // No variant moves less than the essential bytes; the fused and register ones move exactly those.
  EXPECT_GE(info.traffic(shape).total(), op().essential_traffic(shape).total());
  if (info.fusion == kstudy::fusion_level::none) {
    EXPECT_EQ(info.kernels_launched, 2);
    EXPECT_EQ(info.traffic(shape).total() - 8 * 4096, 5 * std::int64_t(4) * 65536 * 4096) << "the design's 5 passes";
  } else {
    EXPECT_EQ(info.kernels_launched, 1);
  }
  if (info.backend == "cuda" && info.family.find("cuda") != std::string::npos) {
    EXPECT_GT(info.rung, 0);
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LayernormVariants);
INSTANTIATE_TEST_SUITE_P(Layernorm, LayernormVariants, ::testing::ValuesIn(layernorm_variant_ids()), variant_test_name);

// The tuned Kokkos variants on every path they plan (variants/detail/kokkos_rows.hpp): rows of quads
// (hidden % 4 == 0) and of single floats, a quad or a lane partly past the row's end, teams whose last rows
// are missing (7, 13 rows), and rows they stream (h read back with the residual). On a host: rows of up to
// 32 in one lane's registers, longer ones streamed; on a GPU: a warp per row up to 1,024, a team per row up
// to 16,384, streamed beyond.
std::vector<std::string> layernorm_tuned_ids() {
  return kstudy::test::variant_ids([](const kstudy::variant_info& i) {
    return i.name == "layernorm_kokkos_tuned" || i.name == "residual_layernorm_kokkos_tuned";
  });
}

class LayernormTunedVariant : public kstudy::test::registered_variant_test {};

TEST_P(LayernormTunedVariant, PassesTheGateOnEveryPath) {
  const std::vector<std::vector<std::int64_t>> shapes = {
      {3, 1},    {7, 3},    {9, 8},    {13, 16},  {5, 32},    {2, 33},    {3, 36},    {13, 100}, {4, 1024},
      {3, 1025}, {2, 1028}, {2, 4096}, {2, 4097}, {1, 16384}, {1, 16388}, {1, 20000}, {2, 20004}};
  for (const auto& e : shapes)
    kstudy::test::expect_gate_passes(op(), entry(), e, k_seed + std::uint64_t(e[0] * 7919 + e[1]));
}

TEST_P(LayernormTunedVariant, IsRungOneOfTheKokkosFamily) {
  const auto& info = entry().info;
  EXPECT_EQ(info.family, info.operation + "_kokkos");
  EXPECT_EQ(info.rung, 1);
  EXPECT_EQ(info.implementation, kstudy::implementation::kokkos);
  EXPECT_EQ(info.fusion, kstudy::fusion_level::full);
  // The row read once (x, or x and r) where registers hold it: the essential traffic.
  const auto shape = op().shape({65536, 4096}, table_layout::row_major, 0);
  if (info.on_device) {
    EXPECT_EQ(info.traffic(shape).total(), op().essential_traffic(shape).total());
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LayernormTunedVariant);
INSTANTIATE_TEST_SUITE_P(Layernorm, LayernormTunedVariant, ::testing::ValuesIn(layernorm_tuned_ids()),
                         variant_test_name);

TEST(LayernormVariantRegistry, EveryBackendHasKokkosAndTheCudaLadder) {
  std::set<std::string> names;
  for (const auto& id : layernorm_variant_ids()) names.insert(kstudy::variant_registry::instance().find(id)->info.name);
  for (const char* name : {"layernorm_kokkos", "residual_layernorm_kokkos_fused", "residual_layernorm_kokkos_unfused",
                           "layernorm_kokkos_tuned", "residual_layernorm_kokkos_tuned"})
    EXPECT_TRUE(names.count(name)) << name;
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  for (const char* name : {"layernorm_cuda_two_pass", "layernorm_cuda_welford", "layernorm_cuda_registers",
                           "residual_layernorm_cuda_unfused", "residual_layernorm_cuda_fused"})
    EXPECT_TRUE(names.count(name)) << name;
  const auto rung = [](const char* name) {
    return kstudy::variant_registry::instance().find(std::string(name) + "@cuda")->info.rung;
  };
  EXPECT_EQ(rung("layernorm_cuda_two_pass"), 1);
  EXPECT_EQ(rung("layernorm_cuda_welford"), 2);
  EXPECT_EQ(rung("layernorm_cuda_registers"), 3);
  EXPECT_EQ(rung("residual_layernorm_cuda_unfused"), 1);
  EXPECT_EQ(rung("residual_layernorm_cuda_fused"), 2);
#endif
}

}  // namespace
