// The STREAM operations (variants/stream): registration, essential bytes and flops, the seeded generator,
// the gate's tolerance model (it accepts correct outputs and rejects outputs just past their bound,
// flipped bits and poison), and every registered stream variant of this build against the reference at
// odd sizes. The CUDA variants exist only in the CUDA flavour; without a GPU their tests skip.
#include <gtest/gtest.h>

#include <cctype>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kokkos_test_support.hpp"
#include "kstudy/host_io.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/variant.hpp"
#include "stream/stream.hpp"

namespace {

using kstudy::operation;
using kstudy::operation_registry;
using kstudy::table_layout;
using kstudy::stream::stream_data;
using kstudy::stream::stream_kind;

const stream_kind k_kinds[] = {stream_kind::copy, stream_kind::scale, stream_kind::add, stream_kind::triad,
                               stream_kind::dot};
constexpr std::uint64_t k_seed = 20261130;

const operation& op_of(stream_kind kind) {
  return kstudy::test::registered_operation(kstudy::stream::operation_name(kind));
}

std::unique_ptr<kstudy::problem_data> generate(stream_kind kind, std::int64_t n, std::uint64_t seed = k_seed) {
  const auto& op = op_of(kind);
  return op.generate(op.shape({n}, table_layout::row_major, 0), seed);
}

const stream_data& typed(const kstudy::problem_data& p) { return dynamic_cast<const stream_data&>(p); }

// Outputs as a correct float32 run leaves them: z computed in float (triad with FMA), d in float64.
void fill_correct(stream_kind kind, const stream_data& p, const std::vector<kstudy::host_span>& outputs) {
  const float q = p.q();
  if (kind == stream_kind::dot) {
    double d = 0.0;
    for (std::int64_t i = 0; i < p.n(); ++i) d += double(p.x()[i]) * double(p.y()[i]);
    *outputs[0].as<double>() = d;
    return;
  }
  float* z = outputs[0].as<float>();
  for (std::int64_t i = 0; i < p.n(); ++i) {
    switch (kind) {
      case stream_kind::copy:
        z[i] = p.x()[i];
        break;
      case stream_kind::scale:
        z[i] = q * p.x()[i];
        break;
      case stream_kind::add:
        z[i] = p.x()[i] + p.y()[i];
        break;
      case stream_kind::triad:
        z[i] = std::fma(q, p.y()[i], p.x()[i]);
        break;
      case stream_kind::dot:
        break;
    }
  }
}

TEST(StreamOperation, FiveOperationsOnOneAxis) {
  for (const auto kind : k_kinds) {
    const auto& info = op_of(kind).info();
    EXPECT_EQ(info.axes, std::vector<std::string>{"n"}) << info.name;
    EXPECT_EQ(info.layouts, std::vector<table_layout>{table_layout::row_major}) << info.name;
    EXPECT_EQ(info.outputs, std::vector<std::string>{kind == stream_kind::dot ? "d" : "z"}) << info.name;
    EXPECT_EQ(info.bench_points.size(), 3u) << info.name;
    const auto shape = op_of(kind).shape({1000}, table_layout::row_major, 0);
    EXPECT_EQ(shape.rows, 1000);
    EXPECT_EQ(shape.features, 1);
    EXPECT_THROW(op_of(kind).shape({1000}, table_layout::feature_major, 0), std::invalid_argument);
    EXPECT_THROW(op_of(kind).shape({0}, table_layout::row_major, 0), std::invalid_argument);
    EXPECT_EQ(op_of(kind).output_bytes(shape), std::vector<std::int64_t>{kind == stream_kind::dot ? 8 : 4000});
  }
}

TEST(StreamOperation, EssentialBytesAndFlops) {
  const std::int64_t n = 1 << 20;
  struct expected {
    stream_kind kind;
    std::int64_t read, written, flops, inputs;
  };
  const expected table[] = {{stream_kind::copy, 4 * n, 4 * n, 0, 4 * n},
                            {stream_kind::scale, 4 * n, 4 * n, n, 4 * n},
                            {stream_kind::add, 8 * n, 4 * n, n, 8 * n},
                            {stream_kind::triad, 8 * n, 4 * n, 2 * n, 8 * n},
                            {stream_kind::dot, 8 * n, 8, 2 * n, 8 * n}};
  for (const auto& e : table) {
    const auto& op = op_of(e.kind);
    const auto shape = op.shape({n}, table_layout::row_major, 0);
    const auto t = op.essential_traffic(shape);
    EXPECT_EQ(t.bytes_read, e.read) << op.info().name;
    EXPECT_EQ(t.bytes_written, e.written) << op.info().name;
    EXPECT_EQ(op.essential_flops(shape), e.flops) << op.info().name;
    EXPECT_EQ(op.input_bytes(shape), e.inputs) << op.info().name;
    EXPECT_GE(op.reference_bytes(shape), 0) << op.info().name;
  }
  // The seed's first rung: one addition per 12 bytes.
  const auto& add = op_of(stream_kind::add);
  const auto shape = add.shape({n}, table_layout::row_major, 0);
  EXPECT_EQ(add.essential_traffic(shape).total(), 12 * add.essential_flops(shape));
}

TEST(StreamOperation, GeneratorIsDeterministicWithOutliers) {
  const std::int64_t n = 200003;
  const auto a = generate(stream_kind::triad, n), b = generate(stream_kind::triad, n);
  const auto& pa = typed(*a);
  const auto& pb = typed(*b);
  EXPECT_EQ(std::memcmp(pa.x(), pb.x(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(pa.y(), pb.y(), n * sizeof(float)), 0);
  // Another seed, and x against y, give other values.
  const auto c = generate(stream_kind::triad, n, k_seed + 1);
  EXPECT_NE(std::memcmp(pa.x(), typed(*c).x(), n * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(pa.x(), pa.y(), n * sizeof(float)), 0);
  // A value depends on its index alone: a shorter problem is a prefix, and the kinds share x.
  const auto prefix = generate(stream_kind::copy, 1000);
  EXPECT_EQ(std::memcmp(pa.x(), typed(*prefix).x(), 1000 * sizeof(float)), 0);
  EXPECT_EQ(typed(*prefix).y(), nullptr);
  EXPECT_EQ(prefix->streamed_inputs().size(), 1u);
  EXPECT_EQ(a->streamed_inputs().size(), 2u);

  std::int64_t outliers = 0, positive_outliers = 0, negative = 0;
  for (const float* v : {pa.x(), pa.y()}) {
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isfinite(v[i])) << i;
      const float m = std::fabs(v[i]);
      if (m >= 100.0f) {
        ASSERT_LE(m, 1000.0f) << i;
        ++outliers;
        positive_outliers += v[i] > 0;
      } else {
        ASSERT_GE(v[i], -1.0f) << i;
        ASSERT_LT(v[i], 1.0f) << i;
        negative += v[i] < 0;
      }
    }
  }
  const double fraction = double(outliers) / double(2 * n);
  EXPECT_GT(fraction, 0.008);
  EXPECT_LT(fraction, 0.012);
  EXPECT_GT(positive_outliers, outliers / 3);
  EXPECT_LT(positive_outliers, 2 * outliers / 3);
  EXPECT_GT(negative, (2 * n - outliers) / 3);

  // relayout copies the same values.
  const auto& op = op_of(stream_kind::triad);
  const auto copied = op.relayout(*a, a->shape());
  EXPECT_EQ(std::memcmp(pa.y(), typed(*copied).y(), n * sizeof(float)), 0);
  EXPECT_NE(pa.y(), typed(*copied).y());
}

TEST(StreamGate, AcceptsCorrectOutputsAndRejectsCorruptedOnes) {
  KSTUDY_REQUIRE_KOKKOS();  // host_outputs are Kokkos host Views
  for (const auto kind : k_kinds) {
    for (const std::int64_t n : {1, 3, 1023, 4097}) {
      const auto& op = op_of(kind);
      const auto problem = generate(kind, n);
      const auto reference = op.reference(*problem);
      kstudy::host_outputs out(op, problem->shape());
      const auto spans = out.spans();
      fill_correct(kind, typed(*problem), spans);
      const auto good = op.check(*problem, *reference, spans);
      EXPECT_TRUE(good.passed) << op.info().name << " n=" << n << ": " << good.message;
      EXPECT_EQ(good.checked, kind == stream_kind::dot ? 1 : n);
      EXPECT_LE(good.max_relative_error, good.rtol) << op.info().name;

      op.corrupt(*problem, spans);
      const auto bad = op.check(*problem, *reference, spans);
      EXPECT_FALSE(bad.passed) << op.info().name << " n=" << n;
      EXPECT_EQ(bad.value_failures, 1) << op.info().name << ": " << bad.message;
      EXPECT_NE(bad.message.find(kind == stream_kind::dot ? "d = " : "z[0]"), std::string::npos) << bad.message;
      EXPECT_NE(bad.message.find("bound"), std::string::npos) << bad.message;

      op.poison(spans);
      const auto poisoned = op.check(*problem, *reference, spans);
      EXPECT_FALSE(poisoned.passed) << op.info().name;
      EXPECT_EQ(poisoned.value_failures, kind == stream_kind::dot ? 1 : n) << op.info().name;
    }
  }
}

TEST(StreamGate, CopyIsBitwise) {
  KSTUDY_REQUIRE_KOKKOS();  // host_outputs are Kokkos host Views
  const auto& op = op_of(stream_kind::copy);
  const auto problem = generate(stream_kind::copy, 4099);
  const auto reference = op.reference(*problem);
  kstudy::host_outputs out(op, problem->shape());
  const auto spans = out.spans();
  fill_correct(stream_kind::copy, typed(*problem), spans);
  ASSERT_TRUE(op.check(*problem, *reference, spans).passed);
  // One flipped low bit in the middle: the smallest change a float can take.
  float* z = spans[0].as<float>();
  std::uint32_t bits;
  std::memcpy(&bits, &z[2048], sizeof bits);
  bits ^= 1u;
  std::memcpy(&z[2048], &bits, sizeof bits);
  const auto g = op.check(*problem, *reference, spans);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.value_failures, 1);
  EXPECT_EQ(g.rtol, 0.0);
  EXPECT_NE(g.message.find("z[2048]"), std::string::npos) << g.message;
}

TEST(StreamGate, ElementwiseBoundsAreTight) {
  KSTUDY_REQUIRE_KOKKOS();  // host_outputs are Kokkos host Views
  // An output one bound away passes; just past it fails (scale: u |ref|; triad: 2u (|x| + |q y|)).
  for (const auto kind : {stream_kind::scale, stream_kind::add, stream_kind::triad}) {
    const auto& op = op_of(kind);
    const auto problem = generate(kind, 257);
    const auto& p = typed(*problem);
    const auto reference = op.reference(*problem);
    kstudy::host_outputs out(op, problem->shape());
    const auto spans = out.spans();
    fill_correct(kind, p, spans);
    float* z = spans[0].as<float>();
    // Element 5: the float nearest ref + 0.9 bound, unless that exceeds the bound once rounded.
    const double x = p.x()[5], y = kind == stream_kind::scale ? 0.0 : p.y()[5], q = p.q();
    const double ref = kind == stream_kind::scale ? q * x : (kind == stream_kind::add ? x + y : x + q * y);
    const double scale = kind == stream_kind::triad ? std::fabs(x) + std::fabs(q * y) : std::fabs(ref);
    const auto g0 = op.check(*problem, *reference, spans);
    ASSERT_TRUE(g0.passed) << g0.message;
    const double bound = g0.rtol * scale;
    z[5] = static_cast<float>(ref + 3 * bound);
    const auto g1 = op.check(*problem, *reference, spans);
    EXPECT_FALSE(g1.passed) << op.info().name;
    EXPECT_NE(g1.message.find("z[5]"), std::string::npos) << g1.message;
  }
}

TEST(StreamGate, DotOffByThreeBoundsFails) {
  KSTUDY_REQUIRE_KOKKOS();  // host_outputs are Kokkos host Views
  const auto& op = op_of(stream_kind::dot);
  for (const std::int64_t n : {1, 1000, 1000003}) {
    const auto problem = generate(stream_kind::dot, n);
    const auto& p = typed(*problem);
    const auto reference = op.reference(*problem);
    double ref = 0.0, magnitude = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      ref += double(p.x()[i]) * double(p.y()[i]);
      magnitude += std::fabs(double(p.x()[i]) * double(p.y()[i]));
    }
    kstudy::host_outputs out(op, problem->shape());
    const auto spans = out.spans();
    double& d = *spans[0].as<double>();
    d = ref;
    const auto exact = op.check(*problem, *reference, spans);
    ASSERT_TRUE(exact.passed) << exact.message;
    // The gate's probabilistic bound (variants/reduce/operation.cpp, with the products' rounding as one
    // more term): u (8 sqrt(T + 1) + 1).
    const double terms = std::min(double(n - 1), 2.0 * 1048576 + std::ceil(std::log2(double(n)))) + 1;
    const double rtol = 0x1.0p-24 * (8 * std::sqrt(terms) + 1.0);
    EXPECT_DOUBLE_EQ(exact.rtol, rtol);
    EXPECT_EQ(exact.atol, 0.0);
    const double bound = rtol * magnitude;
    d = ref + 0.5 * bound;
    EXPECT_TRUE(op.check(*problem, *reference, spans).passed) << n;
    d = ref - 3 * bound;
    const auto g = op.check(*problem, *reference, spans);
    EXPECT_FALSE(g.passed) << n;
    EXPECT_NEAR(g.max_relative_error / rtol, 3.0, 1e-6);
    // Float accumulation in order stays inside the probabilistic bound.
    float f = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) f += p.x()[i] * p.y()[i];
    d = f;
    const auto serial = op.check(*problem, *reference, spans);
    EXPECT_TRUE(serial.passed) << serial.message;
  }
}

