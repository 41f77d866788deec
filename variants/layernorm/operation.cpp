// The LayerNorm operations (layernorm.hpp): layernorm and residual_layernorm, one class template over the
// kind, registered twice.
//
// Inputs. Pure functions of (seed, array, index), so every thread count and relayout gives the same values.
// Each row is, by a seeded coin, either
//  - a plain row: uniform in [-1, 1) on a grid of 2^-23, with ~1% outliers of magnitude 100..1000 and random
//    sign (a variant that drops or reorders elements cannot hide behind values of one size), or
//  - an offset row: a common offset c of magnitude 256..4096 and random sign plus uniform [-1, 1), rounded
//    to float. Its variance (~1/3) is ~10^-8 of E[x^2], so the one-pass float32 formula E[x^2] - E[x]^2
//    cancels catastrophically there (relative variance error ~ u c^2 / var >= 10^-2) and the gate rejects it;
//    two-pass, Welford and shifted formulas keep ~u sqrt(n).
// r (residual_layernorm) uses the plain-row generator; gamma is uniform in [-2, 2), beta in [-1, 1).
//
// Reference (float64). Per row of the normalised input v (x, or x + r summed exactly in float64): the mean,
// the biased variance by two passes, s = 1 / sqrt(var + eps) and a = mean |v|; y_ref = (v - mean) s gamma
// + beta is evaluated per element by check(), so the reference stores 3 doubles per row, not a matrix. h
// must be x + r rounded once: |h - (x + r)| <= u |x + r|.
//
// Tolerance of y (u = 2^-24, n = hidden, K = sqrt(n) + log2(n) + 2). A float32 variant's errors, first order:
//  - mean: a float sum of n values errs by at most ~n u sum|v| in the worst case, but by ~sqrt(n) u sum|v|
//    for rounding errors of random sign (Higham & Mary 2019; the stream_dot model), plus log2(n) tree levels;
//    the division and, for the residual, h's own rounding add u a each: dmu = u (K + 2) a. On an offset row
//    this term dominates: no float32 mean is closer than u |mean| to the true one.
//  - variance: a sum of n squares of rounded differences: relative u (K + 3); the mean's error enters only
//    at second order (sum (v - mean) = 0), as dmu^2; eps added with one rounding. A sum of nonnegative terms
//    has errors of one sign where small terms are swamped by a partial sum grown by outliers, so u K holds
//    for the accumulation every GPU kernel does -- sequential chunks of at most ~sqrt(n) elements per thread,
//    then a tree (worst case u (chunk + log2 n)) -- or for float64 accumulation (the Kokkos host teams), but
//    not for one float accumulator over a whole row: its swamping error grows like n u (measured ~140 u on
//    yhat at n = 8,192 with 1% outliers), and the gate rejects it at n >= 4,096.
//      rel_v = (u (K + 3) var + dmu^2) / (var + eps) + u.
//  - s: half of rel_v, plus rsqrtf's 2 ulp (or sqrtf then a division): rel_s = rel_v / 2 + 3u.
//  - normalised value yhat = (v - mean) s: |yhat| (rel_s + 2u) + s (dmu + u |v_j|) (the last term is h_j's
//    rounding for the residual; it only loosens layernorm's bound by u |x_j| s).
//  - y = yhat gamma + beta (two roundings or one FMA): |gamma| dyhat + 2u (|yhat gamma| + |beta|).
// The bound is twice that sum: the model is first order and probabilistic, and variants reorder the
// products (s gamma first, or (v - mean) s then gamma). gate_result::rtol is u K; an element's "scale" is
// its bound / rtol, so max_relative_error <= rtol exactly when every element passes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/support/moved_beyond.hpp"
#include "kstudy/support/operation_helpers.hpp"
#include "kstudy/support/splitmix64.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"
#include "layernorm/layernorm.hpp"

