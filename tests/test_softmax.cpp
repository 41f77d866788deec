// The softmax operation (variants/softmax): registration, essential bytes and flops, the seeded generator
// (row classes that make the max subtraction matter), the gate (it accepts a float32 softmax and rejects
// outputs just past their bound and poison), and every registered softmax variant of this build against
// the reference at odd shapes. The CUDA variants exist only in the CUDA flavour; without a GPU they skip.
#include <gtest/gtest.h>

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
#include "softmax/softmax.hpp"

namespace {

using kstudy::operation;
using kstudy::table_layout;
using kstudy::softmax::softmax_data;

constexpr std::uint64_t k_seed = 20261130;

const operation& op() { return kstudy::test::registered_operation("softmax"); }

std::unique_ptr<kstudy::problem_data> generate(std::int64_t rows, std::int64_t cols, std::uint64_t seed = k_seed) {
  return op().generate(op().shape({rows, cols}, table_layout::row_major, 0), seed);
}

const softmax_data& typed(const kstudy::problem_data& p) { return dynamic_cast<const softmax_data&>(p); }

// What a plain float32 implementation computes: serial max, serial sum of expf, division.
void fill_correct(const softmax_data& p, float* y) {
  for (std::int64_t r = 0; r < p.rows(); ++r) {
    const float* x = p.x() + r * p.cols();
    float m = x[0];
    for (std::int64_t c = 1; c < p.cols(); ++c) m = std::max(m, x[c]);
    float s = 0.0f;
    for (std::int64_t c = 0; c < p.cols(); ++c) s += std::exp(x[c] - m);
    for (std::int64_t c = 0; c < p.cols(); ++c) y[r * p.cols() + c] = std::exp(x[c] - m) / s;
  }
}

TEST(SoftmaxOperation, RowsByColsRowMajor) {
  const auto& info = op().info();
  EXPECT_EQ(info.axes, (std::vector<std::string>{"rows", "cols"}));
  EXPECT_EQ(info.layouts, std::vector<table_layout>{table_layout::row_major});
  EXPECT_EQ(info.outputs, std::vector<std::string>{"y"});
  EXPECT_FALSE(info.bench_points.empty());
  const auto shape = op().shape({37, 4099}, table_layout::row_major, 0);
  EXPECT_EQ(shape.rows, 37);
  EXPECT_EQ(shape.features, 4099);
  EXPECT_THROW(op().shape({37, 4099}, table_layout::feature_major, 0), std::invalid_argument);
  EXPECT_THROW(op().shape({0, 4}, table_layout::row_major, 0), std::invalid_argument);
  EXPECT_EQ(op().output_bytes(shape), std::vector<std::int64_t>{37 * 4099 * 4});
}

TEST(SoftmaxOperation, EssentialBytesAndFlops) {
  const auto shape = op().shape({65536, 4096}, table_layout::row_major, 0);
  const std::int64_t n = std::int64_t(65536) * 4096;
  const auto t = op().essential_traffic(shape);
  EXPECT_EQ(t.bytes_read, 4 * n);
  EXPECT_EQ(t.bytes_written, 4 * n);
  EXPECT_EQ(op().essential_flops(shape), 5 * n);
  EXPECT_EQ(op().input_bytes(shape), 4 * n);
  // Per-row reference (4 doubles), not a matrix: 65,536 x 16,384 would otherwise need 8 GiB more.
  EXPECT_EQ(op().reference_bytes(shape), 4 * 8 * 65536);
}

TEST(SoftmaxOperation, GeneratorIsDeterministicWithRowClasses) {
  const std::int64_t rows = 4001, cols = 257;
  const auto a = generate(rows, cols), b = generate(rows, cols), c = generate(rows, cols, k_seed + 1);
  const auto& pa = typed(*a);
  EXPECT_EQ(std::memcmp(pa.x(), typed(*b).x(), rows * cols * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(pa.x(), typed(*c).x(), rows * cols * sizeof(float)), 0);
  // A row depends on (seed, row, col) alone: fewer rows are a prefix.
  const auto prefix = generate(100, cols);
  EXPECT_EQ(std::memcmp(pa.x(), typed(*prefix).x(), 100 * cols * sizeof(float)), 0);
  EXPECT_EQ(a->streamed_inputs().size(), 1u);

  std::int64_t overflowing = 0, underflowing = 0, huge = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = pa.x() + r * cols;
    float lo = x[0], hi = x[0];
    for (std::int64_t k = 0; k < cols; ++k) {
      ASSERT_TRUE(std::isfinite(x[k]));
      ASSERT_LT(std::fabs(x[k]), 8192.0f);
      ASSERT_EQ(std::ldexp(x[k], 10), std::round(std::ldexp(x[k], 10))) << "off the 2^-10 grid";
      lo = std::min(lo, x[k]);
      hi = std::max(hi, x[k]);
    }
    overflowing += hi > 88.8f;     // exp(max) overflows float without the max subtraction
    underflowing += hi < -104.0f;  // every exp(x) underflows to 0 without it
    huge += hi - lo > 1000.0f && hi > -1000.0f;
  }
  EXPECT_GT(overflowing, rows / 5);
  EXPECT_GT(underflowing, rows / 5);
  EXPECT_GT(huge, rows / 30);

  const auto copied = op().relayout(*a, a->shape());
  EXPECT_EQ(std::memcmp(pa.x(), typed(*copied).x(), rows * cols * sizeof(float)), 0);
  EXPECT_NE(pa.x(), typed(*copied).x());
}

TEST(SoftmaxGate, AcceptsFloatSoftmaxAndRejectsCorruptedOutputs) {
  KSTUDY_REQUIRE_KOKKOS();  // host_outputs are Kokkos host Views
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1, 1}, {1, 33}, {7, 1}, {37, 4099}, {257, 1031}, {3, 16384}}) {
    const auto problem = generate(rows, cols);
    const auto reference = op().reference(*problem);
    kstudy::host_outputs out(op(), problem->shape());
    const auto spans = out.spans();
    fill_correct(typed(*problem), spans[0].as<float>());
    const auto good = op().check(*problem, *reference, spans);
    EXPECT_TRUE(good.passed) << rows << "x" << cols << ": " << good.message;
    EXPECT_EQ(good.checked, rows * cols);
    EXPECT_EQ(good.atol, 0x1.0p-126);

    op().corrupt(*problem, spans);
    const auto bad = op().check(*problem, *reference, spans);
    EXPECT_FALSE(bad.passed) << rows << "x" << cols;
    EXPECT_EQ(bad.value_failures, 1) << bad.message;
    EXPECT_NE(bad.message.find("y[0, "), std::string::npos) << bad.message;
    EXPECT_NE(bad.message.find("bound"), std::string::npos) << bad.message;

    op().poison(spans);
    const auto poisoned = op().check(*problem, *reference, spans);
    EXPECT_FALSE(poisoned.passed);
    EXPECT_EQ(poisoned.value_failures, rows * cols);
  }
}

