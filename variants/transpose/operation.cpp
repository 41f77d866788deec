// The transpose operation (transpose.hpp): t(c, r) = x(r, c).
//
// Inputs: x from seeded_floats over the rows * cols elements in row-major order (a value depends on
// its flat index, so a misplaced element almost surely differs from the one it displaced: ~2^24 distinct
// values plus the outliers).
// Reference and gate: a transpose moves bits and computes nothing, so t must equal x^T bitwise (rtol = atol
// = 0). The operation is written on the thin elementwise base (elementwise_operation.hpp): it declares each
// element's reference (expected(): x itself, nothing stored) and the base derives the gate, poison, corrupt()
// (t[0] moved by one ulp, the smallest change a float can take) and the conformance hooks.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/support/array_problem.hpp"
#include "kstudy/support/elementwise_operation.hpp"
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

// On the thin elementwise base: t(c, r) is x(r, c) with bound 0, the same bits.
class transpose_operation final : public elementwise_operation<transpose_operation, transpose_data> {
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

  std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const override {
    require_row_major(shape, m_info.name, "rows x cols shape");
    auto p = std::make_unique<transpose_data>(shape);
    fill_parallel(p->x(), p->elements(), [seed](std::int64_t i) { return seeded_float(seed, x_array, i); });
    return p;
  }
  std::vector<std::int64_t> output_elements(const table_shape& shape) const { return {shape.rows * shape.features}; }
  expected_value expected(const transpose_data& p, std::size_t, std::int64_t i) const {
    const std::int64_t c = i / p.rows(), r = i % p.rows();
    return {p.x()[r * p.cols() + c], 0.0};
  }
  std::string where(const transpose_data& p, std::size_t, std::int64_t i) const {
    return "t(" + std::to_string(i / p.rows()) + ", " + std::to_string(i % p.rows()) + ") = t[" + std::to_string(i) +
           "]";
  }

  traffic_model essential_traffic(const table_shape& shape) const override {
    return transpose::essential_traffic(shape.rows, shape.features);
  }
  std::int64_t essential_flops(const table_shape&) const override { return 0; }
  std::int64_t input_bytes(const table_shape& shape) const override {
    return shape.rows * shape.features * std::int64_t(sizeof(float));
  }
};

const operation_registration<transpose_operation> register_transpose;

}  // namespace
}  // namespace kstudy::transpose
