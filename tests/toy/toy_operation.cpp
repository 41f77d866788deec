// The toy operation of docs/extending.md: z = a*x + y over one axis n. Everything kstudy needs to know
// about it is declared here; no file under src/ names it. Built only into kstudy_toy (tests/CMakeLists.txt).
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "kstudy/support/array_problem.hpp"
#include "kstudy/support/elementwise_operation.hpp"
#include "kstudy/support/seeded_floats.hpp"

namespace toy {

constexpr float a = 2.0f;

// Tolerance: a float32 a*x + y rounds twice (once with an FMA): |z - ref| <= 2^-23 (|a x| + |y|).
class axpy_operation final : public kstudy::elementwise_operation<axpy_operation> {
 public:
  axpy_operation() {
    m_info.name = "toy_axpy";
    m_info.description = "z = 2x + y (the toy operation of docs/extending.md)";
    m_info.axes = {"n"};
    m_info.layouts = {kstudy::table_layout::row_major};
    m_info.outputs = {"z"};
    m_info.bench_points = {{1 << 20}};
    m_rtol = 0x1.0p-23;
  }
  // x and y: seeded values with outliers, a pure function of (seed, array, index).
  std::unique_ptr<kstudy::problem_data> generate(const kstudy::table_shape& shape, std::uint64_t seed) const override {
    auto p = std::make_unique<kstudy::array_problem>(shape);
    float* x = p->add<float>("x", shape.rows);
    float* y = p->add<float>("y", shape.rows);
    for (std::int64_t i = 0; i < shape.rows; ++i) {
      x[i] = kstudy::seeded_float(seed, 0, i);
      y[i] = kstudy::seeded_float(seed, 1, i);
    }
    return p;
  }
  std::vector<std::int64_t> output_elements(const kstudy::table_shape& shape) const { return {shape.rows}; }
  kstudy::expected_value expected(const kstudy::array_problem& p, std::size_t, std::int64_t i) const {
    const double ax = double(a) * p.array<float>(0)[i], y = p.array<float>(1)[i];
    return {ax + y, 0x1.0p-23 * (std::fabs(ax) + std::fabs(y))};
  }
  kstudy::traffic_model essential_traffic(const kstudy::table_shape& shape) const override {
    return {8 * shape.rows, 4 * shape.rows};  // x and y read, z written
  }
  std::int64_t essential_flops(const kstudy::table_shape& shape) const override { return 2 * shape.rows; }
  std::int64_t input_bytes(const kstudy::table_shape& shape) const override { return 8 * shape.rows; }
};

const kstudy::operation_registration<axpy_operation> register_axpy;

}  // namespace toy
