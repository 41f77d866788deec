#pragma once
// Float arrays moved as 16-byte quads in portable Kokkos code, and the resident-wave team reduction built on
// them (reduce_sum and stream_dot share it):
//  - float4_t, a 16-byte aligned struct of four floats: nvcc emits one 128-bit load or store for a copy of
//    it (CUDA's own float4 does not exist on a host);
//  - quads_of(): an unmanaged View of float4_t over a float View's first n / 4 quads, with the Restrict
//    trait (a __restrict__ handle: on hosts, and on CUDA from Kokkos 4; Kokkos 3.4 drops it for CudaSpace).
//    RandomAccess is left off on purpose: under Kokkos 3.4 on CUDA it means a texture object, which needs
//    a View that Kokkos allocated (an unmanaged one aborts) and at most 2^27 texels (2^30 floats are 2^28);
//  - thread_sum(): one thread's share of a sum over quads, several loads in flight, float running sums
//    folded into a double every flush_steps steps;
//  - queue_team_wave_sum(): one parallel_reduce over a TeamPolicy of resident teams into a View.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kstudy/support/kokkos_support.hpp"

#if defined(__CUDA_ARCH__)  // the device pass only: the host compiler warns on an unknown pragma
#define KSTUDY_FLOAT4_UNROLL _Pragma("unroll")
#else
#define KSTUDY_FLOAT4_UNROLL
#endif

