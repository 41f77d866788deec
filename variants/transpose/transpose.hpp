#pragma once
// transpose: t = x^T. The input x is row-major rows x cols (x(r, c) at r * cols + c); the output t is
// row-major cols x rows (t(c, r) at c * rows + r). Two axes, rows and cols: a point {rows, cols} is a
// row-major shape of `rows` rows and `cols` features. No arithmetic, so the gate is bitwise. Kokkos-free,
// so the handwritten CUDA and vendor variants (.cu) include it too.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::transpose {

inline constexpr const char* operation_name = "transpose";

// rows x cols floats read once and written once.
traffic_model essential_traffic(std::int64_t rows, std::int64_t cols);

class transpose_data final : public problem_data {
 public:
  transpose_data(const table_shape& shape, std::unique_ptr<float[]> x);
  const table_shape& shape() const override { return m_shape; }
  std::vector<host_span> streamed_inputs() const override;  // {x}
  std::int64_t rows() const { return m_shape.rows; }
  std::int64_t cols() const { return m_shape.features; }
  std::int64_t elements() const { return rows() * cols(); }
  const float* x() const { return m_x.get(); }

 private:
  table_shape m_shape;
  std::unique_ptr<float[]> m_x;
};

// The problem as transpose_data; throws std::invalid_argument for another operation's problem.
const transpose_data& transpose_problem(const problem_data& problem);

// The output array: t, cols x rows floats.
inline float* t_output(const std::vector<host_span>& outputs) { return outputs.at(0).as<float>(); }

// Registration fields: name transpose_<suffix>, row-major, fusion full, one kernel, the essential traffic.
variant_info variant_info_for(const std::string& name_suffix, const std::string& family,
                              const std::string& description);

}  // namespace kstudy::transpose