TEST(StreamGate, RejectsAnotherOperationsProblem) {
  const auto add_problem = generate(stream_kind::add, 16);
  const auto& triad = op_of(stream_kind::triad);
  EXPECT_THROW(triad.reference(*add_problem), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------------
// Every registered stream variant of this build

// The variants of the five STREAM operations (tunable ones only, if asked).
std::vector<std::string> stream_variant_ids(bool tunable_only = false) {
  return kstudy::test::variant_ids([&](const kstudy::variant_info& i) {
    for (const auto kind : k_kinds)
      if (i.operation == kstudy::stream::operation_name(kind)) return !tunable_only || i.tunable_block_size;
    return false;
  });
}
using kstudy::test::variant_test_name;

class StreamVariants : public kstudy::test::registered_variant_test {};

TEST_P(StreamVariants, PassesTheGateAtOddSizes) {
  for (const std::int64_t n : {std::int64_t(1), std::int64_t(3), std::int64_t(1023), std::int64_t(4097),
                               std::int64_t(1000003), (std::int64_t(1) << 20) + 3}) {
    kstudy::test::expect_gate_passes(op(), entry(), {n}, k_seed + std::uint64_t(n));
  }
}

TEST_P(StreamVariants, OneShotAndQueuedPathsPass) {
  kstudy::test::expect_one_shot_and_queued_paths_pass(op(), entry(), {4099}, k_seed);
}

TEST_P(StreamVariants, PoisonIsCaughtWhenNothingRuns) {
  const auto g = kstudy::test::poisoned_outputs_gate(op(), entry(), {129}, k_seed);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.value_failures, entry().info.operation == "stream_dot" ? 1 : 129);
}

TEST_P(StreamVariants, RejectsAnotherOperationsProblem) {
  const auto other = entry().info.operation == "stream_add" ? stream_kind::triad : stream_kind::add;
  const auto problem = generate(other, 64);
  auto impl = entry().make();
  EXPECT_THROW(impl->prepare(*problem, {}), std::invalid_argument);
}

// The variants that take a block size (the handwritten CUDA kernels; none in a CPU build).
class StreamTunableVariants : public StreamVariants {};

TEST_P(StreamTunableVariants, HonoursBlockSizes) {
  kstudy::point_inputs inputs(op(), {1000003}, 0, k_seed);
  for (const int block : {32, 96, 256, 1024}) {
    auto impl = entry().make();
    kstudy::run_options options;
    options.block_size = block;
    const auto g = kstudy::prepare_and_gate(*impl, entry(), inputs, options);
    EXPECT_TRUE(g.passed) << GetParam() << " block " << block << ": " << g.message;
  }
  auto impl = entry().make();
  kstudy::run_options bad;
  bad.block_size = 100;  // not a multiple of 32
  EXPECT_THROW(impl->prepare(inputs.data(table_layout::row_major), bad), std::invalid_argument);
}

TEST_P(StreamVariants, MetadataIsComplete) {
  const auto& info = entry().info;
  EXPECT_EQ(info.layout, table_layout::row_major);
  EXPECT_EQ(info.fusion, kstudy::fusion_level::full);
  EXPECT_FALSE(info.family.empty());
  EXPECT_FALSE(info.description.empty());
  ASSERT_TRUE(static_cast<bool>(info.traffic));
  const auto shape = op().shape({1 << 20}, table_layout::row_major, 0);
  EXPECT_EQ(info.traffic(shape).total(), op().essential_traffic(shape).total());
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StreamVariants);
INSTANTIATE_TEST_SUITE_P(Stream, StreamVariants, ::testing::ValuesIn(stream_variant_ids()), variant_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StreamTunableVariants);
INSTANTIATE_TEST_SUITE_P(Stream, StreamTunableVariants, ::testing::ValuesIn(stream_variant_ids(true)),
                         variant_test_name);

TEST(StreamVariantRegistry, KokkosFamiliesCoverEveryKind) {
  std::set<std::string> names;
  for (const auto& id : stream_variant_ids()) names.insert(kstudy::variant_registry::instance().find(id)->info.name);
  for (const auto kind : k_kinds) {
    const std::string prefix = kstudy::stream::short_name(kind);
    EXPECT_TRUE(names.count(prefix + "_kokkos")) << prefix;
    EXPECT_TRUE(names.count(prefix + "_kokkos_kernels")) << prefix;
    EXPECT_TRUE(names.count(prefix + (kind == stream_kind::dot ? "_kokkos_team_wave" : "_kokkos_float4"))) << prefix;
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
    EXPECT_TRUE(names.count(prefix + "_cuda")) << prefix;
    EXPECT_TRUE(names.count(prefix + "_cublas")) << prefix;
#endif
  }
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  EXPECT_TRUE(names.count("dot_cub"));
#endif
}

}  // namespace
