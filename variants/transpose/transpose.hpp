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
#include "kstudy/support/array_problem.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::transpose {

inline constexpr const char* operation_name = "transpose";

// rows x cols floats read once and written once.
traffic_model essential_traffic(std::int64_t rows, std::int64_t cols);

// A transpose problem: the shape and the generated x (row-major rows x cols; rows(), cols(), x()).
class transpose_data final : public float_matrix_problem {
 public:
  using float_matrix_problem::float_matrix_problem;
};

// The problem as transpose_data; throws std::invalid_argument for another operation's problem.
const transpose_data& transpose_problem(const problem_data& problem);

// The output array: t, cols x rows floats.
inline float* t_output(const std::vector<host_span>& outputs) { return outputs.at(0).as<float>(); }

// Registration fields: name transpose_<suffix>, row-major, fusion full, one kernel, the essential traffic.
variant_info variant_info_for(const std::string& name_suffix, const std::string& family,
                              const std::string& description);

}  // namespace kstudy::transpose
