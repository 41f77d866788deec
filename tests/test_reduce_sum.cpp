// reduce_sum (variants/reduce): registration, essential bytes, the seeded generator, the gate's tolerance
// model (it accepts correct sums in float64 and in float32 in any order, rejects sums just past the bound,
// poison and a dropped element at small n), and every registered reduce_sum variant of this build against
// the reference at odd sizes. The CUDA variants exist only in the CUDA flavour; without a GPU they skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>

#include "detail/kokkos_float4.hpp"
#include "escape_families.hpp"
#include "kokkos_test_support.hpp"
#include "kstudy/host_io.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/variant.hpp"
#include "reduce/reduce_sum.hpp"

namespace {

using kstudy::operation;
using kstudy::table_layout;
using kstudy::reduce::reduce_data;

constexpr std::uint64_t k_seed = 20261130;

const operation& op() { return kstudy::test::registered_operation("reduce_sum"); }

std::unique_ptr<kstudy::problem_data> generate(std::int64_t n, std::uint64_t seed = k_seed) {
  return op().generate(op().shape({n}, table_layout::row_major, 0), seed);
}

const reduce_data& typed(const kstudy::problem_data& p) { return dynamic_cast<const reduce_data&>(p); }

// The gate's probabilistic bound (variants/reduce/operation.cpp): u (8 sqrt(T) + 1), T the rounding terms.
double rtol(std::int64_t n) {
  const double terms = std::min(double(n - 1), 2.0 * 1048576 + std::ceil(std::log2(double(n))));
  return 0x1.0p-24 * (8 * std::sqrt(terms) + 1.0);
}

TEST(ReduceSumOperation, OneAxisOneDoubleOutput) {
  const auto& info = op().info();
  EXPECT_EQ(info.axes, std::vector<std::string>{"n"});
  EXPECT_EQ(info.layouts, std::vector<table_layout>{table_layout::row_major});
  EXPECT_EQ(info.outputs, std::vector<std::string>{"s"});
  EXPECT_FALSE(info.bench_points.empty());
  EXPECT_EQ(kstudy::test::escape_families(info.name), (std::set<std::string>{"reduce_cuda", "cub"}));
  const auto shape = op().shape({1000}, table_layout::row_major, 0);
  EXPECT_EQ(shape.rows, 1000);
  EXPECT_EQ(shape.features, 1);
  EXPECT_THROW(op().shape({1000}, table_layout::feature_major, 0), std::invalid_argument);
  EXPECT_THROW(op().shape({0}, table_layout::row_major, 0), std::invalid_argument);
  EXPECT_EQ(op().output_bytes(shape), std::vector<std::int64_t>{8});
}

TEST(ReduceSumOperation, EssentialBytesAndFlops) {
  const std::int64_t n = std::int64_t(1) << 28;
  const auto shape = op().shape({n}, table_layout::row_major, 0);
  const auto t = op().essential_traffic(shape);
  EXPECT_EQ(t.bytes_read, 4 * n);  // n floats read once
  EXPECT_EQ(t.bytes_written, 8);
  EXPECT_EQ(op().essential_flops(shape), n);
  EXPECT_EQ(op().input_bytes(shape), 4 * n);
  EXPECT_GT(op().reference_bytes(shape), 0);
  EXPECT_LT(op().reference_bytes(shape), n / 1000);
}

TEST(ReduceSumOperation, GeneratorIsDeterministicAndNonnegative) {
  const std::int64_t n = 200003;
  const auto a = generate(n), b = generate(n), c = generate(n, k_seed + 1);
  EXPECT_EQ(std::memcmp(typed(*a).x(), typed(*b).x(), n * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(typed(*a).x(), typed(*c).x(), n * sizeof(float)), 0);
  const auto prefix = generate(1000);  // a value depends on its index alone
  EXPECT_EQ(std::memcmp(typed(*a).x(), typed(*prefix).x(), 1000 * sizeof(float)), 0);
  ASSERT_EQ(a->streamed_inputs().size(), 1u);
  EXPECT_EQ(a->streamed_inputs()[0].bytes, 4 * n);
  // Uniform in [0, 2): a sum that does not cancel (mean 1), so its gate sees a lost share of the terms.
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = typed(*a).x()[i];
    ASSERT_GE(v, 0.0f) << i;
    ASSERT_LT(v, 2.0f) << i;
    sum += v;
  }
  EXPECT_NEAR(sum / double(n), 1.0, 0.01);
  const auto copied = op().relayout(*a, a->shape());
  EXPECT_EQ(std::memcmp(typed(*a).x(), typed(*copied).x(), n * sizeof(float)), 0);
  EXPECT_NE(typed(*a).x(), typed(*copied).x());
}

TEST(ReduceSumGate, BoundScalesWithN) {
  KSTUDY_REQUIRE_KOKKOS();  // host_outputs are Kokkos host Views
  for (const std::int64_t n : {1, 1000, 4099, 1000003}) {
    const auto problem = generate(n);
    const auto& p = typed(*problem);
    const auto reference = op().reference(*problem);
    double ref = 0.0, magnitude = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      ref += p.x()[i];
      magnitude += std::fabs(double(p.x()[i]));
    }
    kstudy::host_outputs out(op(), problem->shape());
    const auto spans = out.spans();
    double& s = *spans[0].as<double>();
    s = ref;
    const auto exact = op().check(*problem, *reference, spans);
    ASSERT_TRUE(exact.passed) << exact.message;
    EXPECT_DOUBLE_EQ(exact.rtol, rtol(n));
    EXPECT_EQ(exact.atol, 0.0);
    EXPECT_EQ(exact.checked, 1);
    const double bound = rtol(n) * magnitude;
    s = ref + 0.9 * bound;
    EXPECT_TRUE(op().check(*problem, *reference, spans).passed) << n;
    s = ref - 1.1 * bound;
    const auto g = op().check(*problem, *reference, spans);
    EXPECT_FALSE(g.passed) << n;
    EXPECT_EQ(g.value_failures, 1);
    EXPECT_NE(g.message.find("s = "), std::string::npos) << g.message;
    EXPECT_NE(g.message.find("bound"), std::string::npos) << g.message;
    // Float32 accumulation, in order and in pairs (a tree), stays inside the bound.
    float serial = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) serial += p.x()[i];
    s = serial;
    EXPECT_TRUE(op().check(*problem, *reference, spans).passed) << "serial float at n=" << n;
    std::vector<float> level(p.x(), p.x() + n);
    while (level.size() > 1) {
      std::vector<float> next((level.size() + 1) / 2);
      for (std::size_t i = 0; i < next.size(); ++i)
        next[i] = level[2 * i] + (2 * i + 1 < level.size() ? level[2 * i + 1] : 0.0f);
      level.swap(next);
    }
    s = level[0];
    EXPECT_TRUE(op().check(*problem, *reference, spans).passed) << "pairwise float at n=" << n;

