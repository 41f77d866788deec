#pragma once
// A float32's bit pattern and back (std::bit_cast is C++20), which the 16-bit formats' conversions (bf16.hpp,
// fp16.hpp) are written in. Kokkos-free, no CUDA headers; also device code where nvcc compiles the includer (the
// Kokkos fp16 kernels widen on the fetch).
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KSTUDY_FLOAT_BITS_HOST_DEVICE __host__ __device__
#else
#define KSTUDY_FLOAT_BITS_HOST_DEVICE
#endif

namespace kstudy::detail {

KSTUDY_FLOAT_BITS_HOST_DEVICE inline float float_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

KSTUDY_FLOAT_BITS_HOST_DEVICE inline std::uint32_t bits_of_float(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

}  // namespace kstudy::detail