namespace kstudy::layernorm {

traffic_model pass_traffic(std::int64_t rows, std::int64_t hidden, int matrix_reads, int matrix_writes) {
  const std::int64_t matrix = rows * hidden * std::int64_t(sizeof(float));
  const std::int64_t parameters = 2 * hidden * std::int64_t(sizeof(float));  // gamma, beta
  return traffic_model{matrix_reads * matrix + parameters, matrix_writes * matrix};
}

traffic_model essential_traffic(layernorm_kind kind, std::int64_t rows, std::int64_t hidden) {
  return pass_traffic(rows, hidden, input_count(kind), output_count(kind));
}

std::int64_t essential_flops(layernorm_kind kind, std::int64_t rows, std::int64_t hidden) {
  const std::int64_t per_element = has_residual(kind) ? 9 : 8;
  return per_element * rows * hidden + 4 * rows;
}

layernorm_data::layernorm_data(layernorm_kind kind, const table_shape& shape, std::unique_ptr<float[]> x,
                               std::unique_ptr<float[]> r, std::unique_ptr<float[]> gamma,
                               std::unique_ptr<float[]> beta)
    : array_problem(shape),
      m_kind(kind),
      m_x(adopt("x", std::move(x), shape.rows * shape.features)),
      m_r(adopt("r", std::move(r), shape.rows * shape.features)),
      m_gamma(adopt("gamma", std::move(gamma), shape.features, false)),
      m_beta(adopt("beta", std::move(beta), shape.features, false)) {}

const layernorm_data& layernorm_problem(const problem_data& problem, layernorm_kind expected) {
  const auto* data = dynamic_cast<const layernorm_data*>(&problem);
  const std::string name = operation_name(expected);
  if (data == nullptr || data->kind() != expected)
    throw std::invalid_argument("a " + name + " variant was given another operation's problem");
  if (data->rows() < 1 || data->hidden() < 1) throw std::invalid_argument(name + ": rows and hidden must be positive");
  if (data->shape().layout != table_layout::row_major) throw std::invalid_argument(name + ": inputs must be row-major");
  if (data->x() == nullptr || data->gamma() == nullptr || data->beta() == nullptr ||
      (has_residual(expected) && data->r() == nullptr))
    throw std::invalid_argument(name + ": an input array is missing");
  return *data;
}

variant_info variant_info_for(layernorm_kind kind, const std::string& name, const std::string& family,
                              const std::string& description, int matrix_reads, int matrix_writes) {
  return operation_variant_info(name, operation_name(kind), family, description,
                                [matrix_reads, matrix_writes](const table_shape& shape) {
                                  return pass_traffic(shape.rows, shape.features, matrix_reads, matrix_writes);
                                });
}

namespace {

std::uint64_t hash(std::uint64_t seed, std::uint64_t array, std::int64_t i) {
  return splitmix64(splitmix64(seed ^ splitmix64(array)) + static_cast<std::uint64_t>(i));
}

constexpr double outlier_fraction = 0.01;
constexpr std::uint64_t x_array = 0x4c4e78, r_array = 0x4c4e72, gamma_array = 0x4c4e67, beta_array = 0x4c4e62,
                        row_array = 0x4c4e6f;

// Uniform in [-1, 1) on a grid of 2^-23, or an outlier of magnitude in [100, 1000) and random sign.
float plain_value(std::uint64_t seed, std::uint64_t array, std::int64_t i) {
  const std::uint64_t h1 = hash(seed, array, i), h2 = splitmix64(h1);
  if (unit_double(h2) < outlier_fraction) {
    const double magnitude = 100.0 + 900.0 * unit_double(splitmix64(h2));
    return static_cast<float>((h2 & 1) ? magnitude : -magnitude);
  }
  return static_cast<float>(-1.0 + static_cast<double>(h1 >> 40) * 0x1.0p-23);
}

// The common offset of a row: 0 for a plain row, else of magnitude [256, 4096) and random sign.
double row_offset(std::uint64_t seed, std::int64_t row) {
  const std::uint64_t h = hash(seed, row_array, row);
  if ((h >> 63) == 0) return 0.0;
  const double magnitude = 256.0 + 3840.0 * unit_double(splitmix64(h));
  return (h & 1) ? magnitude : -magnitude;
}

std::unique_ptr<float[]> generate_matrix(std::uint64_t seed, std::uint64_t array, std::int64_t rows,
                                         std::int64_t hidden, bool offsets) {
  std::unique_ptr<float[]> v(new float[static_cast<std::size_t>(rows * hidden)]);  // filled below
  float* out = v.get();
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < rows; ++row) {
    const double offset = offsets ? row_offset(seed, row) : 0.0;
    for (std::int64_t j = 0; j < hidden; ++j) {
      const std::int64_t i = row * hidden + j;
      if (offset == 0.0)
        out[i] = plain_value(seed, array, i);
      else
        out[i] = static_cast<float>(offset - 1.0 + 2.0 * unit_double(hash(seed, array, i)));
    }
  }
  return v;
}

std::unique_ptr<float[]> generate_uniform(std::uint64_t seed, std::uint64_t array, std::int64_t n, double low,
                                          double high) {
  std::unique_ptr<float[]> v(new float[static_cast<std::size_t>(n)]);
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<float>(low + (high - low) * unit_double(hash(seed, array, i)));
  return v;
}

std::unique_ptr<float[]> copy_array(const float* source, std::int64_t n) {
  if (source == nullptr) return nullptr;
  std::unique_ptr<float[]> v(new float[static_cast<std::size_t>(n)]);
  float* out = v.get();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) out[i] = source[i];
  return v;
}

