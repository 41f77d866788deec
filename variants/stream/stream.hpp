#pragma once
// The STREAM operations (McCalpin's copy, scale, add and triad, plus a dot product), the bandwidth rungs
// below the scoring operation: one axis n, float32 vectors, nothing to fuse. One kind enum parameterises
// the operation (operation.cpp) and every variant, so the five share their code:
//
//   stream_copy   z = x            stream_add    z = x + y        stream_dot   d = sum_i x_i * y_i
//   stream_scale  z = q * x        stream_triad  z = x + q * y    (q = 3)
//
// A point is {n}: a row-major shape of n rows and one feature. Kokkos-free, so the handwritten CUDA and
// vendor variants (.cu) include it too.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/support/array_problem.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::stream {

enum class stream_kind { copy, scale, add, triad, dot };

// The scalar of scale and triad: a small integer, so q * y is exact in float64 and the reference exact.
inline constexpr float scale_factor = 3.0f;

// Per kind, in stream_kind's order: the registered operation's name and its one-line description.
struct kind_names {
  const char* operation;
  const char* description;
};
inline constexpr kind_names kind_table[] = {
    {"stream_copy", "STREAM copy: z = x over n floats (8 bytes per element, no arithmetic)"},
    {"stream_scale", "STREAM scale: z = q * x, q = 3 (one multiply per 8 bytes)"},
    {"stream_add", "STREAM add: z = x + y (one addition per 12 bytes)"},
    {"stream_triad", "STREAM triad: z = x + q * y, q = 3 (one multiply-add per 12 bytes)"},
    {"stream_dot", "dot product: d = sum x_i * y_i (one multiply-add per 8 bytes), d in float64"},
};

// The registered operation's name: stream_copy, stream_scale, ...
constexpr const char* operation_name(stream_kind kind) { return kind_table[static_cast<int>(kind)].operation; }

// The prefix of its variants' names: copy, scale, add, triad, dot (triad_kokkos, dot_cub, ...).
constexpr const char* short_name(stream_kind kind) { return operation_name(kind) + 7; }

// Input vectors read per element: x, or x and y.
constexpr int input_count(stream_kind kind) { return kind == stream_kind::copy || kind == stream_kind::scale ? 1 : 2; }
constexpr bool has_y(stream_kind kind) { return input_count(kind) == 2; }
// dot reduces to one float64 d; the others write a vector z of n floats.
constexpr bool is_reduction(stream_kind kind) { return kind == stream_kind::dot; }

// The minimal traffic of one resident run: every input read once, z written once (d: 8 bytes).
traffic_model essential_traffic(stream_kind kind, std::int64_t n);
// copy 0, scale n, add n, triad 2n (a multiply and an add; one FMA on a GPU), dot 2n.
std::int64_t essential_flops(stream_kind kind, std::int64_t n);

// A STREAM problem: n and the generated vectors x (and y). The runner owns it; variants read it in
// prepare(). Inputs are never NaN or Inf.
// Streamed: {x} or {x, y}; q is a constant, not an array.
class stream_data final : public array_problem {
 public:
  stream_data(stream_kind kind, const table_shape& shape, std::unique_ptr<float[]> x, std::unique_ptr<float[]> y);
  stream_data(const stream_data& other);  // the same vectors, copied (its accessors point into its own arrays)
  stream_data& operator=(const stream_data&) = delete;

  stream_kind kind() const { return m_kind; }
  std::int64_t n() const { return shape().rows; }
  const float* x() const { return m_x; }
  const float* y() const { return m_y; }  // nullptr for copy and scale
  float q() const { return scale_factor; }

 private:
  stream_kind m_kind;
  const float *m_x, *m_y;
};

// The problem as a stream_data of the expected kind; throws std::invalid_argument for another operation's
// problem or a malformed one (n < 1, a missing vector), before a variant touches any device memory.
const stream_data& stream_problem(const problem_data& problem, stream_kind expected);

// The output arrays' element types: z (n floats) or d (one double), operation_info::outputs order.
inline float* z_output(const std::vector<host_span>& outputs) { return outputs.at(0).as<float>(); }
inline double* d_output(const std::vector<host_span>& outputs) { return outputs.at(0).as<double>(); }

// A variant's registration fields: name <short_name>_<suffix>, the kind's operation, fusion full (one
// kernel or library call does the whole operation), row-major, one kernel, the essential traffic. Callers
// set backend, on_device, tunable_block_size and kernels_launched where they differ.
variant_info variant_info_for(stream_kind kind, const std::string& name_suffix, const std::string& family,
                              const std::string& description);

}  // namespace kstudy::stream
