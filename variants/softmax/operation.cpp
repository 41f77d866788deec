// The softmax operation (softmax.hpp): rows x cols float32, row-major, softmax over each row.
//
// Inputs. x(r, c) is a pure function of (seed, r, c) (the same values on every thread count), always a
// multiple of 2^-10 below 2^23 * 2^-10 = 8192 in magnitude, so every difference x(r, c) - x(r, k) is an
// exact float32: the subtraction of the row max is exact, in the reference and in every variant. Rows
// come in classes drawn per row, so that skipping the max subtraction, or getting it wrong, fails:
//  - half the rows are shifted by an offset c_r of magnitude [64, 960): +c_r overflows exp(x) in float
//    (exp(x) > FLT_MAX beyond 88.7), -c_r underflows every exp(x) to 0 (a 0 / 0 without the max);
//  - 1 in 16 rows has one huge outlier c_r + [1024, 4096): its output is 1 and every other one is 0;
//  - per element: 98.5% uniform in c_r + [-4, 4), 0.5% spikes c_r + [4, 20) (a dominant few), 1% sinks
//    c_r - [16, 2048) (outputs that underflow, or nearly: float32 denormals).
//
// Reference (float64): per row m_r = max x (exact), S_r = sum_k exp(x_k - m_r), w_r = sum_k y_k |x_k - m_r|
// (the mean distance from the max under the softmax weights) and z_r = sum of the terms exp(x_k - m_r)
// below 2u S_r (see the sum below); check() evaluates y_j = exp(d_j) / S_r, d_j = x_j - m_r, per element,
// so the reference stores 4 doubles per row, not a matrix (8 GiB saved at 65,536 x 16,384).
//
// Gate: |y_j - ref_j| <= (rtol_r + 3u|d_j|) ref_j + atol, u = 2^-24, atol = 2^-126 (FLT_MIN), with
//   rtol_r = u (8 sqrt(cols - 1) + 4 log2(cols) + 16 + 3 w_r) + z_r / S_r.
// Where the terms come from, as relative errors of y_j:
//  - exp(d_j): up to 2 ulp (CUDA expf; 4u) plus an error in the argument: d_j is exact, but an exp2-based
//    exp scales it by log2(e) (one rounding: |d_j| u), and CUDA's __expf errs by 2 + 1.173|d_j| ulp
//    (<= 4u + 2.35|d_j| u): 4u + 3u|d_j| covers both;
//  - the same errors inside S_r, averaged with the weights y_k: 4u + 3u w_r;
//  - the sum of cols positive terms, in two parts. To first order a float sum in any order errs by
//    sum_k delta_k P_k over its cols - 1 additions (P_k the partial sums, all <= S_r here: the terms are
//    positive). (i) A term below half an ulp of the partial sum it joins (below 2u S_r at most) may be
//    rounded away whole, and in a row a few spikes dominate thousands are, all in the same direction:
//    no randomness to rely on, so they are bounded by their own total z_r (a serial sum of 4,099 such terms
//    measured 236u, which the worst case (cols - 1) u, the old bound, was needed for and z_r now covers).
//    (ii) The roundings of the other terms are of random sign (Higham & Mary, SIAM J. Sci. Comput. 41(5),
//    2019): by Hoeffding's inequality their sum is below 8 u sqrt(cols - 1) S_r except with probability
//    2 exp(-32) = 2.5e-14 per row, whatever the order (serial, blocked, tree: every |P_k| <= S_r).
//    At 16,384 columns (the largest bench point) that is 1,024u = 6.1e-5 relative (the old (cols - 1) u
//    was 16,383u = 9.8e-4, ~16 typical lost terms) plus z_r / S_r, which is ~0 on rows without spikes and
//    on spike rows only the total of terms no float32 sum can hold; dropping 1% of a row's terms moves its
//    outputs by ~1e-2 in a row without a dominant spike (~150x the bound) and fails wherever the 1% held
//    a spike;
//  - online softmax (running max, rescaled sum): every rescale multiplies a partial sum by a computed exp
//    and rounds (5u each); there are about ln(cols) of them per thread on random data plus one per level
//    of the combining tree: 4 log2(cols) + 4;
//  - the division (or a reciprocal and a multiply): 2 roundings, 4u.
// atol: outputs below FLT_MIN are denormal (or flushed to 0 by a fast-math exp) and carry no relative
// accuracy; every such output may be off by up to FLT_MIN.
// gate_result::rtol reports u (8 sqrt(cols - 1) + 4 log2(cols) + 16), the part common to every element;
// max_relative_error is max |y - ref| / ref over references of at least FLT_MIN.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/support/array_problem.hpp"
#include "kstudy/support/moved_beyond.hpp"
#include "kstudy/support/operation_helpers.hpp"
#include "kstudy/support/splitmix64.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"
#include "softmax/softmax.hpp"

