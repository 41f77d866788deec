// The STREAM operations (stream.hpp): stream_copy, stream_scale, stream_add, stream_triad, stream_dot, one
// class template over the kind, registered five times.
//
// Inputs. x and y are pure functions of (seed, index, array), so every thread count and every relayout
// gives the same values: uniform in [-1, 1) on a grid of 2^-23 (exact floats), except ~1% outliers of
// magnitude 100..1000 with a random sign, so a variant that drops or reorders elements cannot hide behind
// values of one size. No NaN or Inf is ever generated. stream_dot's x and y are instead uniform in [0, 2)
// (detail::seeded_nonnegatives, as reduce_sum's x, no outliers): with zero-mean operands sum x_i y_i
// cancels to ~sqrt(n) of its terms' size and a float32-sized bound of sum |x_i y_i| passed a dot over the
// first half of the arrays at n = 2^30; with nonnegative products sum |x_i y_i| = d and skipping 1% of the
// terms moves d by 1% of it.
//
// Reference and gate (float64; u = 2^-24, the unit roundoff of float32):
//  - copy   z == x bitwise: a copy does no arithmetic, so the tolerance is 0 (rtol = atol = 0).
//  - scale  |z - ref| <= u * |ref|, ref = q * x: one correctly rounded multiply.
//  - add    |z - ref| <= u * |ref|, ref = x + y: one correctly rounded add.
//  - triad  |z - ref| <= 2u * (|x| + |q * y|), ref = x + q * y: two roundings (multiply, then add: the
//           first errs by at most u|qy|, the second by at most u|x + fl(qy)|), or one with an FMA.
//  - dot    |d - ref| <= u (8 sqrt(T + 1) + 1) * sum_i |x_i * y_i|, ref = sum_i x_i * y_i,
//           T = min(n - 1, 2 * 2^20 + ceil(log2 n)): reduce_sum's probabilistic model (derived at the top of
//           variants/reduce/operation.cpp: float32 running sums of at most 2^20 terms at two levels and a
//           tree, Hoeffding with lambda = 8 over the first-order rounding terms, false rejection at most
//           2.5e-14), with the n products' roundings as one more term (the squares of |x_i y_i| sum to at
//           most (sum |x_i y_i|)^2; an FMA does not round them). Variants that accumulate in float64 sit far
//           inside it. At the largest bench point (2^28) and at 2^30 rtol = 11,586 u = 6.9e-4 while a dot
//           that skipped 1% of the terms is off by ~1e-2 of sum |x_i y_i| (14x the bound), an all-zero d by
//           1448x. atol is 0: |d - ref| may be 0 only when every product is 0.
// The elementwise references are exact in float64 (inputs are multiples of 2^-23 below 2^10, so x + 3y
// needs at most 36 bits) and depend on one element's inputs alone, so the reference object stores no
// vector: check() evaluates it per element, saving 8n bytes of host memory at n = 2^30. dot's reference is
// summed in fixed blocks of float64 (exact products), the blocks added in order: the same value on every
// thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "detail/float_sum_tolerance.hpp"
#include "kstudy/support/moved_beyond.hpp"
#include "kstudy/support/operation_helpers.hpp"
#include "kstudy/support/seeded_floats.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"
#include "stream/stream.hpp"

