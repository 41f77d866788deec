#pragma once
// A project's own operation, studied with an installed kstudy (find_package(kstudy) + kstudy_add_study; see
// CMakeLists.txt and the README's "Study your own kernel"): a 1-D 3-point smoothing stencil over n floats,
//
//   y_i = w x_{i-1} + c x_i + w x_{i+1},   w = 1/4, c = 1/2,   x_{-1} = x_n = 0 (zero boundary),
//
// one axis n, one input x, one output y: flat float arrays, so the operation and both variants are written on
// kstudy's thin bases (support/elementwise_operation.hpp, kokkos_arrays.hpp, cuda_arrays.hpp) and hold only
// what is the stencil's own. Kokkos-free, so the CUDA variant (stencil_cuda.cu) includes it too.
#include <string>

#include "kstudy/variant.hpp"

namespace stencil {

inline constexpr const char* operation_name = "stencil3";
// Powers of two: every product w x, c x is exact in float, so only the two additions round.
inline constexpr float side_weight = 0.25f;
inline constexpr float centre_weight = 0.5f;

// A variant's registration fields; its traffic model is the operation's essential traffic (unset).
inline kstudy::variant_info variant_info_for(const std::string& name, const std::string& description) {
  kstudy::variant_info info;
  info.name = name;
  info.operation = operation_name;
  info.family = name;
  info.description = description;
  return info;
}

}  // namespace stencil
