// kstudy/support/elementwise_operation.hpp and array_problem.hpp: the gate an elementwise operation derives must
// accept what a correct variant leaves and reject, at the largest size it is asked to certify and at odd ones
// (1, 37, 1,000,003 and 2^22, past the toy's 2^20 bench point), all-zero outputs, a dropped tail of the work, corrupt()
// (one element just past twice its bound) and poison left at the first, middle or last element; a bound of 0 demands
// the same bits. Two local operations, not registered: an axpy with a rounding bound, and a copy whose bound is 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kstudy/support/array_problem.hpp"
#include "kstudy/support/elementwise_operation.hpp"
#include "kstudy/support/seeded_floats.hpp"

namespace {

template <bool Exact>
class elementwise_test_operation final : public kstudy::elementwise_operation<elementwise_test_operation<Exact>> {
 public:
  elementwise_test_operation() {
    this->m_info.name = Exact ? "test_copy" : "test_axpy";
    this->m_info.axes = {"n"};
    this->m_info.layouts = {kstudy::table_layout::row_major};
    this->m_info.outputs = {"z"};
  }
  std::unique_ptr<kstudy::problem_data> generate(const kstudy::table_shape& shape, std::uint64_t seed) const override {
    auto p = std::make_unique<kstudy::array_problem>(shape);
    float* x = p->template add<float>("x", shape.rows);
    float* y = p->template add<float>("y", shape.rows);
    for (std::int64_t i = 0; i < shape.rows; ++i) {
      x[i] = kstudy::seeded_float(seed, 0, i);
      y[i] = kstudy::seeded_float(seed, 1, i);
    }
    return p;
  }
  std::vector<std::int64_t> output_elements(const kstudy::table_shape& shape) const { return {shape.rows}; }
  kstudy::expected_value expected(const kstudy::array_problem& p, std::size_t, std::int64_t i) const {
    const double x = p.array<float>(0)[i], y = p.array<float>(1)[i];
    if (Exact) return {x, 0.0};
    return {2 * x + y, 0x1.0p-23 * (std::fabs(2 * x) + std::fabs(y))};
  }
  kstudy::traffic_model essential_traffic(const kstudy::table_shape& s) const override {
    return {8 * s.rows, 4 * s.rows};
  }
  std::int64_t essential_flops(const kstudy::table_shape& s) const override { return 2 * s.rows; }
  std::int64_t input_bytes(const kstudy::table_shape& s) const override { return 8 * s.rows; }
};

// Another operation's problem type, for the downcast's refusal.
struct named_problem : kstudy::array_problem {
  using array_problem::array_problem;
};

template <class Operation>
void check_gate_at(const Operation& op, std::int64_t n) {
  SCOPED_TRACE(op.info().name + " at n = " + std::to_string(n));
  const auto shape = op.shape({n}, kstudy::table_layout::row_major, 0);
  const auto problem = op.generate(shape, 20261202);
  const auto reference = op.reference(*problem);
  const auto bytes = op.output_bytes(shape);
  ASSERT_EQ(bytes.size(), 1u);
  ASSERT_EQ(bytes[0], 4 * n);
  std::vector<float> z(static_cast<std::size_t>(n));
  const std::vector<kstudy::host_span> outputs{{z.data(), bytes[0]}};
  const auto fresh = [&] { ASSERT_TRUE(op.reference_outputs(*problem, *reference, outputs)); };

  fresh();
  const auto good = op.check(*problem, *reference, outputs);
  EXPECT_TRUE(good.passed) << good.message;
  EXPECT_EQ(good.checked, n);

  std::fill(z.begin(), z.end(), 0.0f);
  EXPECT_FALSE(op.check(*problem, *reference, outputs).passed) << "all-zero outputs";

  op.drop_work(*problem, *reference, outputs, 0.01);
  const auto dropped = op.check(*problem, *reference, outputs);
  EXPECT_FALSE(dropped.passed) << "1% of the work dropped";
  EXPECT_GE(dropped.value_failures, 1);

  fresh();
  op.corrupt(*problem, outputs);
  const auto corrupted = op.check(*problem, *reference, outputs);
  EXPECT_FALSE(corrupted.passed) << "corrupt()";
  EXPECT_EQ(corrupted.value_failures, 1);
  EXPECT_NE(corrupted.message.find("z[0]"), std::string::npos) << corrupted.message;

  for (const std::int64_t at : {std::int64_t(0), n / 2, n - 1}) {
    fresh();
    z[static_cast<std::size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
    const auto poisoned = op.check(*problem, *reference, outputs);
    EXPECT_FALSE(poisoned.passed) << "poison left at " << at;
    EXPECT_EQ(poisoned.value_failures, 1);
  }
  op.poison(outputs);
  EXPECT_EQ(op.check(*problem, *reference, outputs).value_failures, n) << "every element poisoned";
}

TEST(ElementwiseOperation, GateRejectsWrongOutputsAtLargestAndOddSizes) {
  const elementwise_test_operation<false> axpy;
  const elementwise_test_operation<true> copy;
  for (const std::int64_t n : {std::int64_t(1), std::int64_t(37), std::int64_t(1000003), std::int64_t(1) << 22}) {
    check_gate_at(axpy, n);
    check_gate_at(copy, n);
  }
}

TEST(ElementwiseOperation, ABoundOfZeroDemandsTheSameBits) {
  kstudy::elementwise_gate gate;
  EXPECT_TRUE(gate.compare(1.5f, {1.5, 0.0}, [] { return "z[0]"; }));
  EXPECT_FALSE(gate.compare(-0.0f, {0.0, 0.0}, [] { return "z[1]"; }));  // a copy moves bits: -0 is not +0
  EXPECT_FALSE(gate.compare(std::nextafter(2.0f, 3.0f), {2.0, 0.0}, [] { return "z[2]"; }));
  const auto g = gate.result();
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.value_failures, 2);
  EXPECT_EQ(g.checked, 3);
  EXPECT_NE(g.message.find("z[1]"), std::string::npos) << g.message;
}

// The gate runs in chunks on every host thread; the tallies fold in order, so the first failure named is the
// lowest index whichever thread found it first, and the counts and largest errors are those of all chunks.
TEST(ElementwiseOperation, ChunksFoldInOrder) {
  kstudy::elementwise_gate early, late;
  EXPECT_TRUE(early.compare(1.0f, {1.0, 0.5}, [] { return "z[0]"; }));
  EXPECT_FALSE(late.compare(3.0f, {1.0, 0.5}, [] { return "z[70000]"; }));
  EXPECT_FALSE(late.compare(2.0f, {1.0, 0.5}, [] { return "z[70001]"; }));
  kstudy::elementwise_gate folded;
  folded.merge(early);
  folded.merge(late);
  const auto g = folded.result();
  EXPECT_EQ(g.checked, 3);
  EXPECT_EQ(g.value_failures, 2);
  EXPECT_DOUBLE_EQ(g.max_abs_error, 2.0);
  EXPECT_DOUBLE_EQ(g.max_relative_error, 2.0);  // rtol 0: |error| over |reference|
  EXPECT_NE(g.message.find("z[70000]"), std::string::npos) << g.message;

  // Through check(): failures planted in the last and a middle chunk of 2^22 elements (64 chunks); the message
  // names the middle one, the lowest, and the operation.
  const elementwise_test_operation<true> copy;
  const std::int64_t n = std::int64_t(1) << 22;
  const auto problem = copy.generate(copy.shape({n}, kstudy::table_layout::row_major, 0), 9);
  const auto reference = copy.reference(*problem);
  std::vector<float> z(static_cast<std::size_t>(n));
  const std::vector<kstudy::host_span> outputs{{z.data(), n * std::int64_t(sizeof(float))}};
  copy.reference_outputs(*problem, *reference, outputs);
  z[std::size_t(n - 1)] = std::nextafter(z[std::size_t(n - 1)], INFINITY);
  z[std::size_t(n / 2 + 3)] = std::nextafter(z[std::size_t(n / 2 + 3)], INFINITY);
  const auto checked = copy.check(*problem, *reference, outputs);
  EXPECT_FALSE(checked.passed);
  EXPECT_EQ(checked.value_failures, 2);
  EXPECT_EQ(checked.checked, n);
  EXPECT_EQ(checked.message.rfind("test_copy: z[" + std::to_string(n / 2 + 3) + "]", 0), 0u) << checked.message;
}

TEST(ArrayProblem, CopiesNamesAndRefusesAnotherElementType) {
  kstudy::table_shape shape;
  shape.rows = 5;
  kstudy::array_problem p(shape);
  float* x = p.add<float>("x", 5);
  double* w = p.add<double>("w", 2, /*streamed=*/false);
  for (int i = 0; i < 5; ++i) x[i] = float(i);
  w[0] = w[1] = 0.5;
  const kstudy::array_problem copy(p);
  x[0] = 99.0f;  // the copy owns its arrays
  EXPECT_EQ(copy.array<float>(0)[0], 0.0f);
  EXPECT_EQ(copy.name(1), "w");
  EXPECT_EQ(copy.streamed_inputs().size(), 1u);  // w is a parameter, not streamed
  EXPECT_EQ(copy.streamed_inputs()[0].bytes, 20);
  EXPECT_THROW(copy.array<double>(0), std::logic_error);
  EXPECT_THROW(kstudy::problem_as<named_problem>(copy, "test"), std::invalid_argument);  // names the operation
}

}  // namespace