TEST(SoftmaxGate, OneColumnIsExactlyOne) {
  KSTUDY_REQUIRE_KOKKOS();
  const auto problem = generate(7, 1);
  const auto reference = op().reference(*problem);
  kstudy::host_outputs out(op(), problem->shape());
  float* y = out.spans()[0].as<float>();
  std::fill(y, y + 7, 1.0f);
  EXPECT_TRUE(op().check(*problem, *reference, out.spans()).passed);
  y[3] = std::nextafter(1.0f, 0.0f);  // one ulp below 1: within the bound of 16u
  EXPECT_TRUE(op().check(*problem, *reference, out.spans()).passed);
  y[3] = 0.999f;
  const auto g = op().check(*problem, *reference, out.spans());
  EXPECT_FALSE(g.passed);
  EXPECT_NE(g.message.find("y[3, 0]"), std::string::npos) << g.message;
}

TEST(SoftmaxGate, RejectsTheUnshiftedFormulaAndAMissingTerm) {
  KSTUDY_REQUIRE_KOKKOS();
  const std::int64_t rows = 64, cols = 1031;
  const auto problem = generate(rows, cols);
  const auto& p = typed(*problem);
  const auto reference = op().reference(*problem);
  kstudy::host_outputs out(op(), problem->shape());
  float* y = out.spans()[0].as<float>();
  // exp(x) / sum exp(x) without the max: overflow or 0 / 0 in the shifted rows.
  for (std::int64_t r = 0; r < rows; ++r) {
    float s = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) s += std::exp(p.x()[r * cols + c]);
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = std::exp(p.x()[r * cols + c]) / s;
  }
  EXPECT_FALSE(op().check(*problem, *reference, out.spans()).passed);
  // The sum short of its last term in every row (an off-by-one loop bound).
  fill_correct(p, y);
  ASSERT_TRUE(op().check(*problem, *reference, out.spans()).passed);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = p.x() + r * cols;
    const float m = *std::max_element(x, x + cols);
    float s = 0.0f;
    for (std::int64_t c = 0; c + 1 < cols; ++c) s += std::exp(x[c] - m);
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = std::exp(x[c] - m) / s;
  }
  EXPECT_FALSE(op().check(*problem, *reference, out.spans()).passed);
}

