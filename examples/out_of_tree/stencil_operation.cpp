// The stencil3 operation (stencil.hpp): inputs, float64 reference, gate, bytes and flops. Registered at
// static initialisation, like kstudy's built-in operations; nothing in kstudy names it.
//
// Inputs. x_i is a pure function of (seed, i): uniform in [-1, 1) on a grid of 2^-23 (exact floats), except
// ~1% outliers of magnitude 100..1000 with a random sign, so a variant that shifts, drops or mixes up
// neighbours cannot hide behind values of one size. No NaN or Inf.
//
// Reference and gate (u = 2^-24, the unit roundoff of float32). The products w x_{i-1}, c x_i, w x_{i+1} are
// exact (powers of two, no underflow at these magnitudes), and so is their float64 sum: every input is a
// multiple of 2^-23 below 2^10, so the sum needs at most 36 bits. A float32 variant adds the three exact
// products with two roundings, in any order (or with an FMA, which rounds once less): with a, b, c the
// products and S = |a| + |b| + |c|, |fl(fl(a + b) + c) - (a + b + c)| <= u |a + b| + u (1 + u) S <= (2u + u^2) S.
// So the gate is |y_i - ref_i| <= (2u + u^2) S_i, atol 0; a NaN (poison left behind) fails. corrupt() moves
// y_0 to the first float beyond twice its bound: wrong by a few ulps, which the gate must still reject.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "stencil.hpp"

namespace stencil {

stencil_data::stencil_data(const kstudy::table_shape& shape, std::unique_ptr<float[]> x)
    : m_shape(shape), m_x(std::move(x)) {}

std::vector<kstudy::host_span> stencil_data::streamed_inputs() const {
  // The runner copies from this span and never writes through it.
  return {{const_cast<float*>(m_x.get()), n() * std::int64_t(sizeof(float))}};
}

const stencil_data& stencil_problem(const kstudy::problem_data& problem) {
  const auto* data = dynamic_cast<const stencil_data*>(&problem);
  if (data == nullptr) throw std::invalid_argument("a stencil3 variant was given another operation's problem");
  if (data->n() < 1 || data->x() == nullptr) throw std::invalid_argument("stencil3: n must be positive, x present");
  return *data;
}

kstudy::traffic_model essential_traffic(std::int64_t n) {
  return {n * std::int64_t(sizeof(float)), n * std::int64_t(sizeof(float))};
}
std::int64_t essential_flops(std::int64_t n) { return 4 * n; }

kstudy::variant_info variant_info_for(const std::string& name, const std::string& family,
                                      const std::string& description) {
  kstudy::variant_info info;
  info.name = name;
  info.operation = operation_name;
  info.family = family;
  info.fusion = kstudy::fusion_level::full;
  info.description = description;
  info.layout = kstudy::table_layout::row_major;
  info.kernels_launched = 1;  // the stencil
  info.traffic = [](const kstudy::table_shape& shape) { return essential_traffic(shape.rows); };
  return info;
}

namespace {

// SplitMix64 finaliser: hash(seed, index) behaves like independent draws.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
double unit(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }  // [0, 1), 53 bits

float generated(std::uint64_t seed, std::int64_t i) {
  const std::uint64_t h1 = mix(mix(seed) + static_cast<std::uint64_t>(i));
  const std::uint64_t h2 = mix(h1);
  if (unit(h2) < 0.01) {
    const double magnitude = 100.0 + 900.0 * unit(mix(h2));
    return static_cast<float>((h2 & 1) ? magnitude : -magnitude);
  }
  return static_cast<float>(-1.0 + static_cast<double>(h1 >> 40) * 0x1.0p-23);
}

std::unique_ptr<float[]> new_array(std::int64_t n) { return std::unique_ptr<float[]>(new float[std::size_t(n)]); }

constexpr double rtol = 0x1.0p-23 + 0x1.0p-48;  // 2u + u^2

// The exact reference of y_i and the scale S_i its bound multiplies.
inline void reference_at(const float* x, std::int64_t n, std::int64_t i, double& ref, double& scale) {
  const double left = i > 0 ? double(side_weight) * x[i - 1] : 0.0;
  const double centre = double(centre_weight) * x[i];
  const double right = i + 1 < n ? double(side_weight) * x[i + 1] : 0.0;
  ref = left + centre + right;
  scale = std::fabs(left) + std::fabs(centre) + std::fabs(right);
}

std::string g9(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.9g", v);
  return buffer;
}

// check() evaluates the reference per element from the inputs, so it stores nothing.
class stencil_reference final : public kstudy::reference_data {};

class stencil_operation final : public kstudy::operation {
 public:
  stencil_operation() {
    m_info.name = operation_name;
    m_info.description = "1-D 3-point smoothing stencil y_i = (x_{i-1} + 2 x_i + x_{i+1}) / 4, zero boundary";
    m_info.axes = {"n"};
    m_info.layouts = {kstudy::table_layout::row_major};
    m_info.outputs = {"y"};
    m_info.bench_points = {{std::int64_t(1) << 20}, {std::int64_t(1) << 24}};
  }
  const kstudy::operation_info& info() const override { return m_info; }

