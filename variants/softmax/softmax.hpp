#pragma once
// Softmax over rows (the kernel lab's third ladder): y(r, c) = exp(x(r, c) - m_r) / sum_k exp(x(r, k) - m_r),
// m_r = max_k x(r, k), on a row-major rows x cols float32 matrix. Axes rows and cols; the output y has the
// input's shape. The definition (generator, float64 reference, gate, bytes and flops) is in operation.cpp;
// the variants are softmax_kokkos.cpp (portable), softmax_cuda.cu (the rungs) and softmax_cudnn.cu (vendor).
// Kokkos-free, so the .cu files include it too.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/support/array_problem.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::softmax {

inline constexpr const char* operation_name = "softmax";

// Read the matrix once, write it once.
traffic_model essential_traffic(std::int64_t rows, std::int64_t cols);
// 5 per element: the max compare, the subtraction, exp (counted as one), the sum's add, the division.
std::int64_t essential_flops(std::int64_t rows, std::int64_t cols);

// A softmax problem: the shape and the generated matrix x (row-major, rows x cols; rows(), cols(), x()).
// Never NaN or Inf.
class softmax_data final : public float_matrix_problem {
 public:
  using float_matrix_problem::float_matrix_problem;
};

// The problem as a softmax_data; throws std::invalid_argument for another operation's problem or a
// malformed one, before a variant touches any device memory.
const softmax_data& softmax_problem(const problem_data& problem);

inline float* y_output(const std::vector<host_span>& outputs) { return outputs.at(0).as<float>(); }

// A variant's registration fields: name softmax_<suffix>, fusion full, row-major, the essential traffic.
// Callers set backend, on_device, rung, tunable_block_size and kernels_launched.
variant_info variant_info_for(const std::string& name_suffix, const std::string& family,
                              const std::string& description);

}  // namespace kstudy::softmax