namespace kstudy::stream {

traffic_model essential_traffic(stream_kind kind, std::int64_t n) {
  traffic_model t;
  t.bytes_read = input_count(kind) * n * std::int64_t(sizeof(float));
  t.bytes_written = is_reduction(kind) ? std::int64_t(sizeof(double)) : n * std::int64_t(sizeof(float));
  return t;
}

std::int64_t essential_flops(stream_kind kind, std::int64_t n) {
  switch (kind) {
    case stream_kind::copy:
      return 0;
    case stream_kind::scale:
    case stream_kind::add:
      return n;
    case stream_kind::triad:
    case stream_kind::dot:
      return 2 * n;
  }
  return 0;
}

stream_data::stream_data(stream_kind kind, const table_shape& shape, std::unique_ptr<float[]> x,
                         std::unique_ptr<float[]> y)
    : array_problem(shape),
      m_kind(kind),
      m_x(adopt("x", std::move(x), shape.rows)),
      m_y(adopt("y", std::move(y), shape.rows)) {}

const stream_data& stream_problem(const problem_data& problem, stream_kind expected) {
  const auto* data = dynamic_cast<const stream_data*>(&problem);
  if (data == nullptr || data->kind() != expected)
    throw std::invalid_argument(std::string("a ") + operation_name(expected) +
                                " variant was given another operation's problem");
  if (data->n() < 1) throw std::invalid_argument(std::string(operation_name(expected)) + ": n must be positive");
  if (data->x() == nullptr || (has_y(expected) && data->y() == nullptr))
    throw std::invalid_argument(std::string(operation_name(expected)) + ": an input vector is missing");
  return *data;
}

variant_info variant_info_for(stream_kind kind, const std::string& name_suffix, const std::string& family,
                              const std::string& description) {
  return operation_variant_info(std::string(short_name(kind)) + "_" + name_suffix, operation_name(kind), family,
                                description,
                                [kind](const table_shape& shape) { return essential_traffic(kind, shape.rows); });
}

namespace {

constexpr std::uint64_t x_array = 0x78, y_array = 0x79;

std::unique_ptr<float[]> copy_array(const float* source, std::int64_t n) {
  return source == nullptr ? nullptr : detail::copied_floats(source, n);
}

// dot's reference: the exact products summed in float64 within fixed blocks, the blocks in order (value,
// and sum_i |x_i * y_i| as magnitude: the scale of the tolerance).
using dot_reference = sum_reference;

// The elementwise kinds' reference is evaluated per element by check() (see the top of the file).
class elementwise_reference final : public reference_data {};

constexpr std::int64_t reference_block = 65536;

// The float64 reference of element i of z, and the scale its tolerance multiplies.
template <stream_kind K>
inline void elementwise_reference_at(const stream_data& p, std::int64_t i, double& ref, double& scale) {
  const double x = p.x()[i];
  if constexpr (K == stream_kind::copy) {
    ref = x;
    scale = std::fabs(x);
  } else if constexpr (K == stream_kind::scale) {
    ref = double(p.q()) * x;
    scale = std::fabs(ref);
  } else if constexpr (K == stream_kind::add) {
    ref = x + double(p.y()[i]);
    scale = std::fabs(ref);
  } else {
    const double qy = double(p.q()) * double(p.y()[i]);
    ref = x + qy;
    scale = std::fabs(x) + std::fabs(qy);
  }
}

template <stream_kind K>
class stream_operation final : public operation {
 public:
  stream_operation() {
    m_info.name = operation_name(K);
    m_info.description = kind_table[static_cast<int>(K)].description;
    m_info.axes = {"n"};
    m_info.layouts = {table_layout::row_major};
    m_info.outputs = {is_reduction(K) ? "d" : "z"};
    m_info.bench_points = {{std::int64_t(1) << 20}, {std::int64_t(1) << 24}, {std::int64_t(1) << 28}};
  }
  const operation_info& info() const override { return m_info; }

  std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const override {
    check_shape(shape);
    // dot: nonnegative operands, so that its sum does not cancel (see the top of the file).
    auto x = K == stream_kind::dot ? detail::seeded_nonnegatives(seed, x_array, shape.rows)
                                   : detail::seeded_floats(seed, x_array, shape.rows);
    auto y = K == stream_kind::dot ? detail::seeded_nonnegatives(seed, y_array, shape.rows)
             : has_y(K)            ? detail::seeded_floats(seed, y_array, shape.rows)
                                   : nullptr;
    return std::make_unique<stream_data>(K, shape, std::move(x), std::move(y));
  }
  // Only row-major exists: the same vectors, copied.
  std::unique_ptr<problem_data> relayout(const problem_data& source, const table_shape& shape) const override {
    check_shape(shape);
    const auto& data = stream_problem(source, K);
    if (data.n() != shape.rows) throw std::invalid_argument(m_info.name + ": relayout cannot change n");
    return std::make_unique<stream_data>(K, shape, copy_array(data.x(), data.n()), copy_array(data.y(), data.n()));
  }