  std::unique_ptr<kstudy::problem_data> generate(const kstudy::table_shape& shape, std::uint64_t seed) const override {
    check_shape(shape);
    auto x = new_array(shape.rows);
    float* out = x.get();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < shape.rows; ++i) out[i] = generated(seed, i);
    return std::make_unique<stencil_data>(shape, std::move(x));
  }
  // One layout: a copy of the same values.
  std::unique_ptr<kstudy::problem_data> relayout(const kstudy::problem_data& source,
                                                 const kstudy::table_shape& shape) const override {
    check_shape(shape);
    const auto& p = stencil_problem(source);
    if (p.n() != shape.rows) throw std::invalid_argument("stencil3: relayout cannot change n");
    auto x = new_array(p.n());
    std::copy(p.x(), p.x() + p.n(), x.get());
    return std::make_unique<stencil_data>(shape, std::move(x));
  }
  std::unique_ptr<kstudy::reference_data> reference(const kstudy::problem_data& problem) const override {
    stencil_problem(problem);
    return std::make_unique<stencil_reference>();
  }
  std::vector<std::int64_t> output_bytes(const kstudy::table_shape& shape) const override {
    return {shape.rows * std::int64_t(sizeof(float))};
  }
  void poison(const std::vector<kstudy::host_span>& outputs) const override {
    float* y = outputs.at(0).as<float>();
    std::fill(y, y + outputs[0].bytes / std::int64_t(sizeof(float)), std::numeric_limits<float>::quiet_NaN());
  }

  kstudy::gate_result check(const kstudy::problem_data& problem, const kstudy::reference_data&,
                            const std::vector<kstudy::host_span>& outputs) const override {
    const auto& p = stencil_problem(problem);
    const float* x = p.x();
    const float* y = outputs.at(0).as<const float>();
    const std::int64_t n = p.n();
    kstudy::gate_result g;
    g.rtol = rtol;
    g.atol = 0.0;
    g.checked = n;
    std::int64_t failures = 0, first_bad = n;
    double max_abs = 0.0, max_rel = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : failures) reduction(min : first_bad) \
    reduction(max : max_abs, max_rel)
    for (std::int64_t i = 0; i < n; ++i) {
      double ref, scale;
      reference_at(x, n, i, ref, scale);
      const double error = std::isnan(y[i]) ? INFINITY : std::fabs(double(y[i]) - ref);
      if (!(error <= rtol * scale)) {
        ++failures;
        first_bad = std::min(first_bad, i);
      }
      max_abs = std::max(max_abs, error);
      max_rel = std::max(max_rel, error == 0.0 ? 0.0 : (scale > 0.0 ? error / scale : INFINITY));
    }
    g.value_failures = failures;
    g.max_abs_error = max_abs;
    g.max_relative_error = max_rel;
    g.passed = failures == 0;
    if (!g.passed) {
      double ref, scale;
      reference_at(x, n, first_bad, ref, scale);
      g.message = "stencil3: y[" + std::to_string(first_bad) + "] = " + g9(y[first_bad]) +
                  " but the float64 reference is " + g9(ref) + " (|error| " +
                  g9(std::fabs(double(y[first_bad]) - ref)) + ", bound " + g9(rtol * scale) + "); " +
                  std::to_string(failures) + " of " + std::to_string(n) + " elements fail";
    }
    return g;
  }

  void corrupt(const kstudy::problem_data& problem, const std::vector<kstudy::host_span>& outputs) const override {
    const auto& p = stencil_problem(problem);
    double ref, scale;
    reference_at(p.x(), p.n(), 0, ref, scale);
    const double twice_bound = 2 * rtol * scale;
    float& y = outputs.at(0).as<float>()[0];
    // |moved - ref| >= |moved - y| - |y - ref| > 2 bound - bound.
    float moved = static_cast<float>(double(y) + twice_bound);
    while (!(std::fabs(double(moved) - double(y)) > twice_bound)) moved = std::nextafter(moved, INFINITY);
    y = moved;
  }

  kstudy::traffic_model essential_traffic(const kstudy::table_shape& shape) const override {
    return stencil::essential_traffic(shape.rows);
  }
  std::int64_t essential_flops(const kstudy::table_shape& shape) const override {
    return stencil::essential_flops(shape.rows);
  }
  std::int64_t input_bytes(const kstudy::table_shape& shape) const override {
    return shape.rows * std::int64_t(sizeof(float));
  }
  std::int64_t reference_bytes(const kstudy::table_shape&) const override { return 0; }

 private:
  void check_shape(const kstudy::table_shape& shape) const {
    shape.validate();
    if (shape.layout != kstudy::table_layout::row_major || shape.features != 1)
      throw std::invalid_argument("stencil3: expects a row-major shape of n rows and one feature");
  }

  kstudy::operation_info m_info;
};

const kstudy::operation_registration<stencil_operation> register_stencil;

}  // namespace
}  // namespace stencil