namespace kstudy::softmax {

traffic_model essential_traffic(std::int64_t rows, std::int64_t cols) {
  traffic_model t;
  t.bytes_read = rows * cols * std::int64_t(sizeof(float));
  t.bytes_written = rows * cols * std::int64_t(sizeof(float));
  return t;
}

std::int64_t essential_flops(std::int64_t rows, std::int64_t cols) { return 5 * rows * cols; }

const softmax_data& softmax_problem(const problem_data& problem) {
  const auto* data = dynamic_cast<const softmax_data*>(&problem);
  if (data == nullptr) throw std::invalid_argument("a softmax variant was given another operation's problem");
  if (data->rows() < 1 || data->cols() < 1) throw std::invalid_argument("softmax: rows and cols must be positive");
  if (data->x() == nullptr) throw std::invalid_argument("softmax: the input matrix is missing");
  return *data;
}

variant_info variant_info_for(const std::string& name_suffix, const std::string& family,
                              const std::string& description) {
  return operation_variant_info("softmax_" + name_suffix, operation_name, family, description,
                                [](const table_shape& shape) { return essential_traffic(shape.rows, shape.features); });
}

namespace {

// Values are integers of ticks = 2^-10 (see the top of the file).
constexpr std::int64_t tick = 1024;
constexpr std::uint64_t row_array = 0x72, x_array = 0x78;

// An integer in [lo, hi) ticks from 24 bits of h.
std::int64_t ticks_in(std::uint64_t h, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>((h >> 40) % static_cast<std::uint64_t>(hi - lo));
}

struct row_class {
  std::int64_t offset = 0;     // c_r in ticks
  std::int64_t huge_col = -1;  // column of the huge outlier, or -1
  std::int64_t huge = 0;       // its value in ticks
  std::uint64_t elements = 0;  // the hash the row's elements derive from
};

row_class classify(std::uint64_t seed, std::int64_t r, std::int64_t cols) {
  const std::uint64_t h = splitmix64(splitmix64(seed ^ splitmix64(row_array)) + static_cast<std::uint64_t>(r));
  row_class c;
  const double shift = unit_double(h);
  if (shift < 0.5) {
    const std::int64_t magnitude = ticks_in(splitmix64(h ^ 1), 64 * tick, 960 * tick);
    c.offset = shift < 0.25 ? magnitude : -magnitude;
  }
  if (unit_double(splitmix64(h ^ 2)) < 1.0 / 16) {
    c.huge_col = static_cast<std::int64_t>(splitmix64(h ^ 3) % static_cast<std::uint64_t>(cols));
    c.huge = c.offset + ticks_in(splitmix64(h ^ 4), 1024 * tick, 4096 * tick);
  }
  c.elements = splitmix64(splitmix64(seed ^ splitmix64(x_array)) + static_cast<std::uint64_t>(r));
  return c;
}

float element(const row_class& row, std::int64_t c) {
  if (c == row.huge_col) return static_cast<float>(double(row.huge) / tick);
  const std::uint64_t h1 = splitmix64(row.elements + static_cast<std::uint64_t>(c));
  const double kind = unit_double(splitmix64(h1));
  std::int64_t t;
  if (kind < 0.005)
    t = row.offset + ticks_in(h1, 4 * tick, 20 * tick);  // spike
  else if (kind < 0.015)
    t = row.offset - ticks_in(h1, 16 * tick, 2048 * tick);  // sink
  else
    t = row.offset + ticks_in(h1, -4 * tick, 4 * tick);
  return static_cast<float>(double(t) / tick);  // exact: |t| < 2^23
}

// Per row: the max, the sum of exp(x - max), w and z (see the top of the file), in float64.
class softmax_reference final : public reference_data {
 public:
  std::vector<double> max, sum, weight, swamped;  // swamped: z_r, the terms below 2u S_r
};

constexpr double unit_roundoff = 0x1.0p-24;
constexpr double absolute_tolerance = 0x1.0p-126;

double common_rtol(std::int64_t cols) {
  return unit_roundoff * (8 * std::sqrt(double(cols - 1)) + 4 * std::log2(double(cols)) + 16);
}

class softmax_operation final : public described_operation {
 public:
  softmax_operation() {
    m_info.name = operation_name;
    m_info.description =
        "softmax over rows: y = exp(x - row max) / row sum, rows x cols float32 (read once, write once)";
    m_info.axes = {"rows", "cols"};
    m_info.layouts = {table_layout::row_major};
    m_info.outputs = {"y"};
    m_info.bench_points = {{65536, 1024}, {65536, 4096}, {65536, 16384}};
    m_info.headline_point = {65536, 4096};
  }