  std::unique_ptr<reference_data> reference(const problem_data& problem) const override {
    const auto& p = stream_problem(problem, K);
    if constexpr (!is_reduction(K)) {
      return std::make_unique<elementwise_reference>();
    } else {
      const float *x = p.x(), *y = p.y();
      // The products are exact: 48 significant bits.
      return blocked_sum(p.n(), reference_block, [x, y](std::int64_t i) { return double(x[i]) * double(y[i]); });
    }
  }

  std::vector<std::int64_t> output_bytes(const table_shape& shape) const override {
    return {is_reduction(K) ? std::int64_t(sizeof(double)) : shape.rows * std::int64_t(sizeof(float))};
  }

  void poison(const std::vector<host_span>& outputs) const override {
    if constexpr (is_reduction(K)) {
      *d_output(outputs) = std::numeric_limits<double>::quiet_NaN();
    } else {
      fill_nan(outputs.at(0));
    }
  }

  gate_result check(const problem_data& problem, const reference_data& reference,
                    const std::vector<host_span>& outputs) const override {
    const auto& p = stream_problem(problem, K);
    if constexpr (is_reduction(K))
      return check_dot(p, dynamic_cast<const dot_reference&>(reference), outputs);
    else
      return check_elementwise(p, outputs);
  }

  void corrupt(const problem_data& problem, const std::vector<host_span>& outputs) const override {
    const auto& p = stream_problem(problem, K);
    if constexpr (K == stream_kind::copy) {
      // Any change breaks a bitwise copy: flip the lowest bit of z[0] (one ulp).
      float* z = z_output(outputs);
      std::uint32_t bits;
      std::memcpy(&bits, z, sizeof bits);
      bits ^= 1u;
      std::memcpy(z, &bits, sizeof bits);
    } else if constexpr (K == stream_kind::dot) {
      const double bound = dot_bound(p);
      double& d = *d_output(outputs);
      d = detail::moved_beyond(d, bound);
    } else {
      // z[0] moved to the first float beyond twice its bound: |new - ref| >= |new - z| - |z - ref| > bound.
      double ref, scale;
      elementwise_reference_at<K>(p, 0, ref, scale);
      float& z = z_output(outputs)[0];
      const double bound = elementwise_rtol() * scale;
      z = detail::moved_beyond(z, bound);
    }
  }

  // The reference rounded to float32 (dot: the sum a float32 accumulation returns at best, widened).
  bool reference_outputs(const problem_data& problem, const reference_data& reference,
                         const std::vector<host_span>& outputs) const override {
    const auto& p = stream_problem(problem, K);
    if constexpr (is_reduction(K)) {
      *d_output(outputs) = double(static_cast<float>(dynamic_cast<const dot_reference&>(reference).value));
    } else {
      float* z = z_output(outputs);
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < p.n(); ++i) {
        double ref, scale;
        elementwise_reference_at<K>(p, i, ref, scale);
        z[i] = static_cast<float>(ref);
      }
    }
    return true;
  }
  // Less work: the tail of the vector skipped (a missed remainder loop, a grid one block short). The
  // elementwise kinds leave the tail's outputs as they were before the run (zero here); dot sums the rest.
  void drop_work(const problem_data& problem, const reference_data& reference, const std::vector<host_span>& outputs,
                 double fraction) const override {
    const auto& p = stream_problem(problem, K);
    const std::int64_t kept = p.n() - std::max<std::int64_t>(1, std::int64_t(std::ceil(fraction * double(p.n()))));
    if constexpr (is_reduction(K)) {
      const float *x = p.x(), *y = p.y();
      double d = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : d)
      for (std::int64_t i = 0; i < kept; ++i) d += double(x[i]) * double(y[i]);
      *d_output(outputs) = d;
    } else {
      reference_outputs(problem, reference, outputs);
      float* z = z_output(outputs);
      std::fill(z + kept, z + p.n(), 0.0f);
    }
  }