namespace kstudy::detail {

struct alignas(16) float4_t {
  float x, y, z, w;
};

using quad_traits = Kokkos::MemoryTraits<Kokkos::Unmanaged | Kokkos::Restrict>;

// Whether a View's data may be read as quads: Kokkos allocations are aligned far beyond 16 bytes, so this
// holds for every View a variant allocates; a variant falls back to scalar elements where it does not.
template <class View>
bool quad_aligned(const View& v) {
  return reinterpret_cast<std::uintptr_t>(v.data()) % alignof(float4_t) == 0;
}

// The first `quads` quads of a float View (const float gives const float4_t), in the View's memory.
template <class FloatView>
auto quads_of(const FloatView& v, std::int64_t quads) {
  using quad_type = std::conditional_t<std::is_const_v<typename FloatView::value_type>, const float4_t, float4_t>;
  return Kokkos::View<quad_type*, typename FloatView::device_type, quad_traits>(reinterpret_cast<quad_type*>(v.data()),
                                                                                static_cast<std::size_t>(quads));
}

KOKKOS_INLINE_FUNCTION void add_to(float4_t& acc, const float4_t& v) {
  acc.x += v.x;
  acc.y += v.y;
  acc.z += v.z;
  acc.w += v.w;
}

KOKKOS_INLINE_FUNCTION float lane_sum(const float4_t& v) { return (v.x + v.y) + (v.z + v.w); }

// A thread's items of `count`: on a device a grid stride (consecutive threads take consecutive items, so a
// warp's accesses stay coalesced), on a host one contiguous block (no two threads share a cache line).
struct index_span {
  std::int64_t begin, end, stride;
};
template <bool Contiguous>
KOKKOS_INLINE_FUNCTION index_span span_of(std::int64_t count, std::int64_t thread, std::int64_t threads) {
  if constexpr (Contiguous) {
    const std::int64_t share = (count + threads - 1) / threads;
    const std::int64_t begin = thread * share < count ? thread * share : count;
    return {begin, begin + share < count ? begin + share : count, 1};
  } else {
    return {thread, count, threads};
  }
}

// Quads loaded per step of thread_sum: four independent 16-byte loads in flight per input.
inline constexpr int sum_loads_in_flight = 4;
// Steps between folds of the float running sums into the double: each float sum then adds at most 1,024
// terms, far inside the at most 2^20 a chain may add under reduce_sum's and stream_dot's gates, whatever n
// and the thread count (a host thread of a 2-thread pool gets half of x).
inline constexpr std::int64_t flush_steps = 1024;

// One thread's share of sum_i term_i: terms.quad(q) gives the four terms of quad q, terms.one(i) the term of
// element i of the scalar tail (elements 4 quads .. n - 1). Four float4_t running sums (16 float chains),
// folded into a double every flush_steps steps; the tail, n % 4 elements (all n where the data could not be
// read as quads), in double.
template <bool Contiguous, class Terms>
KOKKOS_INLINE_FUNCTION double thread_sum(const Terms& terms, std::int64_t quads, std::int64_t n, std::int64_t thread,
                                         std::int64_t threads) {
  constexpr int loads = sum_loads_in_flight;
  double total = 0.0;
  const index_span s = span_of<Contiguous>(quads, thread, threads);
  const std::int64_t step = loads * s.stride;
  const std::int64_t last_full = s.end - (loads - 1) * s.stride;  // a step starting below it is whole
  std::int64_t q = s.begin;
  while (q < last_full) {
    float4_t acc[loads] = {};
    const std::int64_t stop = q + flush_steps * step < last_full ? q + flush_steps * step : last_full;
    for (; q < stop; q += step) {
      float4_t v[loads];
      KSTUDY_FLOAT4_UNROLL
      for (int k = 0; k < loads; ++k) v[k] = terms.quad(q + k * s.stride);  // every load before any add
      KSTUDY_FLOAT4_UNROLL
      for (int k = 0; k < loads; ++k) add_to(acc[k], v[k]);
    }
    float folded = 0.0f;
    KSTUDY_FLOAT4_UNROLL
    for (int k = 0; k < loads; ++k) folded += lane_sum(acc[k]);
    total += double(folded);
  }
  float4_t rest = {};
  for (; q < s.end; q += s.stride) add_to(rest, terms.quad(q));
  total += double(lane_sum(rest));
  const index_span tail = span_of<Contiguous>(n - 4 * quads, thread, threads);
  for (std::int64_t i = tail.begin; i < tail.end; i += tail.stride) total += double(terms.one(4 * quads + i));
  return total;
}

// Team shape of queue_team_wave_sum on a device: 256 threads, built to at most 64 registers so that four
// teams are resident on every multiprocessor (1,024 threads, 4 x 16 bytes in flight each per input).
inline constexpr int wave_team_threads = 256, wave_teams_per_sm = 4;

// result() = sum of the terms (see thread_sum) over quads and tail, as one parallel_reduce on `space`: a
// TeamPolicy of the teams resident at once (on a device guaranteed_resident_teams at LaunchBounds<256, 4>; on
// a host one team of one thread per thread of the pool), each thread summing its share (grid stride on a
// device, a contiguous block on a host), each team's partial by Kokkos' team reduction
// (parallel_reduce over TeamThreadRange), added once per team (single PerTeam) to the policy's reduction,
// which Kokkos finishes inside the same kernel (its last block combines the blocks' values) into `result`,
// a View: on a device the whole sum only queues. No second kernel: nothing is left to combine. The
// light-weight hint passes the functor as a kernel parameter (see light_weight).
template <class ExecutionSpace, class Terms, class Result>
void queue_team_wave_sum(const std::string& label, const ExecutionSpace& space, const Terms& terms, std::int64_t quads,
                         std::int64_t n, const Result& result) {
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<wave_team_threads, wave_teams_per_sm>>;
  using member_type = typename policy_type::member_type;
  const int team_threads = is_host_space_v<ExecutionSpace> ? 1 : wave_team_threads;
  const std::int64_t items = std::max<std::int64_t>(1, quads + (n - 4 * quads));
  const std::int64_t wanted = (items + team_threads - 1) / team_threads;
  const std::int64_t resident = guaranteed_resident_teams(space, team_threads, wave_team_threads * wave_teams_per_sm);
  const std::int64_t league = std::max<std::int64_t>(1, std::min(resident, wanted));
  const std::int64_t threads = league * team_threads;
  Kokkos::parallel_reduce(
      label, light_weight(policy_type(space, static_cast<int>(league), team_threads)),
      KOKKOS_LAMBDA(const member_type& team, double& sum) {
        double team_sum = 0.0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, team.team_size()),
            [&](const int slot, double& partial) {
              const std::int64_t thread = std::int64_t(team.league_rank()) * team.team_size() + slot;
              partial += thread_sum<is_host_space_v<ExecutionSpace>>(terms, quads, n, thread, threads);
            },
            team_sum);
        Kokkos::single(Kokkos::PerTeam(team), [&]() { sum += team_sum; });
      },
      result);
}

}  // namespace kstudy::detail
