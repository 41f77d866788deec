#pragma once
// bfloat16 on the host, as the operations store it: the top 16 bits of a float32. Kokkos-free.
#include <cmath>
#include <cstdint>

#include "detail/float_bits.hpp"

namespace kstudy::detail {

// The float a bfloat16 stands for (exact).
inline float widen_bf16(std::uint16_t bits) { return float_from_bits(std::uint32_t(bits) << 16); }

// Nearest-even bfloat16 (NaN stays NaN).
inline std::uint16_t round_to_bf16(float f) {
  std::uint32_t bits = bits_of_float(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

}  // namespace kstudy::detail