  traffic_model essential_traffic(const table_shape& shape) const override {
    return stream::essential_traffic(K, shape.rows);
  }
  std::int64_t essential_flops(const table_shape& shape) const override {
    return stream::essential_flops(K, shape.rows);
  }
  std::int64_t input_bytes(const table_shape& shape) const override {
    return input_count(K) * shape.rows * std::int64_t(sizeof(float));
  }
  // dot: two doubles (value, magnitude) plus the per-block sums while it is computed; the elementwise kinds
  // store none (check() evaluates the reference per element).
  std::int64_t reference_bytes(const table_shape& shape) const override {
    return is_reduction(K) ? blocked_sum_bytes(shape.rows, reference_block) : 0;
  }

 private:
  void check_shape(const table_shape& shape) const { require_row_major_vector(shape, m_info.name); }

  static constexpr double unit_roundoff = 0x1.0p-24;
  static constexpr double elementwise_rtol() {
    switch (K) {
      case stream_kind::copy:
        return 0.0;
      case stream_kind::triad:
        return 2 * unit_roundoff;
      default:
        return unit_roundoff;
    }
  }
  static double dot_rtol(std::int64_t n) { return detail::float_sum_rtol(n, 1.0); }
  double dot_bound(const stream_data& p) const {
    return dot_rtol(p.n()) * dynamic_cast<const dot_reference&>(*reference(p)).magnitude;
  }

  gate_result check_elementwise(const stream_data& p, const std::vector<host_span>& outputs) const {
    gate_result g;
    g.rtol = elementwise_rtol();
    g.atol = 0.0;
    const std::int64_t n = p.n();
    g.checked = n;
    const float* z = z_output(outputs);
    const gate_tally tally = tally_parallel(n, [&](std::int64_t i, gate_tally& t) {
      double ref, scale;
      elementwise_reference_at<K>(p, i, ref, scale);
      bool bad;
      double err;
      if constexpr (K == stream_kind::copy) {
        std::uint32_t a, b;
        std::memcpy(&a, &z[i], sizeof a);
        std::memcpy(&b, &p.x()[i], sizeof b);
        bad = a != b;
        err = std::isnan(z[i]) ? INFINITY : std::fabs(double(z[i]) - ref);
      } else {
        err = std::isnan(z[i]) ? INFINITY : std::fabs(double(z[i]) - ref);
        bad = !(err <= g.rtol * scale);
      }
      if (bad) t.fail(i);
      t.error(err, err == 0.0 ? 0.0 : (scale > 0.0 ? err / scale : INFINITY));
    });
    tally.into(g);
    const std::int64_t failures = tally.failures, first_bad = tally.first_bad;
    if (!g.passed) {
      double ref, scale;
      elementwise_reference_at<K>(p, first_bad, ref, scale);
      g.message = m_info.name + ": z[" + std::to_string(first_bad) + "] = " + format_g9(z[first_bad]) +
                  " but the float64 reference is " + format_g9(ref) + " (|error| " +
                  format_g9(std::fabs(double(z[first_bad]) - ref)) + ", bound " + format_g9(g.rtol * scale) +
                  (K == stream_kind::copy ? ": a copy must be bitwise exact" : "") + "); " + std::to_string(failures) +
                  " of " + std::to_string(n) + " elements fail";
    }
    return g;
  }

  gate_result check_dot(const stream_data& p, const dot_reference& ref, const std::vector<host_span>& outputs) const {
    return sum_gate(*d_output(outputs), ref, dot_rtol(p.n()), m_info.name + ": d",
                    "2^-24 (8 sqrt(" + format_g9(detail::float_sum_terms(p.n(), 1.0)) + ") + 1)");
  }

  operation_info m_info;
};

const operation_registration<stream_operation<stream_kind::copy>> register_stream_copy;
const operation_registration<stream_operation<stream_kind::scale>> register_stream_scale;
const operation_registration<stream_operation<stream_kind::add>> register_stream_add;
const operation_registration<stream_operation<stream_kind::triad>> register_stream_triad;
const operation_registration<stream_operation<stream_kind::dot>> register_stream_dot;

}  // namespace
}  // namespace kstudy::stream