TEST(SoftmaxGate, RejectsAnotherOperationsProblem) {
  const auto* add = kstudy::operation_registry::instance().find("stream_add");
  ASSERT_NE(add, nullptr);
  const auto other = add->generate(add->shape({16}, table_layout::row_major, 0), k_seed);
  EXPECT_THROW(op().reference(*other), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------------
// Every registered softmax variant of this build

std::vector<std::string> softmax_variant_ids(bool tunable_only = false) {
  return kstudy::test::variant_ids([&](const kstudy::variant_info& i) {
    return i.operation == "softmax" && (!tunable_only || i.tunable_block_size);
  });
}
using kstudy::test::variant_test_name;

class SoftmaxVariants : public kstudy::test::registered_variant_test {};

TEST_P(SoftmaxVariants, PassesTheGateAtOddShapes) {
  // 1 x 1, one short row, a column, rows not multiples of the block or of 4 columns (scalar paths; on the lean
  // CUDA rung, rows starting at every offset from a 16-byte boundary with a head and a tail to peel, the shortest
  // it peels, peeled rows of 16 floats a thread in groups of 512 and 1,024 (the two it spills a register for), and
  // one past its register cap), a register-resident long row and, on the serial/OpenMP team of one, the two-pass
  // path.
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes{{1, 1},     {1, 33},     {7, 1},     {6, 9},
                                                                  {37, 4099}, {257, 1031}, {11, 8191}, {5, 16383},
                                                                  {3, 16384}, {129, 128},  {5, 33000}};
  for (const auto& [rows, cols] : shapes) {
    kstudy::test::expect_gate_passes(op(), entry(), {rows, cols}, k_seed + std::uint64_t(rows * cols));
  }
}

TEST_P(SoftmaxVariants, OneShotAndQueuedPathsPass) {
  kstudy::test::expect_one_shot_and_queued_paths_pass(op(), entry(), {33, 1029}, k_seed);
}

TEST_P(SoftmaxVariants, PoisonIsCaughtWhenNothingRuns) {
  const auto g = kstudy::test::poisoned_outputs_gate(op(), entry(), {9, 129}, k_seed);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.value_failures, 9 * 129);
}

TEST_P(SoftmaxVariants, RejectsAnotherOperationsProblem) {
  const auto* add = kstudy::operation_registry::instance().find("stream_add");
  ASSERT_NE(add, nullptr);
  const auto other = add->generate(add->shape({64}, table_layout::row_major, 0), k_seed);
  auto impl = entry().make();
  EXPECT_THROW(impl->prepare(*other, {}), std::invalid_argument);
}

TEST_P(SoftmaxVariants, MetadataIsComplete) {
  const auto& info = entry().info;
  EXPECT_EQ(info.layout, table_layout::row_major);
  EXPECT_EQ(info.fusion, kstudy::fusion_level::full);
  EXPECT_FALSE(info.family.empty());
  EXPECT_FALSE(info.description.empty());
  EXPECT_EQ(info.kernels_launched, 1);
  ASSERT_TRUE(static_cast<bool>(info.traffic));
  const auto shape = op().shape({65536, 4096}, table_layout::row_major, 0);
  EXPECT_EQ(info.traffic(shape).total(), op().essential_traffic(shape).total());
  if (info.family == "softmax_cuda") {
    EXPECT_GE(info.rung, 1);
  }
}

class SoftmaxTunableVariants : public SoftmaxVariants {};

TEST_P(SoftmaxTunableVariants, HonoursBlockSizes) {
  kstudy::point_inputs inputs(op(), {37, 4099}, 0, k_seed);
  for (const int block : {32, 96, 256, 1024}) {
    auto impl = entry().make();
    kstudy::run_options options;
    options.block_size = block;
    const auto g = kstudy::prepare_and_gate(*impl, entry(), inputs, options);
    EXPECT_TRUE(g.passed) << GetParam() << " block " << block << ": " << g.message;
  }
  auto impl = entry().make();
  kstudy::run_options bad;
  bad.block_size = 100;
  EXPECT_THROW(impl->prepare(inputs.data(table_layout::row_major), bad), std::invalid_argument);
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SoftmaxVariants);
INSTANTIATE_TEST_SUITE_P(Softmax, SoftmaxVariants, ::testing::ValuesIn(softmax_variant_ids()), variant_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SoftmaxTunableVariants);
INSTANTIATE_TEST_SUITE_P(Softmax, SoftmaxTunableVariants, ::testing::ValuesIn(softmax_variant_ids(true)),
                         variant_test_name);

// The tuned Kokkos variant on every path it plans (variants/detail/kokkos_rows.hpp): rows of quads (cols %
// 4 == 0) and of single floats, a quad or a lane partly past the row's end, teams whose last rows are missing
// (7, 13 rows), and rows it streams. On a host: rows of up to 32 columns in one lane's registers, longer ones
// streamed; on a GPU: a warp per row up to 1,024 columns, a team per row up to 16,384, streamed beyond.
std::vector<std::string> softmax_tuned_ids() {
  return kstudy::test::variant_ids([](const kstudy::variant_info& i) { return i.name == "softmax_kokkos_tuned"; });
}

class SoftmaxTunedVariant : public kstudy::test::registered_variant_test {};

TEST_P(SoftmaxTunedVariant, PassesTheGateOnEveryPath) {
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{3, 1},
                                                                                     {7, 3},
                                                                                     {9, 8},
                                                                                     {13, 16},
                                                                                     {5, 32},
                                                                                     {2, 33},
                                                                                     {3, 36},
                                                                                     {13, 100},
                                                                                     {4, 1024},
                                                                                     {3, 1025},
                                                                                     {2, 1028},
                                                                                     {2, 4096},
                                                                                     {2, 4097},
                                                                                     {1, 16384},
                                                                                     {1, 16388},
                                                                                     {1, 20000},
                                                                                     {2, 20004}}) {
    kstudy::test::expect_gate_passes(op(), entry(), {rows, cols}, k_seed + std::uint64_t(rows * 7919 + cols));
  }
}