// Per row: mean, s = 1 / sqrt(var + eps), a = mean |v| (v = x, or x + r exactly).
class layernorm_reference final : public reference_data {
 public:
  std::vector<double> mean, rstd, magnitude;
};

constexpr double unit_roundoff = 0x1.0p-24;

template <layernorm_kind K>
class layernorm_operation final : public described_operation {
 public:
  layernorm_operation() {
    m_info.name = operation_name(K);
    m_info.description =
        has_residual(K)
            ? "residual + LayerNorm: h = x + r, y = LayerNorm(h) over rows x hidden floats; outputs y and h "
              "(4 passes fused, 5 as add + LayerNorm kernels)"
            : "LayerNorm over rows x hidden floats: y = (x - mean) / sqrt(var + 1e-5) * gamma + beta per row";
    m_info.axes = {"rows", "hidden"};
    m_info.layouts = {table_layout::row_major};
    m_info.outputs = has_residual(K) ? std::vector<std::string>{"y", "h"} : std::vector<std::string>{"y"};
    m_info.bench_points = {{65536, 768}, {65536, 4096}, {65536, 8192}};
    m_info.headline_point = {65536, 4096};
  }

  std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const override {
    check_shape(shape);
    const std::int64_t rows = shape.rows, hidden = shape.features;
    auto x = generate_matrix(seed, x_array, rows, hidden, /*offsets=*/true);
    auto r = has_residual(K) ? generate_matrix(seed, r_array, rows, hidden, /*offsets=*/false) : nullptr;
    return std::make_unique<layernorm_data>(K, shape, std::move(x), std::move(r),
                                            generate_uniform(seed, gamma_array, hidden, -2.0, 2.0),
                                            generate_uniform(seed, beta_array, hidden, -1.0, 1.0));
  }
  // Only row-major exists: the same arrays, copied.
  std::unique_ptr<problem_data> relayout(const problem_data& source, const table_shape& shape) const override {
    check_shape(shape);
    const auto& d = layernorm_problem(source, K);
    if (d.rows() != shape.rows || d.hidden() != shape.features)
      throw std::invalid_argument(m_info.name + ": relayout cannot change the extents");
    return std::make_unique<layernorm_data>(K, shape, copy_array(d.x(), d.elements()), copy_array(d.r(), d.elements()),
                                            copy_array(d.gamma(), d.hidden()), copy_array(d.beta(), d.hidden()));
  }

