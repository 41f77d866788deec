#pragma once
// reduce_sum: s = sum_i x_i over n floats (the seed's first ladder: 16.7M atomics on one address, then
// registers + warp shuffle). One axis n; a point is a row-major shape of n rows and one feature.
//
// The output is one float64, s. Variants may accumulate in float32 (the CUDA ladder and CUB do, as the
// seed's kernels) and widen the result, or in float64 (the Kokkos variants: free on a memory-bound kernel);
// the gate's tolerance covers float32 accumulation in any order (operation.cpp). Kokkos-free, so the
// handwritten CUDA and vendor variants (.cu) include it too.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/support/array_problem.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::reduce {

inline constexpr const char* operation_name = "reduce_sum";

// n floats read; 8 bytes (s) written.
traffic_model essential_traffic(std::int64_t n);
// n - 1 additions, counted as n.
inline std::int64_t essential_flops(std::int64_t n) { return n; }

// A reduce_sum problem: n and the generated vector x (n rows of one feature). Inputs are never NaN or Inf.
class reduce_data final : public float_matrix_problem {
 public:
  using float_matrix_problem::float_matrix_problem;
  std::int64_t n() const { return rows(); }
};

// The problem as reduce_data; throws std::invalid_argument for another operation's problem or n < 1.
const reduce_data& reduce_problem(const problem_data& problem);

// The output array: s, one double.
inline double* s_output(const std::vector<host_span>& outputs) { return outputs.at(0).as<double>(); }

// Registration fields: name reduce_sum_<suffix>, row-major, fusion full, one kernel, the essential traffic.
// Callers set backend, on_device, rung and kernels_launched where they differ.
variant_info variant_info_for(const std::string& name_suffix, const std::string& family,
                              const std::string& description);

}  // namespace kstudy::reduce