TEST_P(SoftmaxTunedVariant, IsRungOneOfTheKokkosFamily) {
  EXPECT_EQ(entry().info.family, "softmax_kokkos");
  EXPECT_EQ(entry().info.rung, 1);
  EXPECT_EQ(entry().info.implementation, kstudy::implementation::kokkos);
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SoftmaxTunedVariant);
INSTANTIATE_TEST_SUITE_P(Softmax, SoftmaxTunedVariant, ::testing::ValuesIn(softmax_tuned_ids()), variant_test_name);

TEST(SoftmaxVariantRegistry, LadderAndPortableVersionAreRegistered) {
  std::set<std::string> names;
  for (const auto& id : softmax_variant_ids()) names.insert(kstudy::variant_registry::instance().find(id)->info.name);
  EXPECT_TRUE(names.count("softmax_kokkos"));
  EXPECT_TRUE(names.count("softmax_kokkos_tuned"));
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  for (const auto* name :
       {"softmax_cuda_three_pass", "softmax_cuda_online", "softmax_cuda_registers", "softmax_cuda_lean"})
    EXPECT_TRUE(names.count(name)) << name;
#endif
#ifdef KSTUDY_HAVE_CUDNN
  EXPECT_TRUE(names.count("softmax_cudnn"));
#endif
}

}  // namespace
