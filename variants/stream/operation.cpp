// The STREAM operations (stream.hpp): stream_copy, stream_scale, stream_add and stream_triad, one class
// template over the kind on the thin elementwise base (elementwise_operation.hpp), and stream_dot, a reduction.
//
// Inputs. x and y are pure functions of (seed, index, array), so every thread count and every relayout
// gives the same values: uniform in [-1, 1) on a grid of 2^-23 (exact floats), except ~1% outliers of
// magnitude 100..1000 with a random sign, so a variant that drops or reorders elements cannot hide behind
// values of one size. No NaN or Inf is ever generated. stream_dot's x and y are instead uniform in [0, 2)
// (seeded_nonnegatives, as reduce_sum's x, no outliers): with zero-mean operands sum x_i y_i
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
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "detail/float_sum_tolerance.hpp"
#include "kstudy/support/elementwise_operation.hpp"
#include "kstudy/support/operation_helpers.hpp"
#include "kstudy/support/seeded_floats.hpp"
#include "kstudy/support/sum_operation.hpp"
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

stream_data::stream_data(const stream_data& other)
    : array_problem(other), m_kind(other.m_kind), m_x(array<float>(0)), m_y(arrays() > 1 ? array<float>(1) : nullptr) {}

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

constexpr double unit_roundoff = 0x1.0p-24;  // float's

// The operation_info every kind shares: one axis n, row-major vectors, its name and output.
operation_info stream_info(stream_kind kind) {
  operation_info info;
  info.name = operation_name(kind);
  info.description = kind_table[static_cast<int>(kind)].description;
  info.axes = {"n"};
  info.layouts = {table_layout::row_major};
  info.outputs = {is_reduction(kind) ? "d" : "z"};
  info.bench_points = {{std::int64_t(1) << 20}, {std::int64_t(1) << 24}, {std::int64_t(1) << 28}};
  return info;
}

// copy, scale, add and triad on the thin elementwise base: z[i] against its exact float64 reference and the
// bound of the kind's roundings (see the top of the file; copy's bound 0 demands the same bits).
template <stream_kind K>
class stream_elementwise_operation final : public elementwise_operation<stream_elementwise_operation<K>, stream_data> {
 public:
  static constexpr double rtol = K == stream_kind::copy    ? 0.0
                                 : K == stream_kind::triad ? 2 * unit_roundoff
                                                           : unit_roundoff;

  stream_elementwise_operation() {
    this->m_info = stream_info(K);
    this->m_rtol = rtol;
  }
  std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const override {
    require_row_major_vector(shape, this->m_info.name);
    auto x = seeded_floats(seed, x_array, shape.rows);
    auto y = has_y(K) ? seeded_floats(seed, y_array, shape.rows) : nullptr;
    return std::make_unique<stream_data>(K, shape, std::move(x), std::move(y));
  }
  const stream_data& accept(const stream_data& p) const { return stream_problem(p, K); }
  std::vector<std::int64_t> output_elements(const table_shape& shape) const { return {shape.rows}; }
  expected_value expected(const stream_data& p, std::size_t, std::int64_t i) const {
    const double x = p.x()[i];
    if constexpr (K == stream_kind::copy) return {x, 0.0};
    if constexpr (K == stream_kind::scale) return {double(p.q()) * x, rtol * std::fabs(double(p.q()) * x)};
    if constexpr (K == stream_kind::add) return {x + double(p.y()[i]), rtol * std::fabs(x + double(p.y()[i]))};
    const double qy = double(p.q()) * double(p.y()[i]);
    return {x + qy, rtol * (std::fabs(x) + std::fabs(qy))};
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
};

// dot on the thin sum base (kstudy/support/sum_operation.hpp): the terms are the exact products x_i y_i.
class stream_dot_operation final : public sum_operation<stream_dot_operation, stream_data> {
 public:
  stream_dot_operation() { m_info = stream_info(stream_kind::dot); }

  // Nonnegative operands, so that the sum does not cancel (see the top of the file).
  std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const override {
    require_row_major_vector(shape, m_info.name);
    return std::make_unique<stream_data>(stream_kind::dot, shape, seeded_nonnegatives(seed, x_array, shape.rows),
                                         seeded_nonnegatives(seed, y_array, shape.rows));
  }
  const stream_data& accept(const stream_data& p) const { return stream_problem(p, stream_kind::dot); }
  std::int64_t terms(const stream_data& p) const { return p.n(); }
  double term(const stream_data& p, std::int64_t i) const { return double(p.x()[i]) * double(p.y()[i]); }
  double rtol(std::int64_t n) const { return detail::float_sum_rtol(n, 1.0); }
  std::string rtol_formula(std::int64_t n) const {
    return "2^-24 (8 sqrt(" + format_g9(detail::float_sum_terms(n, 1.0)) + ") + 1)";
  }

  traffic_model essential_traffic(const table_shape& shape) const override {
    return stream::essential_traffic(stream_kind::dot, shape.rows);
  }
  std::int64_t essential_flops(const table_shape& shape) const override {
    return stream::essential_flops(stream_kind::dot, shape.rows);
  }
  std::int64_t input_bytes(const table_shape& shape) const override {
    return 2 * shape.rows * std::int64_t(sizeof(float));
  }
};

const operation_registration<stream_elementwise_operation<stream_kind::copy>> register_stream_copy;
const operation_registration<stream_elementwise_operation<stream_kind::scale>> register_stream_scale;
const operation_registration<stream_elementwise_operation<stream_kind::add>> register_stream_add;
const operation_registration<stream_elementwise_operation<stream_kind::triad>> register_stream_triad;
const operation_registration<stream_dot_operation> register_stream_dot;

}  // namespace
}  // namespace kstudy::stream
