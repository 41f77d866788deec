// The transpose operation (transpose.hpp): t(c, r) = x(r, c).
//
// Inputs: x from detail::seeded_floats over the rows * cols elements in row-major order (a value depends on
// its flat index, so a misplaced element almost surely differs from the one it displaced: ~2^24 distinct
// values plus the outliers).
// Reference and gate: a transpose moves bits and computes nothing, so t must equal x^T bitwise (rtol = atol
// = 0); check() reads the reference from x itself, so the reference object stores nothing. corrupt() flips
// the lowest bit of t[0]: one ulp, the smallest change a float can take.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/support/array_problem.hpp"
#include "kstudy/support/operation_helpers.hpp"
#include "kstudy/support/seeded_floats.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"
#include "transpose/transpose.hpp"

namespace kstudy::transpose {

traffic_model essential_traffic(std::int64_t rows, std::int64_t cols) {
  traffic_model t;
  t.bytes_read = rows * cols * std::int64_t(sizeof(float));
  t.bytes_written = t.bytes_read;
  return t;
}

const transpose_data& transpose_problem(const problem_data& problem) {
  const auto* data = dynamic_cast<const transpose_data*>(&problem);
  if (data == nullptr) throw std::invalid_argument("a transpose variant was given another operation's problem");
  if (data->rows() < 1 || data->cols() < 1 || data->x() == nullptr)
    throw std::invalid_argument("transpose: rows and cols must be positive, x present");
  return *data;
}

variant_info variant_info_for(const std::string& name_suffix, const std::string& family,
                              const std::string& description) {
  return operation_variant_info(std::string(operation_name) + "_" + name_suffix, operation_name, family, description,
                                [](const table_shape& shape) { return essential_traffic(shape.rows, shape.features); });
}

namespace {

constexpr std::uint64_t x_array = 0x54;

// Nothing: check() compares with x directly.
class transpose_reference final : public reference_data {};

bool same_bits(float a, float b) {
  std::uint32_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x == y;
}

class transpose_operation final : public operation {
 public:
  transpose_operation() {
    m_info.name = operation_name;
    m_info.description = "transpose: t = x^T, x row-major rows x cols, t row-major cols x rows (bitwise exact)";
    m_info.axes = {"rows", "cols"};
    m_info.layouts = {table_layout::row_major};
    m_info.outputs = {"t"};
    m_info.bench_points = {{1024, 1024}, {8192, 8192}, {8191, 3001}};
    m_info.headline_point = {8192, 8192};
  }
  const operation_info& info() const override { return m_info; }

  std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const override {
    check_shape(shape);
    auto p = std::make_unique<transpose_data>(shape);
    fill_parallel(p->x(), p->elements(), [seed](std::int64_t i) { return detail::seeded_float(seed, x_array, i); });
    return p;
  }
  std::unique_ptr<problem_data> relayout(const problem_data& source, const table_shape& shape) const override {
    check_shape(shape);
    return copied_problem(transpose_problem(source), shape, m_info.name);
  }
  std::unique_ptr<reference_data> reference(const problem_data& problem) const override {
    transpose_problem(problem);
    return std::make_unique<transpose_reference>();
  }
  std::vector<std::int64_t> output_bytes(const table_shape& shape) const override {
    return {shape.rows * shape.features * std::int64_t(sizeof(float))};
  }

  void poison(const std::vector<host_span>& outputs) const override { fill_nan(outputs.at(0)); }

  gate_result check(const problem_data& problem, const reference_data&,
                    const std::vector<host_span>& outputs) const override {
    const auto& p = transpose_problem(problem);
    const std::int64_t rows = p.rows(), cols = p.cols();
    const float* x = p.x();
    const float* t = t_output(outputs);
    gate_result g;
    g.rtol = 0.0;
    g.atol = 0.0;
    g.checked = rows * cols;
    // In 64 x 64 blocks, so both the x block and the t block stay in cache while one is gathered.
    constexpr std::int64_t block = 64;
    const std::int64_t col_blocks = (cols + block - 1) / block;
    const gate_tally tally = tally_parallel(col_blocks, [&](std::int64_t cb, gate_tally& found) {
      const std::int64_t c_end = std::min(cols, (cb + 1) * block);
      for (std::int64_t r0 = 0; r0 < rows; r0 += block) {
        const std::int64_t r_end = std::min(rows, r0 + block);
        for (std::int64_t c = cb * block; c < c_end; ++c) {
          for (std::int64_t r = r0; r < r_end; ++r) {
            const float got = t[c * rows + r], want = x[r * cols + c];
            if (same_bits(got, want)) continue;
            found.fail(c * rows + r);
            // Any difference is infinitely many bounds (0).
            found.error(std::isnan(got) ? INFINITY : std::fabs(double(got) - double(want)), INFINITY);
          }
        }
      }
    });
    tally.into(g);
    const std::int64_t failures = tally.failures, first_bad = tally.first_bad;
    if (!g.passed) {
      const std::int64_t c = first_bad / rows, r = first_bad % rows;
      g.message = "transpose: t(" + std::to_string(c) + ", " + std::to_string(r) + ") = t[" +
                  std::to_string(first_bad) + "] = " + format_g9(t[first_bad]) + " but x(" + std::to_string(r) + ", " +
                  std::to_string(c) + ") = " + format_g9(x[r * cols + c]) +
                  " (bound 0: a transpose must be bitwise exact); " + std::to_string(failures) + " of " +
                  std::to_string(rows * cols) + " elements fail";
    }
    return g;
  }

  void corrupt(const problem_data& problem, const std::vector<host_span>& outputs) const override {
    transpose_problem(problem);
    float* t = t_output(outputs);
    std::uint32_t bits;
    std::memcpy(&bits, t, sizeof bits);
    bits ^= 1u;
    std::memcpy(t, &bits, sizeof bits);
  }

  bool reference_outputs(const problem_data& problem, const reference_data&,
                         const std::vector<host_span>& outputs) const override {
    const auto& p = transpose_problem(problem);
    const std::int64_t rows = p.rows(), cols = p.cols();
    const float* x = p.x();
    float* t = t_output(outputs);
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < cols; ++c)
      for (std::int64_t r = 0; r < rows; ++r) t[c * rows + r] = x[r * cols + c];
    return true;
  }
  // Less work: the last columns of x (a band of tiles at the right edge) never written to t, whose rows
  // keep what they held before the run (zero here).
  void drop_work(const problem_data& problem, const reference_data& reference, const std::vector<host_span>& outputs,
                 double fraction) const override {
    const auto& p = transpose_problem(problem);
    reference_outputs(problem, reference, outputs);
    const std::int64_t dropped = std::max<std::int64_t>(1, std::int64_t(std::ceil(fraction * double(p.cols()))));
    float* t = t_output(outputs);
    std::fill(t + (p.cols() - dropped) * p.rows(), t + p.cols() * p.rows(), 0.0f);
  }

  traffic_model essential_traffic(const table_shape& shape) const override {
    return transpose::essential_traffic(shape.rows, shape.features);
  }
  std::int64_t essential_flops(const table_shape&) const override { return 0; }
  std::int64_t input_bytes(const table_shape& shape) const override {
    return shape.rows * shape.features * std::int64_t(sizeof(float));
  }
  std::int64_t reference_bytes(const table_shape&) const override { return 0; }

 private:
  void check_shape(const table_shape& shape) const { require_row_major(shape, m_info.name, "rows x cols shape"); }

  operation_info m_info;
};

const operation_registration<transpose_operation> register_transpose;

}  // namespace
}  // namespace kstudy::transpose
