// The toy operation of docs/extending.md: z = a*x + y over one axis n. Everything kstudy needs to know
// about it is declared here; no file under src/ names it. Built only into kstudy_toy (tests/CMakeLists.txt).
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "kstudy/support/kokkos_support.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"

namespace toy {

constexpr float a = 2.0f;

// The inputs at one point: x and y, a pure function of (seed, index) so every layout and run agrees.
class axpy_data final : public kstudy::problem_data {
 public:
  axpy_data(const kstudy::table_shape& shape, std::uint64_t seed) : m_shape(shape) {
    m_x.resize(std::size_t(shape.rows));
    m_y.resize(std::size_t(shape.rows));
    for (std::int64_t i = 0; i < shape.rows; ++i) {
      m_x[std::size_t(i)] = value(seed, 2 * i);
      m_y[std::size_t(i)] = value(seed, 2 * i + 1);
    }
  }
  const kstudy::table_shape& shape() const override { return m_shape; }
  std::vector<kstudy::host_span> streamed_inputs() const override {
    return {{const_cast<float*>(m_x.data()), std::int64_t(m_x.size() * sizeof(float))},
            {const_cast<float*>(m_y.data()), std::int64_t(m_y.size() * sizeof(float))}};
  }
  const std::vector<float>& x() const { return m_x; }
  const std::vector<float>& y() const { return m_y; }

