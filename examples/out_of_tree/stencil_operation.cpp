// The stencil3 operation (stencil.hpp) on kstudy's thin elementwise base: it declares its inputs, each output
// element's float64 reference and bound, and its bytes and flops; the base derives the gate, poison, the
// deliberately wrong outputs the conformance tests feed it, and the rest. Nothing in kstudy names it.
//
// Inputs: x from kstudy's seeded values, uniform in [-1, 1) on a grid of 2^-23 (exact floats) except ~1%
// outliers of magnitude 100..1000, so a variant that shifts, drops or mixes up neighbours cannot hide.
// Gate (u = 2^-24): the products w x_{i-1}, c x_i, w x_{i+1} are exact and so is their float64 sum (at most 36
// bits); a float32 variant adds the three with two roundings in any order (an FMA rounds once less), so
// |y_i - ref_i| <= (2u + u^2) S_i with S_i = |w x_{i-1}| + |c x_i| + |w x_{i+1}|.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "kstudy/support/array_problem.hpp"
#include "kstudy/support/elementwise_operation.hpp"
#include "kstudy/support/operation_helpers.hpp"
#include "kstudy/support/seeded_floats.hpp"
#include "stencil.hpp"

namespace stencil {
namespace {

class stencil_operation final : public kstudy::elementwise_operation<stencil_operation> {
 public:
  stencil_operation() {
    m_info.name = operation_name;
    m_info.description = "1-D 3-point smoothing stencil y_i = (x_{i-1} + 2 x_i + x_{i+1}) / 4, zero boundary";
    m_info.axes = {"n"};
    m_info.layouts = {kstudy::table_layout::row_major};
    m_info.outputs = {"y"};
    m_info.bench_points = {{std::int64_t(1) << 20}, {std::int64_t(1) << 24}};
    m_rtol = 0x1.0p-23 + 0x1.0p-48;  // 2u + u^2
  }
  std::unique_ptr<kstudy::problem_data> generate(const kstudy::table_shape& shape, std::uint64_t seed) const override {
    kstudy::require_row_major_vector(shape, m_info.name);
    auto p = std::make_unique<kstudy::array_problem>(shape);
    float* x = p->add<float>("x", shape.rows);
    kstudy::fill_parallel(x, shape.rows, [seed](std::int64_t i) { return kstudy::seeded_float(seed, 0, i); });
    return p;
  }
  std::vector<std::int64_t> output_elements(const kstudy::table_shape& shape) const { return {shape.rows}; }
  kstudy::expected_value expected(const kstudy::array_problem& p, std::size_t, std::int64_t i) const {
    const float* x = p.array<float>(0);
    const double left = i > 0 ? double(side_weight) * x[i - 1] : 0.0, centre = double(centre_weight) * x[i];
    const double right = i + 1 < p.shape().rows ? double(side_weight) * x[i + 1] : 0.0;
    return {left + centre + right, m_rtol * (std::fabs(left) + std::fabs(centre) + std::fabs(right))};
  }
  kstudy::traffic_model essential_traffic(const kstudy::table_shape& shape) const override {
    return {4 * shape.rows, 4 * shape.rows};  // x read once, y written once
  }
  // y_i = w (x_{i-1} + x_{i+1}) + c x_i: two adds, two multiplies.
  std::int64_t essential_flops(const kstudy::table_shape& shape) const override { return 4 * shape.rows; }
  std::int64_t input_bytes(const kstudy::table_shape& shape) const override { return 4 * shape.rows; }
};

const kstudy::operation_registration<stencil_operation> register_stencil;

}  // namespace
}  // namespace stencil
