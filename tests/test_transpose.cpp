// transpose (variants/transpose): registration, essential bytes, the seeded generator, the bitwise gate
// (it accepts x^T, rejects one flipped bit, a swapped pair, poison and a plain copy), and every registered
// transpose variant of this build against the reference at odd shapes (one row, one column, shapes not
// multiples of 32, of 64 or of the vector width). The CUDA variants exist only in the CUDA flavour; without
// a GPU they skip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "escape_families.hpp"
#include "kokkos_test_support.hpp"
#include "kstudy/host_io.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/variant.hpp"
#include "transpose/transpose.hpp"

namespace {

using kstudy::operation;
using kstudy::table_layout;
using kstudy::transpose::transpose_data;

constexpr std::uint64_t k_seed = 20261130;

const operation& op() { return kstudy::test::registered_operation("transpose"); }

std::unique_ptr<kstudy::problem_data> generate(std::int64_t rows, std::int64_t cols, std::uint64_t seed = k_seed) {
  return op().generate(op().shape({rows, cols}, table_layout::row_major, 0), seed);
}

const transpose_data& typed(const kstudy::problem_data& p) { return dynamic_cast<const transpose_data&>(p); }

void fill_correct(const transpose_data& p, float* t) {
  for (std::int64_t r = 0; r < p.rows(); ++r)
    for (std::int64_t c = 0; c < p.cols(); ++c) t[c * p.rows() + r] = p.x()[r * p.cols() + c];
}

void flip_low_bit(float& v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits ^= 1u;
  std::memcpy(&v, &bits, sizeof bits);
}

TEST(TransposeOperation, TwoAxesRowMajor) {
  const auto& info = op().info();
  EXPECT_EQ(info.axes, (std::vector<std::string>{"rows", "cols"}));
  EXPECT_EQ(info.layouts, std::vector<table_layout>{table_layout::row_major});
  EXPECT_EQ(info.outputs, std::vector<std::string>{"t"});
  EXPECT_EQ(kstudy::test::escape_families(info.name), (std::set<std::string>{"transpose_cuda", "cublas"}));
  const auto shape = op().shape({37, 5}, table_layout::row_major, 0);
  EXPECT_EQ(shape.rows, 37);
  EXPECT_EQ(shape.features, 5);
  EXPECT_THROW(op().shape({37}, table_layout::row_major, 0), std::invalid_argument);
  EXPECT_THROW(op().shape({37, 0}, table_layout::row_major, 0), std::invalid_argument);
  EXPECT_THROW(op().shape({37, 5}, table_layout::feature_major, 0), std::invalid_argument);
  EXPECT_EQ(op().output_bytes(shape), std::vector<std::int64_t>{4 * 37 * 5});
}

TEST(TransposeOperation, EssentialBytesReadOnceWriteOnce) {
  const auto shape = op().shape({8191, 3001}, table_layout::row_major, 0);
  const auto t = op().essential_traffic(shape);
  EXPECT_EQ(t.bytes_read, 4 * 8191 * 3001);
  EXPECT_EQ(t.bytes_written, 4 * 8191 * 3001);
  EXPECT_EQ(op().essential_flops(shape), 0);
  EXPECT_EQ(op().input_bytes(shape), 4 * 8191 * 3001);
  EXPECT_EQ(op().reference_bytes(shape), 0);
}

TEST(TransposeOperation, GeneratorIsDeterministic) {
  const auto a = generate(257, 1031), b = generate(257, 1031), c = generate(257, 1031, k_seed + 1);
  const std::size_t bytes = 257 * 1031 * sizeof(float);
  EXPECT_EQ(std::memcmp(typed(*a).x(), typed(*b).x(), bytes), 0);
  EXPECT_NE(std::memcmp(typed(*a).x(), typed(*c).x(), bytes), 0);
  // A value depends on its flat index alone: a 1 x 1031 problem is the first row.
  const auto row = generate(1, 1031);
  EXPECT_EQ(std::memcmp(typed(*a).x(), typed(*row).x(), 1031 * sizeof(float)), 0);
  std::set<float> distinct(typed(*a).x(), typed(*a).x() + 257 * 1031);
  EXPECT_GT(distinct.size(), 257u * 1031u * 99 / 100);  // a misplaced element is almost surely visible
  for (std::int64_t i = 0; i < 257 * 1031; ++i) ASSERT_TRUE(std::isfinite(typed(*a).x()[i]));
  const auto copied = op().relayout(*a, a->shape());
  EXPECT_EQ(std::memcmp(typed(*a).x(), typed(*copied).x(), bytes), 0);
  EXPECT_THROW(op().relayout(*a, op().shape({1031, 257}, table_layout::row_major, 0)), std::invalid_argument);
}

TEST(TransposeGate, BitwiseExact) {
  KSTUDY_REQUIRE_KOKKOS();  // host_outputs are Kokkos host Views
  for (const auto& [rows, cols] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {1, 37}, {37, 1}, {33, 65}, {257, 1031}}) {
    const auto problem = generate(rows, cols);
    const auto& p = typed(*problem);
    const auto reference = op().reference(*problem);
    kstudy::host_outputs out(op(), problem->shape());
    const auto spans = out.spans();
    float* t = spans[0].as<float>();
    fill_correct(p, t);
    const auto good = op().check(*problem, *reference, spans);
    EXPECT_TRUE(good.passed) << rows << "x" << cols << ": " << good.message;
    EXPECT_EQ(good.checked, rows * cols);
    EXPECT_EQ(good.rtol, 0.0);
    EXPECT_EQ(good.atol, 0.0);

    op().corrupt(*problem, spans);
    const auto bad = op().check(*problem, *reference, spans);
    EXPECT_FALSE(bad.passed) << rows << "x" << cols;
    EXPECT_EQ(bad.value_failures, 1);
    EXPECT_NE(bad.message.find("t(0, 0)"), std::string::npos) << bad.message;

    // One flipped low bit in the last element.
    fill_correct(p, t);
    flip_low_bit(t[rows * cols - 1]);
    const auto last = op().check(*problem, *reference, spans);
    EXPECT_FALSE(last.passed);
    EXPECT_EQ(last.value_failures, 1);
    EXPECT_NE(last.message.find("t[" + std::to_string(rows * cols - 1) + "]"), std::string::npos) << last.message;

    op().poison(spans);
    const auto poisoned = op().check(*problem, *reference, spans);
    EXPECT_FALSE(poisoned.passed);
    EXPECT_EQ(poisoned.value_failures, rows * cols);
  }
}