    // corrupt() moves a correct s just past the bound; poison fails.
    s = ref;
    op().corrupt(*problem, spans);
    EXPECT_FALSE(op().check(*problem, *reference, spans).passed) << n;
    EXPECT_LT(std::fabs(s - ref), 3 * bound + 1e-300) << "corrupt moved s further than needed";
    op().poison(spans);
    EXPECT_FALSE(op().check(*problem, *reference, spans).passed) << n;
  }
}

TEST(ReduceSumGate, DroppedElementFailsAtSmallN) {
  KSTUDY_REQUIRE_KOKKOS();
  const std::int64_t n = 4099;
  const auto problem = generate(n);
  const auto& p = typed(*problem);
  const auto reference = op().reference(*problem);
  kstudy::host_outputs out(op(), problem->shape());
  const auto spans = out.spans();
  // Drop the largest element (the one a variant that skips an element at a tail or edge might lose).
  std::int64_t largest = 0;
  double ref = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    ref += p.x()[i];
    if (std::fabs(p.x()[i]) > std::fabs(p.x()[largest])) largest = i;
  }
  *spans[0].as<double>() = ref - p.x()[largest];
  EXPECT_FALSE(op().check(*problem, *reference, spans).passed);
  // The last element only (a missed scalar tail): a typical one at this n.
  *spans[0].as<double>() = ref - p.x()[n - 1];
  if (std::fabs(p.x()[n - 1]) > 0.2) {
    EXPECT_FALSE(op().check(*problem, *reference, spans).passed);
  }
}

