#pragma once
// A project's own operation, studied with an installed kstudy (find_package(kstudy) + kstudy_add_study; see
// CMakeLists.txt and the README's "Study your own kernel"): a 1-D 3-point smoothing stencil over n floats,
//
//   y_i = w x_{i-1} + c x_i + w x_{i+1},   w = 1/4, c = 1/2,   x_{-1} = x_n = 0 (zero boundary),
//
// one axis n, one input x, one output y. The declarations every variant shares live here; the header is
// Kokkos-free, so the CUDA variant (stencil_cuda.cu) includes it too.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"

namespace stencil {

inline constexpr const char* operation_name = "stencil3";
// Powers of two: every product w x, c x is exact in float, so only the two additions round.
inline constexpr float side_weight = 0.25f;
inline constexpr float centre_weight = 0.5f;

// The generated input: n floats, a pure function of (seed, index).
class stencil_data final : public kstudy::problem_data {
 public:
  stencil_data(const kstudy::table_shape& shape, std::unique_ptr<float[]> x);
  const kstudy::table_shape& shape() const override { return m_shape; }
  std::vector<kstudy::host_span> streamed_inputs() const override;  // {x}
  std::int64_t n() const { return m_shape.rows; }
  const float* x() const { return m_x.get(); }

 private:
  kstudy::table_shape m_shape;
  std::unique_ptr<float[]> m_x;
};

// The problem as a stencil_data; throws std::invalid_argument for another operation's problem, before a
// variant allocates anything.
const stencil_data& stencil_problem(const kstudy::problem_data& problem);

// The minimal traffic of one run: x read once, y written once (8n bytes); 2 adds and 2 multiplies per
// element, y_i = w (x_{i-1} + x_{i+1}) + c x_i.
kstudy::traffic_model essential_traffic(std::int64_t n);
std::int64_t essential_flops(std::int64_t n);

// A variant's registration fields: operation, fusion full (one kernel), row-major, one kernel, the
// essential traffic as its model. Callers set backend and on_device where a helper does not.
kstudy::variant_info variant_info_for(const std::string& name, const std::string& family,
                                      const std::string& description);

}  // namespace stencil