TEST(TransposeGate, RejectsSwapsAndAPlainCopy) {
  KSTUDY_REQUIRE_KOKKOS();
  const auto problem = generate(33, 65);
  const auto& p = typed(*problem);
  const auto reference = op().reference(*problem);
  kstudy::host_outputs out(op(), problem->shape());
  const auto spans = out.spans();
  float* t = spans[0].as<float>();
  fill_correct(p, t);
  std::swap(t[100], t[101]);  // two neighbours exchanged (an off-by-one in a tile)
  EXPECT_EQ(op().check(*problem, *reference, spans).value_failures, 2);
  std::memcpy(t, p.x(), 33 * 65 * sizeof(float));  // x copied, not transposed
  const auto copy = op().check(*problem, *reference, spans);
  EXPECT_FALSE(copy.passed);
  EXPECT_GT(copy.value_failures, 33 * 65 / 2);
}

TEST(TransposeGate, RejectsAnotherOperationsProblem) {
  const auto* sum = kstudy::operation_registry::instance().find("reduce_sum");
  ASSERT_NE(sum, nullptr);
  const auto other = sum->generate(sum->shape({16}, table_layout::row_major, 0), k_seed);
  EXPECT_THROW(op().reference(*other), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------------
// Every registered transpose variant of this build

std::vector<std::string> transpose_variant_ids() {
  return kstudy::test::variant_ids([](const kstudy::variant_info& i) { return i.operation == "transpose"; });
}

class TransposeVariants : public kstudy::test::registered_variant_test {};

TEST_P(TransposeVariants, PassesTheGateAtOddShapes) {
  // One element, one row, one column, not multiples of 32 / 64, odd and even (vector widths 1, 2, 4 on
  // either side: quads on one side only at 1000 x 7 and 7 x 1000, on both with partial edge tiles at
  // 132 x 68), more tile rows than one grid's y extent would need for the naive rung at 70,001 rows.
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
      {1, 1},    {1, 37},   {37, 1},   {33, 65},  {257, 1031}, {1000, 8}, {8, 1000},
      {1000, 7}, {7, 1000}, {132, 68}, {66, 130}, {64, 128},   {70001, 3}};
  for (const auto& [rows, cols] : shapes) {
    kstudy::test::expect_gate_passes(op(), entry(), {rows, cols}, k_seed + std::uint64_t(rows * 7 + cols));
  }
}

TEST_P(TransposeVariants, OneShotAndQueuedPathsPass) {
  kstudy::test::expect_one_shot_and_queued_paths_pass(op(), entry(), {129, 67}, k_seed);
}

TEST_P(TransposeVariants, PoisonIsCaughtWhenNothingRuns) {
  EXPECT_EQ(kstudy::test::poisoned_outputs_gate(op(), entry(), {33, 5}, k_seed).value_failures, 33 * 5);
}

TEST_P(TransposeVariants, RejectsAnotherOperationsProblem) {
  const auto* sum = kstudy::operation_registry::instance().find("reduce_sum");
  ASSERT_NE(sum, nullptr);
  const auto other = sum->generate(sum->shape({64}, table_layout::row_major, 0), k_seed);
  auto impl = entry().make();
  EXPECT_THROW(impl->prepare(*other, {}), std::invalid_argument);
}

TEST_P(TransposeVariants, MetadataIsComplete) {
  const auto& info = entry().info;
  EXPECT_EQ(info.layout, table_layout::row_major);
  EXPECT_FALSE(info.family.empty());
  EXPECT_FALSE(info.description.empty());
  EXPECT_EQ(info.name.rfind("transpose_", 0), 0u) << info.name;
  ASSERT_TRUE(static_cast<bool>(info.traffic));
  const auto shape = op().shape({8191, 3001}, table_layout::row_major, 0);
  EXPECT_EQ(info.traffic(shape).total(), op().essential_traffic(shape).total());
  if (info.family == "transpose_cuda") {
    EXPECT_GE(info.rung, 1);
    EXPECT_LE(info.rung, 4);
  } else if (info.family == "transpose_kokkos_tuned") {
    EXPECT_EQ(info.rung, 1);  // the portable ladder's tuned rung
  } else {
    EXPECT_EQ(info.rung, 0);
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransposeVariants);
INSTANTIATE_TEST_SUITE_P(Transpose, TransposeVariants, ::testing::ValuesIn(transpose_variant_ids()),
                         kstudy::test::variant_test_name);

TEST(TransposeVariantRegistry, FamiliesAndRungs) {
  std::set<std::string> names;
  std::set<int> rungs;
  for (const auto& id : transpose_variant_ids()) {
    const auto& info = kstudy::variant_registry::instance().find(id)->info;
    names.insert(info.name);
    if (info.rung > 0 && info.implementation != kstudy::implementation::kokkos) {  // the handwritten ladder
      EXPECT_TRUE(rungs.insert(info.rung).second) << "rung " << info.rung << " twice";
    }
  }
  EXPECT_TRUE(names.count("transpose_kokkos_mdrange"));
  EXPECT_TRUE(names.count("transpose_kokkos_team"));
  EXPECT_TRUE(names.count("transpose_kokkos_tile64"));
  EXPECT_TRUE(names.count("transpose_kokkos_mdrange_tiled"));
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  for (const char* name :
       {"transpose_naive", "transpose_tiled", "transpose_padded", "transpose_tile64_vector", "transpose_cublas"})
    EXPECT_TRUE(names.count(name)) << name;
  EXPECT_EQ(rungs, (std::set<int>{1, 2, 3, 4}));
#else
  EXPECT_TRUE(rungs.empty());
#endif
}

}  // namespace
