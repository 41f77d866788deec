// The reduce_sum operation (reduce_sum.hpp): s = sum_i x_i over n floats.
//
// Inputs: x from seeded_nonnegatives: uniform in [0, 2) on a 2^-23 grid (mean 1); a shorter problem
// is a prefix of a longer one. The terms do not cancel (they did before: with a zero-mean x, at n = 2^24,
// 2^28 and 2^30 a sum that returned 0 passed the gate, at 2^26 the sum of the first 73%), so
// sum |x_i| = s and a sum that skips a share of the terms is off by that share of the bound's scale.
//
// Reference and gate (u = 2^-24, the unit roundoff of float32): ref = sum_i x_i in float64, summed in fixed
// blocks, the blocks added in order (the same value on every thread count; its own error, ~2^-53 of the
// partial sums, is far below the bound), and magnitude = sum_i |x_i|.
//   |s - ref| <= u (lambda sqrt(T) + 1) * magnitude,  lambda = 8,  atol 0,
//   T = min(n - 1, 2 * 2^20 + ceil(log2 n))      (detail/float_sum_tolerance.hpp)
// The model (probabilistic, Higham & Mary, SIAM J. Sci. Comput. 41(5), 2019): to first order a float32
// sum in any order errs by sum_k delta_k P_k over its additions, P_k the partial sum computed and
// |delta_k| <= u; with the deltas independent and of mean zero, Hoeffding's inequality bounds it by
// lambda u sqrt(sum_k P_k^2) except with probability 2 exp(-lambda^2 / 2) = 2.5e-14 (lambda = 8). Every
// |P_k| <= magnitude; the count of additions whose P_k may reach that scale is what the order decides:
// the accepted implementations are per-thread (or per-block) float32 running sums of at most 2^20 terms,
// their partials combined by a tree or by a second chain of at most 2^20 (an atomicAdd per block), or
// float64 accumulation: at most 2 * 2^20 chain steps plus log2 n tree levels, each level's partials summing
// to at most the magnitude (the square of a sum bounds the sum of squares). The CUDA ladder: rungs 2 and 3
// chain <= 64 elements per thread and <= 65,535 block sums, rung 4 ~n / 2^18 per thread and a few thousand
// partials, CUB a tree, the Kokkos variants float64. The 1 is the final rounding of s to float. Rung 1 (one
// atomicAdd chain over all of x) is inside the model up to n = 2^20, and its error (~0.23 u sqrt(n) s for a
// chain on these inputs) stays ~12x inside the bound at the seed's 2^24; from 2^25 on its running sum
// passes 2^24 x the terms' size and every term is rounded away (the rounding no longer of mean zero), so
// its sum is rightly rejected there (at 2^26 it returns ~half the sum).
// What it can tell apart (the bound is flat beyond n = 2^21):
//   n = 2^20: rtol = 8,193 u = 4.9e-4;  n = 2^28 (the largest bench point) and 2^30: 11,586 u = 6.9e-4,
// while a sum that skipped 1% of the terms is off by 1e-2 of the magnitude: 14.5x the bound at 2^28 and
// 2^30 (tests/test_gate_conformance.cpp checks it at every bench point); an all-zero s is off by 1448x.
// A single element (~1) is below the bound from n ~ 1.6 * 10^4 on: there one lost element is within what
// float32 summation itself may err.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/float_sum_tolerance.hpp"
#include "kstudy/support/array_problem.hpp"
#include "kstudy/support/operation_helpers.hpp"
#include "kstudy/support/seeded_floats.hpp"
#include "kstudy/support/sum_operation.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"
#include "reduce/reduce_sum.hpp"

namespace kstudy::reduce {

traffic_model essential_traffic(std::int64_t n) {
  traffic_model t;
  t.bytes_read = n * std::int64_t(sizeof(float));
  t.bytes_written = std::int64_t(sizeof(double));
  return t;
}

const reduce_data& reduce_problem(const problem_data& problem) {
  const auto* data = dynamic_cast<const reduce_data*>(&problem);
  if (data == nullptr) throw std::invalid_argument("a reduce_sum variant was given another operation's problem");
  if (data->n() < 1 || data->x() == nullptr) throw std::invalid_argument("reduce_sum: n must be positive, x present");
  return *data;
}

variant_info variant_info_for(const std::string& name_suffix, const std::string& family,
                              const std::string& description) {
  return operation_variant_info(std::string(operation_name) + "_" + name_suffix, operation_name, family, description,
                                [](const table_shape& shape) { return essential_traffic(shape.rows); });
}

namespace {

constexpr std::uint64_t x_array = 0x78;

// On the thin sum base (kstudy/support/sum_operation.hpp): the terms are x itself.
class reduce_sum_operation final : public sum_operation<reduce_sum_operation, reduce_data> {
 public:
  reduce_sum_operation() {
    m_info.name = operation_name;
    m_info.description = "sum reduction: s = sum x_i over n floats (one addition per 4 bytes), s in float64";
    m_info.axes = {"n"};
    m_info.layouts = {table_layout::row_major};
    m_info.outputs = {"s"};
    m_info.bench_points = {{std::int64_t(1) << 20}, {std::int64_t(1) << 24}, {std::int64_t(1) << 28}};
    m_info.headline_point = {std::int64_t(1) << 28};
  }

  std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const override {
    require_row_major_vector(shape, m_info.name);
    auto p = std::make_unique<reduce_data>(shape);
    fill_parallel(p->x(), p->n(), [seed](std::int64_t i) { return seeded_nonnegative(seed, x_array, i); });
    return p;
  }
  const reduce_data& accept(const reduce_data& p) const { return reduce_problem(p); }
  std::int64_t terms(const reduce_data& p) const { return p.n(); }
  double term(const reduce_data& p, std::int64_t i) const { return p.x()[i]; }
  double rtol(std::int64_t n) const { return detail::float_sum_rtol(n, 0.0); }
  std::string rtol_formula(std::int64_t n) const {
    return "2^-24 (8 sqrt(" + format_g9(detail::float_sum_terms(n, 0)) + ") + 1)";
  }

  traffic_model essential_traffic(const table_shape& shape) const override {
    return reduce::essential_traffic(shape.rows);
  }
  std::int64_t essential_flops(const table_shape& shape) const override { return reduce::essential_flops(shape.rows); }
  std::int64_t input_bytes(const table_shape& shape) const override { return shape.rows * std::int64_t(sizeof(float)); }

  // x, n floats, streamed; s one float64 (a rung may return its float32 sum: the worker widens it).
  external_problem external_inputs(const problem_data& problem) const override {
    const auto& p = reduce_problem(problem);
    array_description x{"x", "float32", {p.n()}};
    const std::int64_t bytes = array_bytes(x);
    external_problem e;
    e.inputs.emplace_back(std::move(x), host_span{const_cast<float*>(p.x()), bytes});
    e.streamed = 1;
    return e;
  }
  std::vector<array_description> external_outputs(const table_shape&) const override { return {{"s", "float64", {}}}; }
};

const operation_registration<reduce_sum_operation> register_reduce_sum;

}  // namespace
}  // namespace kstudy::reduce
