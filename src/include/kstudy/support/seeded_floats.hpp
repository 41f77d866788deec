#pragma once
// Seeded float inputs shared by the kernel-lab operations (reduce_sum, transpose): a pure function of
// (seed, array, index), so every thread count, chunking and relayout gives the same values. Uniform in
// [-1, 1) on a grid of 2^-23 (every value an exact float), except ~1% outliers of magnitude 100..1000 with
// a random sign, so a variant that drops, repeats or misplaces elements cannot hide behind values of one
// size. Never NaN or Inf. The same distribution as the STREAM operations' inputs. Kokkos-free.
#include <cstdint>
#include <memory>

#include "kstudy/support/splitmix64.hpp"

namespace kstudy {

// Element i of array `array` under `seed`.
inline float seeded_float(std::uint64_t seed, std::uint64_t array, std::int64_t i) {
  constexpr double outlier_fraction = 0.01;
  const std::uint64_t h1 = splitmix64(splitmix64(seed ^ splitmix64(array)) + static_cast<std::uint64_t>(i));
  const std::uint64_t h2 = splitmix64(h1);
  if (unit_double(h2) < outlier_fraction) {
    const double magnitude = 100.0 + 900.0 * unit_double(splitmix64(h2));
    return static_cast<float>((h2 & 1) ? magnitude : -magnitude);
  }
  return static_cast<float>(-1.0 + static_cast<double>(h1 >> 40) * 0x1.0p-23);
}

// n such values, generated in parallel (OpenMP where the translation unit is built with it).
inline std::unique_ptr<float[]> seeded_floats(std::uint64_t seed, std::uint64_t array, std::int64_t n) {
  std::unique_ptr<float[]> v(new float[static_cast<std::size_t>(n)]);  // every element written below
  float* out = v.get();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) out[i] = seeded_float(seed, array, i);
  return v;
}

// Nonnegative values for the sums (reduce_sum, stream_dot), whose gate must see a sum that does not
// cancel: 1 + seeded_float's uniform part, i.e. uniform in [0, 2) on the 2^-23 grid (exact floats), mean 1,
// no outliers. A zero-mean sum of n terms is ~sqrt(n) of its terms' size, so a float32-sized tolerance of
// sum |x_i| passes zero, or a sum that dropped a quarter of the terms, once n is large; a sum of these
// loses exactly the dropped terms' share. No outliers: a rare huge term would make the mean ~10x the
// typical term, and a float32 running sum then swallows the typical terms (a term below half an ulp of
// the running sum is lost) from ~10^6 terms on, the error of a correct-looking sum no longer of random sign.
inline float seeded_nonnegative(std::uint64_t seed, std::uint64_t array, std::int64_t i) {
  const std::uint64_t h1 = splitmix64(splitmix64(seed ^ splitmix64(array)) + static_cast<std::uint64_t>(i));
  return static_cast<float>(static_cast<double>(h1 >> 40) * 0x1.0p-23);
}

inline std::unique_ptr<float[]> seeded_nonnegatives(std::uint64_t seed, std::uint64_t array, std::int64_t n) {
  std::unique_ptr<float[]> v(new float[static_cast<std::size_t>(n)]);
  float* out = v.get();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) out[i] = seeded_nonnegative(seed, array, i);
  return v;
}

// A copy of n floats (relayout), in parallel.
inline std::unique_ptr<float[]> copied_floats(const float* source, std::int64_t n) {
  std::unique_ptr<float[]> v(new float[static_cast<std::size_t>(n)]);
  float* out = v.get();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) out[i] = source[i];
  return v;
}

}  // namespace kstudy
