#pragma once
// The SplitMix64 finaliser and its uniform double: the hashes every operation's seeded inputs are drawn
// from. Header-only, Kokkos-free and OpenMP-free, so any operation.cpp can include it.
#include <cstdint>

namespace kstudy {

// SplitMix64 finaliser (as scoring/data_generator): hash(seed, array, index) behaves like independent draws.
inline std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from the top 53 bits of a hash.
inline double unit_double(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace kstudy