 private:
  static float value(std::uint64_t seed, std::int64_t i) {  // splitmix64 -> [-1, 1)
    std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * std::uint64_t(i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return float(double(z >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  kstudy::table_shape m_shape;
  std::vector<float> m_x, m_y;
};

class axpy_reference final : public kstudy::reference_data {
 public:
  std::vector<double> z, bound;
};

// Tolerance: a float32 a*x + y rounds twice (once with an FMA): |z - ref| <= 2^-23 (|a x| + |y|).
class axpy_operation final : public kstudy::operation {
 public:
  axpy_operation() {
    m_info.name = "toy_axpy";
    m_info.description = "z = 2x + y (the toy operation of docs/extending.md)";
    m_info.axes = {"n"};
    m_info.layouts = {kstudy::table_layout::row_major};
    m_info.outputs = {"z"};
    m_info.bench_points = {{1 << 20}};
  }
  const kstudy::operation_info& info() const override { return m_info; }
  std::unique_ptr<kstudy::problem_data> generate(const kstudy::table_shape& shape, std::uint64_t seed) const override {
    return std::make_unique<axpy_data>(shape, seed);
  }
  std::unique_ptr<kstudy::problem_data> relayout(const kstudy::problem_data& source,
                                                 const kstudy::table_shape&) const override {
    return std::make_unique<axpy_data>(dynamic_cast<const axpy_data&>(source));  // one layout: a copy
  }
  std::unique_ptr<kstudy::reference_data> reference(const kstudy::problem_data& problem) const override {
    const auto& p = dynamic_cast<const axpy_data&>(problem);
    auto r = std::make_unique<axpy_reference>();
    for (std::size_t i = 0; i < p.x().size(); ++i) {
      r->z.push_back(double(a) * p.x()[i] + p.y()[i]);
      r->bound.push_back(0x1.0p-23 * (std::fabs(double(a) * p.x()[i]) + std::fabs(double(p.y()[i]))));
    }
    return r;
  }
  std::vector<std::int64_t> output_bytes(const kstudy::table_shape& shape) const override {
    return {shape.rows * std::int64_t(sizeof(float))};
  }
  void poison(const std::vector<kstudy::host_span>& outputs) const override {
    auto* z = outputs.at(0).as<float>();
    std::fill(z, z + outputs[0].bytes / 4, std::numeric_limits<float>::quiet_NaN());
  }
  kstudy::gate_result check(const kstudy::problem_data&, const kstudy::reference_data& reference,
                            const std::vector<kstudy::host_span>& outputs) const override {
    const auto& r = dynamic_cast<const axpy_reference&>(reference);
    const auto* z = outputs.at(0).as<const float>();
    kstudy::gate_result g;
    g.rtol = 0x1.0p-23;
    g.checked = std::int64_t(r.z.size());
    for (std::size_t i = 0; i < r.z.size(); ++i) {
      const double error = std::fabs(double(z[i]) - r.z[i]);
      if (!(error <= r.bound[i])) {  // NaN (poison left) fails too
        if (g.value_failures++ == 0) {
          std::ostringstream os;
          os.precision(9);
          os << "z[" << i << "] = " << z[i] << ", reference " << r.z[i] << ", bound " << r.bound[i];
          g.message = os.str();
        }
      }
      if (std::isfinite(error)) g.max_abs_error = std::max(g.max_abs_error, error);
    }
    g.passed = g.value_failures == 0;
    return g;
  }
  void corrupt(const kstudy::problem_data&, const std::vector<kstudy::host_span>& outputs) const override {
    auto* z = outputs.at(0).as<float>();
    z[0] = z[0] * (1.0f + 0x1.0p-20f) + 0x1.0p-20f;  // far beyond two roundings
  }
  // For the gate's conformance suite (tests/test_gate_conformance.cpp): the reference as float32 outputs,
  // and what less work leaves (the tail of z never written).
  bool reference_outputs(const kstudy::problem_data&, const kstudy::reference_data& reference,
                         const std::vector<kstudy::host_span>& outputs) const override {
    const auto& r = dynamic_cast<const axpy_reference&>(reference);
    auto* z = outputs.at(0).as<float>();
    for (std::size_t i = 0; i < r.z.size(); ++i) z[i] = static_cast<float>(r.z[i]);
    return true;
  }
  void drop_work(const kstudy::problem_data& problem, const kstudy::reference_data& reference,
                 const std::vector<kstudy::host_span>& outputs, double fraction) const override {
    reference_outputs(problem, reference, outputs);
    auto* z = outputs.at(0).as<float>();
    const auto n = static_cast<std::int64_t>(dynamic_cast<const axpy_reference&>(reference).z.size());
    const auto dropped = std::max<std::int64_t>(1, std::int64_t(std::ceil(fraction * double(n))));
    std::fill(z + n - dropped, z + n, 0.0f);
  }
  kstudy::traffic_model essential_traffic(const kstudy::table_shape& shape) const override {
    return {8 * shape.rows, 4 * shape.rows};  // x and y read, z written
  }
  std::int64_t essential_flops(const kstudy::table_shape& shape) const override { return 2 * shape.rows; }
  std::int64_t input_bytes(const kstudy::table_shape& shape) const override { return 8 * shape.rows; }
  std::int64_t reference_bytes(const kstudy::table_shape& shape) const override { return 16 * shape.rows; }

 private:
  kstudy::operation_info m_info;
};

const kstudy::operation_registration<axpy_operation> register_axpy;

// One Kokkos variant, registered on every enabled backend.
template <class ExecutionSpace>
class axpy_kokkos final : public kstudy::variant {
 public:
  using execution_space = ExecutionSpace;
  using view = Kokkos::View<float*, typename ExecutionSpace::memory_space>;
  using host_view = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  void prepare(const kstudy::problem_data& problem, const kstudy::run_options&) override {
    const auto& p = dynamic_cast<const axpy_data&>(problem);
    const auto n = std::int64_t(p.x().size());
    m_x = view("toy::x", n);
    m_y = view("toy::y", n);
    m_z = view("toy::z", n);
    upload(p.streamed_inputs());
  }
  void run() override {
    const auto x = m_x, y = m_y, z = m_z;
    Kokkos::parallel_for(
        "toy::axpy", Kokkos::RangePolicy<ExecutionSpace>(0, m_x.extent(0)),
        KOKKOS_LAMBDA(const std::int64_t i) { z(i) = a * x(i) + y(i); });
    ExecutionSpace().fence();
  }
  void upload(const std::vector<kstudy::host_span>& inputs) override {
    Kokkos::deep_copy(m_x, host_view(inputs.at(0).as<float>(), m_x.extent(0)));
    Kokkos::deep_copy(m_y, host_view(inputs.at(1).as<float>(), m_y.extent(0)));
  }
  void download(const std::vector<kstudy::host_span>& outputs) override {
    Kokkos::deep_copy(host_view(outputs.at(0).as<float>(), m_z.extent(0)), m_z);
  }
  void poison() override { Kokkos::deep_copy(m_z, std::numeric_limits<float>::quiet_NaN()); }

 private:
  view m_x, m_y, m_z;
};

[[maybe_unused]] const int registered = kstudy::detail::for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  kstudy::variant_info info;
  info.name = "toy_axpy_kokkos";
  info.operation = "toy_axpy";
  info.family = "toy_kokkos";
  info.fusion = kstudy::fusion_level::full;
  info.description = "Kokkos RangePolicy, one element per work item";
  info.layout = kstudy::table_layout::row_major;
  info.kernels_launched = 1;  // axpy
  info.traffic = [](const kstudy::table_shape& s) { return kstudy::traffic_model{8 * s.rows, 4 * s.rows}; };
  kstudy::detail::register_kokkos_variant<axpy_kokkos<space>>(info);
});

}  // namespace toy