  std::unique_ptr<reference_data> reference(const problem_data& problem) const override {
    const auto& p = layernorm_problem(problem, K);
    const std::int64_t rows = p.rows(), n = p.hidden();
    auto ref = std::make_unique<layernorm_reference>();
    ref->mean.resize(static_cast<std::size_t>(rows));
    ref->rstd.resize(static_cast<std::size_t>(rows));
    ref->magnitude.resize(static_cast<std::size_t>(rows));
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < rows; ++row) {
      double sum = 0.0, absolute = 0.0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double v = input_at(p, row * n + j);
        sum += v;
        absolute += std::fabs(v);
      }
      const double mean = sum / double(n);
      double squares = 0.0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double d = input_at(p, row * n + j) - mean;
        squares += d * d;
      }
      const auto k = static_cast<std::size_t>(row);
      ref->mean[k] = mean;
      ref->rstd[k] = 1.0 / std::sqrt(squares / double(n) + double(epsilon));
      ref->magnitude[k] = absolute / double(n);
    }
    return ref;
  }

  std::vector<std::int64_t> output_bytes(const table_shape& shape) const override {
    return std::vector<std::int64_t>(output_count(K), shape.rows * shape.features * std::int64_t(sizeof(float)));
  }

  // x (and r) rows x hidden, streamed; gamma and beta `hidden` floats; eps is PyTorch's default (no scalar).
  external_problem external_inputs(const problem_data& problem) const override {
    const auto& p = layernorm_problem(problem, K);
    const auto floats = [](const char* name, std::vector<std::int64_t> extents, const float* data) {
      array_description a{name, "float32", std::move(extents)};
      const std::int64_t bytes = array_bytes(a);
      return std::make_pair(std::move(a), host_span{const_cast<float*>(data), bytes});
    };
    external_problem e;
    e.inputs.push_back(floats("x", {p.rows(), p.hidden()}, p.x()));
    if (has_residual(K)) e.inputs.push_back(floats("r", {p.rows(), p.hidden()}, p.r()));
    e.streamed = e.inputs.size();
    e.inputs.push_back(floats("gamma", {p.hidden()}, p.gamma()));
    e.inputs.push_back(floats("beta", {p.hidden()}, p.beta()));
    return e;
  }
  std::vector<array_description> external_outputs(const table_shape& shape) const override {
    std::vector<array_description> out{{"y", "float32", {shape.rows, shape.features}}};
    if (has_residual(K)) out.push_back({"h", "float32", {shape.rows, shape.features}});
    return out;
  }

  void poison(const std::vector<host_span>& outputs) const override {
    for (const auto& out : outputs) fill_nan(out);
  }

  gate_result check(const problem_data& problem, const reference_data& reference,
                    const std::vector<host_span>& outputs) const override {
    const auto& p = layernorm_problem(problem, K);
    const auto& ref = dynamic_cast<const layernorm_reference&>(reference);
    if (outputs.size() != std::size_t(output_count(K)))
      throw std::invalid_argument(m_info.name + ": expected " + std::to_string(output_count(K)) + " output arrays");
    const std::int64_t rows = p.rows(), n = p.hidden(), total = p.elements();
    gate_result g;
    g.rtol = rtol(n);
    g.atol = 0.0;
    g.checked = output_count(K) * total;
    const float* y = y_output(outputs);
    const float* h = has_residual(K) ? h_output(outputs) : nullptr;
    const gate_tally tally = tally_rows(rows, n, [&](std::int64_t row, std::int64_t j, std::int64_t i, gate_tally& t) {
      double expected, bound;
      y_reference_at(p, ref, row, j, expected, bound);
      const double err = reference_error(y[i], expected);
      bool bad = !(err <= bound);
      double rel = err == 0.0 ? 0.0 : err / bound * g.rtol;
      std::int64_t code = i;  // y[i]; h[i] as total + i
      if (h != nullptr) {
        const double v = input_at(p, i);
        const double h_err = reference_error(h[i], v);
        const double h_bound = unit_roundoff * std::fabs(v);
        if (!(h_err <= h_bound)) {
          if (!bad) code = total + i;
          bad = true;
        }
        t.error(h_err, 0.0);
        if (h_err != 0.0) rel = std::max(rel, h_bound > 0.0 ? h_err / h_bound * g.rtol : INFINITY);
      }
      if (bad) t.fail(code);
      t.error(err, rel);
    });
    tally.into(g);
    if (!g.passed) g.message = describe_failure(p, ref, outputs, tally.first_bad, tally.failures);
    return g;
  }

  void corrupt(const problem_data& problem, const std::vector<host_span>& outputs) const override {
    // y[0] moved to the first float beyond twice its bound: |new - ref| >= |new - y| - |y - ref| > bound.
    const auto& p = layernorm_problem(problem, K);
    const auto ref = reference(problem);
    double expected, bound;
    y_reference_at(p, dynamic_cast<const layernorm_reference&>(*ref), 0, 0, expected, bound);
    float& y = y_output(outputs)[0];
    y = moved_beyond(y, bound);
  }

  bool reference_outputs(const problem_data& problem, const reference_data& reference,
                         const std::vector<host_span>& outputs) const override {
    const auto& p = layernorm_problem(problem, K);
    const auto& ref = dynamic_cast<const layernorm_reference&>(reference);
    const std::int64_t n = p.hidden();
    float* y = y_output(outputs);
    float* h = has_residual(K) ? h_output(outputs) : nullptr;
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < p.rows(); ++row)
      for (std::int64_t j = 0; j < n; ++j) {
        double expected, bound;
        y_reference_at(p, ref, row, j, expected, bound);
        y[row * n + j] = static_cast<float>(expected);
        if (h != nullptr) h[row * n + j] = static_cast<float>(input_at(p, row * n + j));
      }
    return true;
  }
  // Less work: each row's mean and variance taken over all but its last elements (a missed remainder of
  // the reduction loops), then every y normalised with them; h is right.
  void drop_work(const problem_data& problem, const reference_data& reference, const std::vector<host_span>& outputs,
                 double fraction) const override {
    const auto& p = layernorm_problem(problem, K);
    reference_outputs(problem, reference, outputs);
    const std::int64_t n = p.hidden();
    const std::int64_t kept = n - std::max<std::int64_t>(1, std::int64_t(std::ceil(fraction * double(n))));
    float* y = y_output(outputs);
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < p.rows(); ++row) {
      double sum = 0.0, squares = 0.0;
      for (std::int64_t j = 0; j < kept; ++j) sum += input_at(p, row * n + j);
      const double mean = sum / double(kept);
      for (std::int64_t j = 0; j < kept; ++j) {
        const double d = input_at(p, row * n + j) - mean;
        squares += d * d;
      }
      const double s = 1.0 / std::sqrt(squares / double(kept) + double(epsilon));
      for (std::int64_t j = 0; j < n; ++j)
        y[row * n + j] =
            static_cast<float>((input_at(p, row * n + j) - mean) * s * double(p.gamma()[j]) + double(p.beta()[j]));
    }
  }

  traffic_model essential_traffic(const table_shape& shape) const override {
    return layernorm::essential_traffic(K, shape.rows, shape.features);
  }
  std::int64_t essential_flops(const table_shape& shape) const override {
    return layernorm::essential_flops(K, shape.rows, shape.features);
  }
  std::int64_t input_bytes(const table_shape& shape) const override {
    return (input_count(K) * shape.rows + 2) * shape.features * std::int64_t(sizeof(float));
  }
  // Three doubles per row (mean, rstd, mean |v|); y's reference is evaluated per element by check().
  std::int64_t reference_bytes(const table_shape& shape) const override {
    return 3 * shape.rows * std::int64_t(sizeof(double));
  }

  // u K: the relative factor of the bound's dominant terms (the file's comment).
  static double rtol(std::int64_t n) { return unit_roundoff * (std::sqrt(double(n)) + std::log2(double(n)) + 2.0); }

 private:
  void check_shape(const table_shape& shape) const { require_row_major(shape, m_info.name, "rows x hidden shape"); }

  // The normalised input v_i: x_i, or x_i + r_i exactly in float64.
  static double input_at(const layernorm_data& p, std::int64_t i) {
    if constexpr (has_residual(K))
      return double(p.x()[i]) + double(p.r()[i]);
    else
      return double(p.x()[i]);
  }

  // y's float64 reference at (row, j) and its bound (the file's tolerance model).
  static void y_reference_at(const layernorm_data& p, const layernorm_reference& ref, std::int64_t row, std::int64_t j,
                             double& expected, double& bound) {
    const double u = unit_roundoff, n = double(p.hidden());
    const double k = std::sqrt(n) + std::log2(n) + 2.0;
    const auto r = static_cast<std::size_t>(row);
    const double mean = ref.mean[r], s = ref.rstd[r], a = ref.magnitude[r];
    const double var_eps = 1.0 / (s * s), var = std::max(0.0, var_eps - double(epsilon));
    const double v = input_at(p, row * p.hidden() + j);
    const double yhat = (v - mean) * s, gamma = p.gamma()[j], beta = p.beta()[j];
    expected = yhat * gamma + beta;
    const double dmu = u * (k + 2.0) * a;
    const double rel_v = (u * (k + 3.0) * var + dmu * dmu) / var_eps + u;
    const double rel_s = rel_v / 2.0 + 3.0 * u;
    const double dyhat = std::fabs(yhat) * (rel_s + 2.0 * u) + s * (dmu + u * std::fabs(v));
    bound = 2.0 * (std::fabs(gamma) * dyhat + 2.0 * u * (std::fabs(yhat * gamma) + std::fabs(beta)));
  }

  std::string describe_failure(const layernorm_data& p, const layernorm_reference& ref,
                               const std::vector<host_span>& outputs, std::int64_t code, std::int64_t failures) const {
    const std::int64_t n = p.hidden(), total = p.elements();
    const std::string of = "; " + std::to_string(failures) + " of " + std::to_string(total) + " elements fail";
    if (code >= total) {
      const std::int64_t i = code - total;
      const double v = input_at(p, i);
      return m_info.name + ": h[" + std::to_string(i / n) + "][" + std::to_string(i % n) +
             "] = " + format_g9(h_output(outputs)[i]) + " but x + r = " + format_g9(v) + " (|error| " +
             format_g9(std::fabs(double(h_output(outputs)[i]) - v)) + ", bound " +
             format_g9(unit_roundoff * std::fabs(v)) + ": one rounding)" + of;
    }
    const std::int64_t row = code / n, j = code % n;
    double expected, bound;
    y_reference_at(p, ref, row, j, expected, bound);
    const float y = y_output(outputs)[code];
    return m_info.name + ": y[" + std::to_string(row) + "][" + std::to_string(j) + "] = " + format_g9(y) +
           " but the float64 reference is " + format_g9(expected) + " (|error| " +
           format_g9(std::fabs(double(y) - expected)) + ", bound " + format_g9(bound) + "; row mean " +
           format_g9(ref.mean[static_cast<std::size_t>(row)]) + ", rstd " +
           format_g9(ref.rstd[static_cast<std::size_t>(row)]) + ")" + of;
  }
};

const operation_registration<layernorm_operation<layernorm_kind::plain>> register_layernorm;
const operation_registration<layernorm_operation<layernorm_kind::residual>> register_residual_layernorm;

}  // namespace
}  // namespace kstudy::layernorm