  std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const override {
    check_shape(shape);
    const std::int64_t rows = shape.rows, cols = shape.features;
    auto p = std::make_unique<softmax_data>(shape);
    float* out = p->x();
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const row_class row = classify(seed, r, cols);
      for (std::int64_t c = 0; c < cols; ++c) out[r * cols + c] = element(row, c);
    }
    return p;
  }

  std::unique_ptr<problem_data> relayout(const problem_data& source, const table_shape& shape) const override {
    check_shape(shape);
    return copied_problem(softmax_problem(source), shape, m_info.name);
  }

  std::unique_ptr<reference_data> reference(const problem_data& problem) const override {
    const auto& p = softmax_problem(problem);
    const std::int64_t rows = p.rows(), cols = p.cols();
    auto ref = std::make_unique<softmax_reference>();
    ref->max.resize(static_cast<std::size_t>(rows));
    ref->sum.resize(static_cast<std::size_t>(rows));
    ref->weight.resize(static_cast<std::size_t>(rows));
    ref->swamped.resize(static_cast<std::size_t>(rows));
    const float* x = p.x();
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* row = x + r * cols;
      double m = row[0];
      for (std::int64_t c = 1; c < cols; ++c) m = std::max(m, double(row[c]));
      double s = 0.0, w = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const double d = double(row[c]) - m, e = std::exp(d);
        s += e;
        w += e * std::fabs(d);
      }
      // The terms below 2u S (a float sum may round them away whole): d < log(2u S), a second pass that
      // takes an exp only of those.
      const double below = std::log(2 * unit_roundoff * s);
      double z = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const double d = double(row[c]) - m;
        if (d < below) z += std::exp(d);
      }
      const auto i = static_cast<std::size_t>(r);
      ref->max[i] = m;
      ref->sum[i] = s;
      ref->weight[i] = w / s;  // s >= 1: the max's own term is exp(0)
      ref->swamped[i] = z;
    }
    return ref;
  }

  std::vector<std::int64_t> output_bytes(const table_shape& shape) const override {
    return {shape.rows * shape.features * std::int64_t(sizeof(float))};
  }
  // For a Python rung: x in, y out, both rows x cols float32.
  external_problem external_inputs(const problem_data& problem) const override {
    const auto& p = softmax_problem(problem);
    external_problem e;
    e.inputs.push_back({{"x", "float32", {p.rows(), p.cols()}},
                        host_span{const_cast<float*>(p.x()), p.elements() * std::int64_t(sizeof(float))}});
    e.streamed = 1;
    return e;
  }
  std::vector<array_description> external_outputs(const table_shape& shape) const override {
    return {{"y", "float32", {shape.rows, shape.features}}};
  }

  void poison(const std::vector<host_span>& outputs) const override { fill_nan(outputs.at(0)); }

  gate_result check(const problem_data& problem, const reference_data& reference,
                    const std::vector<host_span>& outputs) const override {
    const auto& p = softmax_problem(problem);
    const auto& ref = dynamic_cast<const softmax_reference&>(reference);
    const std::int64_t rows = p.rows(), cols = p.cols(), n = p.elements();
    gate_result g;
    g.rtol = common_rtol(cols);
    g.atol = absolute_tolerance;
    g.checked = n;
    const float* y = y_output(outputs);
    const gate_tally tally = tally_parallel(rows, [&](std::int64_t r, gate_tally& t) {
      const auto row = row_reference(p, ref, r);
      const float* x = p.x() + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t i = r * cols + c;
        double expected, bound;
        element_reference(row, x[c], expected, bound);
        const double err = reference_error(y[i], expected);
        if (!(err <= bound)) t.fail(i);
        const double relative = expected >= absolute_tolerance ? err / expected
                                : err > absolute_tolerance     ? INFINITY
                                                               : 0.0;
        t.error(err, relative);
      }
    });
    tally.into(g);
    const std::int64_t failures = tally.failures, first_bad = tally.first_bad;
    if (!g.passed) {
      const std::int64_t r = first_bad / cols, c = first_bad % cols;
      double expected, bound;
      element_reference(row_reference(p, ref, r), p.x()[first_bad], expected, bound);
      g.message = m_info.name + ": y[" + std::to_string(r) + ", " + std::to_string(c) +
                  "] = " + format_g9(y[first_bad]) + " but the float64 reference is " + format_g9(expected) +
                  " (|error| " + format_g9(std::fabs(double(y[first_bad]) - expected)) + ", bound " + format_g9(bound) +
                  "); " + std::to_string(failures) + " of " + std::to_string(n) + " elements fail";
    }
    return g;
  }

  // The largest output of row 0 (its max's; a value near 1 in a huge-outlier row) moved to the first
  // float more than twice its bound away: |new - ref| >= |new - y| - |y - ref| > bound.
  void corrupt(const problem_data& problem, const std::vector<host_span>& outputs) const override {
    const auto& p = softmax_problem(problem);
    const auto ref = reference(p);
    const auto& typed = dynamic_cast<const softmax_reference&>(*ref);
    const float* row = p.x();
    const std::int64_t c = std::max_element(row, row + p.cols()) - row;
    double expected, bound;
    element_reference(row_reference(p, typed, 0), row[c], expected, bound);
    float& y = y_output(outputs)[c];
    y = moved_beyond(y, bound);
  }

  bool reference_outputs(const problem_data& problem, const reference_data& reference,
                         const std::vector<host_span>& outputs) const override {
    const auto& p = softmax_problem(problem);
    const auto& ref = dynamic_cast<const softmax_reference&>(reference);
    float* y = y_output(outputs);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < p.rows(); ++r) {
      const auto row = row_reference(p, ref, r);
      for (std::int64_t c = 0; c < p.cols(); ++c) {
        double expected, bound;
        element_reference(row, p.x()[r * p.cols() + c], expected, bound);
        y[r * p.cols() + c] = static_cast<float>(expected);
      }
    }
    return true;
  }
  // Less work: each row's normaliser misses a block of ~fraction of its columns (a skipped tile of the
  // sum loop); the max and the numerators are right. The block skipped is the one that starts at the row's
  // max (wrapping): a block of terms each below the float32 resolution of the sum (the tail of a row that a
  // huge outlier or a few spikes dominate) is lost by every float32 sum, and a gate that passes its loss is
  // right to; the block with the max carries the row's weight.
  void drop_work(const problem_data& problem, const reference_data& reference, const std::vector<host_span>& outputs,
                 double fraction) const override {
    const auto& p = softmax_problem(problem);
    const auto& ref = dynamic_cast<const softmax_reference&>(reference);
    const std::int64_t cols = p.cols();
    const std::int64_t dropped = std::max<std::int64_t>(1, std::int64_t(std::ceil(fraction * double(cols))));
    float* y = y_output(outputs);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < p.rows(); ++r) {
      const float* row = p.x() + r * cols;
      const double m = ref.max[static_cast<std::size_t>(r)];
      const std::int64_t first = std::max_element(row, row + cols) - row;
      double s = 0.0;
      for (std::int64_t c = 0; c < cols; ++c)
        if ((c - first + cols) % cols >= dropped) s += std::exp(double(row[c]) - m);
      for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(std::exp(double(row[c]) - m) / s);
    }
  }

  traffic_model essential_traffic(const table_shape& shape) const override {
    return softmax::essential_traffic(shape.rows, shape.features);
  }
  std::int64_t essential_flops(const table_shape& shape) const override {
    return softmax::essential_flops(shape.rows, shape.features);
  }
  std::int64_t input_bytes(const table_shape& shape) const override {
    return shape.rows * shape.features * std::int64_t(sizeof(float));
  }
  // Four doubles per row (max, sum, weight, swamped): check() evaluates each element's reference from them.
  std::int64_t reference_bytes(const table_shape& shape) const override {
    return 4 * shape.rows * std::int64_t(sizeof(double));
  }

 private:
  void check_shape(const table_shape& shape) const { require_row_major(shape, m_info.name, "rows x cols shape"); }

  // What every element of row r shares in its reference and bound (see the top of the file), worked out once a
  // row: the row's max and sum and rtol_r. Worked out once an element (common_rtol's square root and logarithm,
  // the division z_r / S_r), they took 45% of the gate's time on the 2-core VM (performance notes, session 31).
  struct row_terms {
    double max, sum, rtol;
  };
  static row_terms row_reference(const softmax_data& p, const softmax_reference& ref, std::int64_t r) {
    const auto i = static_cast<std::size_t>(r);
    return {ref.max[i], ref.sum[i],
            common_rtol(p.cols()) + unit_roundoff * 3 * ref.weight[i] + ref.swamped[i] / ref.sum[i]};
  }
  // The float64 reference of y(r, c) from x(r, c) and its bound (rtol_r + 3u|d|) ref + atol.
  static void element_reference(const row_terms& row, float x, double& expected, double& bound) {
    const double d = double(x) - row.max;
    expected = std::exp(d) / row.sum;
    bound = (row.rtol + unit_roundoff * 3 * std::fabs(d)) * expected + absolute_tolerance;
  }
};

const operation_registration<softmax_operation> register_softmax;

}  // namespace
}  // namespace kstudy::softmax
