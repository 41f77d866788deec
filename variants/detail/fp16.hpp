#pragma once
// IEEE binary16 (half precision) on the host, as the operations store it: the 16-bit pattern (1 sign bit,
// 5 exponent bits biased by 15, 10 mantissa bits). Every binary16 value is exactly a float32, so the
// products of two of them are exact in float32 (11 x 11 significant bits). Kokkos-free, no CUDA headers;
// widen_fp16 is also device code where nvcc compiles the includer (the Kokkos fp16 kernels widen on the fetch).
#include <cmath>
#include <cstdint>

#include "detail/float_bits.hpp"

namespace kstudy::detail {

// The float a binary16 pattern stands for (exact: subnormals, infinities, NaN payloads).
KSTUDY_FLOAT_BITS_HOST_DEVICE inline float widen_fp16(std::uint16_t bits) {
  const std::uint32_t sign = std::uint32_t(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  std::uint32_t wide;
  if (exponent == 0x1f) {
    wide = sign | 0x7f800000u | (mantissa << 13);  // infinity, NaN
  } else if (exponent != 0) {
    wide = sign | ((exponent + 112) << 23) | (mantissa << 13);  // rebias 15 -> 127
  } else {
    // Zero or subnormal: mantissa * 2^-24, exact in float32.
    const float magnitude = float(mantissa) * 0x1.0p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return float_from_bits(wide);
}

// Nearest-even binary16 of a float: magnitudes from 65,520 (halfway past the largest finite 65,504) round to
// infinity, those below 2^-14 to the subnormals (steps of 2^-24) or zero, ties to even; NaN stays NaN.
inline std::uint16_t round_to_fp16(float f) {
  const std::uint32_t bits = bits_of_float(f);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65,520: infinity
  if (magnitude < 0x38800000u) {
    // Below 2^-14: a subnormal, mantissa = |f| / 2^-24 rounded to nearest even (exact in double, and the
    // halves of that scaling are representable, so nearbyint's ties-to-even applies to the true value).
    const double scaled = double(std::fabs(f)) * 0x1.0p24;
    const auto mantissa = static_cast<std::uint16_t>(std::nearbyint(scaled));  // up to 0x400: the least normal
    return static_cast<std::uint16_t>(sign | mantissa);
  }
  // Normal: drop 13 mantissa bits, rounding to nearest even; a carry runs into the exponent (and past the
  // largest finite exponent into infinity, already excluded above).
  const std::uint32_t rebiased = magnitude - (std::uint32_t(112) << 23);
  const std::uint32_t rounded = rebiased + 0xfffu + ((rebiased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

}  // namespace kstudy::detail

#undef KSTUDY_FP16_HOST_DEVICE