TEST(ReduceSumGate, RejectsAnotherOperationsProblem) {
  const auto* dot = kstudy::operation_registry::instance().find("stream_dot");
  ASSERT_NE(dot, nullptr);
  const auto other = dot->generate(dot->shape({16}, table_layout::row_major, 0), k_seed);
  EXPECT_THROW(op().reference(*other), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------------
// The tuned reduction's pieces (detail/kokkos_float4.hpp), which reduce_sum_kokkos_team_wave and
// dot_kokkos_team_wave share: the thread shares cover every element once for any thread count, on either
// split and on the scalar fallback (data not readable as quads), and one parallel_reduce sums them.

// Small integers (1..251): every partial sum is exact in float, so a share counted twice or missed shows.
std::vector<float> small_integers(std::int64_t n) {
  std::vector<float> x(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = float(i % 251 + 1);
  return x;
}

double exact_sum(const std::vector<float>& x) { return std::accumulate(x.begin(), x.end(), 0.0); }

struct pointer_terms {
  const float* x;
  KOKKOS_INLINE_FUNCTION kstudy::detail::float4_t quad(std::int64_t q) const {
    return {x[4 * q], x[4 * q + 1], x[4 * q + 2], x[4 * q + 3]};
  }
  KOKKOS_INLINE_FUNCTION float one(std::int64_t i) const { return x[i]; }
};

template <bool Contiguous>
double summed_by_threads(const std::vector<float>& x, std::int64_t quads, std::int64_t threads) {
  const pointer_terms terms{x.data()};
  double total = 0.0;
  for (std::int64_t t = 0; t < threads; ++t)
    total += kstudy::detail::thread_sum<Contiguous>(terms, quads, std::int64_t(x.size()), t, threads);
  return total;
}

TEST(ReduceSumTeamWave, ThreadSharesCoverEveryElementOnce) {
  for (const std::int64_t n : {1, 3, 4, 5, 17, 4097, 100003}) {
    const auto x = small_integers(n);
    const double expected = exact_sum(x);
    for (const std::int64_t threads : {1, 2, 3, 7, 64, 1000}) {
      for (const std::int64_t quads : {n / 4, std::int64_t(0)}) {
        EXPECT_EQ(summed_by_threads<true>(x, quads, threads), expected) << n << " " << threads << " " << quads;
        EXPECT_EQ(summed_by_threads<false>(x, quads, threads), expected) << n << " " << threads << " " << quads;
      }
    }
  }
  // One thread's share of 2^20 + 1 quads: many folds of the float sums, and a short last step.
  const auto x = small_integers((std::int64_t(1) << 22) + 7);
  EXPECT_EQ(summed_by_threads<true>(x, std::int64_t(x.size()) / 4, 1), exact_sum(x));
}

template <class Floats>
struct view_terms {
  Kokkos::View<const kstudy::detail::float4_t*, typename Floats::device_type, kstudy::detail::quad_traits> x4;
  Floats x;
  KOKKOS_INLINE_FUNCTION kstudy::detail::float4_t quad(std::int64_t q) const { return x4(q); }
  KOKKOS_INLINE_FUNCTION float one(std::int64_t i) const { return x(i); }
};

TEST(ReduceSumTeamWave, OneParallelReduceOverQuadsOrScalars) {
  KSTUDY_REQUIRE_KOKKOS();
  using space = Kokkos::DefaultHostExecutionSpace;
  for (const std::int64_t n : {1, 6, 4099, 100003}) {
    const auto values = small_integers(n);
    Kokkos::View<float*, Kokkos::HostSpace> x("x", static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) x(i) = values[static_cast<std::size_t>(i)];
    ASSERT_TRUE(kstudy::detail::quad_aligned(x));
    const Kokkos::View<const float*, Kokkos::HostSpace> cx = x;
    Kokkos::View<double, Kokkos::HostSpace> s("s");
    for (const std::int64_t quads : {n / 4, std::int64_t(0)}) {
      const view_terms<Kokkos::View<const float*, Kokkos::HostSpace>> terms{kstudy::detail::quads_of(cx, quads), cx};
      s() = -1.0;
      kstudy::detail::queue_team_wave_sum("kstudy::test_team_wave", space(), terms, quads, n, s);
      space().fence();
      EXPECT_EQ(s(), exact_sum(values)) << n << " " << quads;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Every registered reduce_sum variant of this build

std::vector<std::string> reduce_variant_ids() {
  return kstudy::test::variant_ids([](const kstudy::variant_info& i) { return i.operation == "reduce_sum"; });
}

class ReduceSumVariants : public kstudy::test::registered_variant_test {};

TEST_P(ReduceSumVariants, PassesTheGateAtOddSizes) {
  for (const std::int64_t n :
       {std::int64_t(1), std::int64_t(3), std::int64_t(4097), std::int64_t(4099), (std::int64_t(1) << 20) + 3}) {
    kstudy::test::expect_gate_passes(op(), entry(), {n}, k_seed + std::uint64_t(n));
  }
}

TEST_P(ReduceSumVariants, RepeatedAndQueuedRunsPass) {
  // Rungs that accumulate into s with atomics must reset it every run: run twice, then queued.
  kstudy::point_inputs inputs(op(), {4099}, 0, k_seed);
  const auto& data = inputs.data(table_layout::row_major);
  auto impl = entry().make();
  impl->prepare(data, {});
  const kstudy::host_inputs in(data, kstudy::host_memory::pageable);
  kstudy::host_outputs out(op(), data.shape());
  for (int round = 0; round < 2; ++round) {
    impl->poison();
    op().poison(out.spans());
    impl->upload(in.spans());
    impl->run();
    impl->run();
    impl->download(out.spans());
    const auto g = op().check(data, inputs.reference(), out.spans());
    EXPECT_TRUE(g.passed) << GetParam() << " round " << round << ": " << g.message;
  }
  impl->poison();
  impl->enqueue_run();
  impl->wait();
  impl->download(out.spans());
  const auto g = op().check(data, inputs.reference(), out.spans());
  EXPECT_TRUE(g.passed) << GetParam() << " queued: " << g.message;
}

TEST_P(ReduceSumVariants, PoisonIsCaughtWhenNothingRuns) {
  EXPECT_FALSE(kstudy::test::poisoned_outputs_gate(op(), entry(), {129}, k_seed).passed);
}

TEST_P(ReduceSumVariants, RejectsAnotherOperationsProblem) {
  const auto* dot = kstudy::operation_registry::instance().find("stream_dot");
  ASSERT_NE(dot, nullptr);
  const auto other = dot->generate(dot->shape({64}, table_layout::row_major, 0), k_seed);
  auto impl = entry().make();
  EXPECT_THROW(impl->prepare(*other, {}), std::invalid_argument);
}

TEST_P(ReduceSumVariants, MetadataIsComplete) {
  const auto& info = entry().info;
  EXPECT_EQ(info.layout, table_layout::row_major);
  EXPECT_FALSE(info.family.empty());
  EXPECT_FALSE(info.description.empty());
  EXPECT_EQ(info.name.rfind("reduce_sum_", 0), 0u) << info.name;
  ASSERT_TRUE(static_cast<bool>(info.traffic));
  const auto shape = op().shape({1 << 20}, table_layout::row_major, 0);
  EXPECT_EQ(info.traffic(shape).total(), op().essential_traffic(shape).total());
  // Ladder rungs are the handwritten CUDA family only; the portable and vendor variants are not rungs.
  if (info.family == "reduce_cuda") {
    EXPECT_GE(info.rung, 1);
    EXPECT_LE(info.rung, 4);
  } else if (info.family == "reduce_kokkos_tuned") {
    EXPECT_EQ(info.rung, 1);  // the portable ladder's tuned rung
  } else {
    EXPECT_EQ(info.rung, 0);
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReduceSumVariants);
INSTANTIATE_TEST_SUITE_P(ReduceSum, ReduceSumVariants, ::testing::ValuesIn(reduce_variant_ids()),
                         kstudy::test::variant_test_name);

TEST(ReduceSumVariantRegistry, FamiliesAndRungs) {
  std::set<std::string> names;
  std::set<int> rungs;
  for (const auto& id : reduce_variant_ids()) {
    const auto& info = kstudy::variant_registry::instance().find(id)->info;
    names.insert(info.name);
    if (info.rung > 0 && info.implementation != kstudy::implementation::kokkos) {  // the handwritten ladder
      EXPECT_TRUE(rungs.insert(info.rung).second) << "rung " << info.rung << " twice";
    }
  }
  EXPECT_TRUE(names.count("reduce_sum_kokkos"));
  EXPECT_TRUE(names.count("reduce_sum_kokkos_strided"));
  EXPECT_TRUE(names.count("reduce_sum_kokkos_team_wave"));
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  for (const char* name : {"reduce_sum_atomic", "reduce_sum_block_tree", "reduce_sum_warp_shuffle",
                           "reduce_sum_float4_wave", "reduce_sum_cub"})
    EXPECT_TRUE(names.count(name)) << name;
  EXPECT_EQ(rungs, (std::set<int>{1, 2, 3, 4}));
#else
  EXPECT_TRUE(rungs.empty());
#endif
}

}  // namespace
