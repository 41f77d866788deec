#pragma once
// Row kernels in portable Kokkos hierarchical parallelism, shared by softmax_kokkos_tuned and
// layernorm_kokkos_tuned (and its residual form): how a row-major matrix's rows map onto a TeamPolicy, how
// a row is split into per-lane slices held in registers, and the reductions over those slices.
//
// A row is read as `vectors` vectors of Vec floats: float4_t (16 bytes, one 128-bit load on a GPU) when
// cols % 4 == 0 and the arrays are 16-byte aligned, else single floats. The row's vectors are dealt to
// `slices` lanes round robin: item k of slice s is vector s + k * slices, so on a GPU the lanes of a warp
// read consecutive vectors (coalesced) and each lane keeps its Items vectors in registers.
// Three shapes (the plan picks one from cols, the vector length and the team size the kernel can launch):
//  - vector_rows: a row per team thread, its slices the thread's vector lanes (vector_length 32 on CUDA: a
//    warp per row, 8 rows per team); reductions are ThreadVectorRange parallel_reduce calls, warp shuffles
//    with no barrier and no shared memory. Rows of up to vector_length * 32 floats (1,024 on CUDA).
//  - team_rows: a row per team of up to 1,024 threads, slice t * vector_length + lane; a TeamThreadRange
//    parallel_reduce over nested ThreadVectorRange ones (Kokkos' shuffles, then one shared-memory step
//    across the warps). 16 floats per lane: rows of up to 16,384 floats on CUDA.
//  - team_rows_streamed: longer rows; each lane walks its slice in register-sized chunks to reduce, then
//    again to write (the row is read twice; on a GPU the second read mostly hits L2).
// On a host the vector length and the team size are 1 (a team is one core): rows of up to 32 floats take
// vector_rows (a row per team), longer ones team_rows_streamed (a kernel may stream a host's rows its own
// way: softmax takes one exp per element in three passes over the cached row).
//
// Registers persist between the reduction and the writes of a row because a range over exactly
// vector_length indices gives each vector lane one index, its own, and a range over exactly team_size
// indices gives each thread of the team one index, the same in every range (CUDA: threadIdx.x and
// threadIdx.y; a host team of one thread and one lane: index 0). The values a lane reduces are the same on
// all of a thread's lanes after its ThreadVectorRange reduction, as a TeamThreadRange reduction requires.
// Every reduction over slices is one Kokkos call with one value type per row statistic (a (max, sum) pair,
// a (count, mean, M2) triple): one team reduction per row, and a team does one row. That is also what keeps
// Kokkos 3.4 right on CUDA: its team reduction leaves its shared-memory slots without a closing barrier, so
// a second reduction of the same value type right after it could overwrite them while a warp still reads.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#if defined(__CUDA_ARCH__)  // the device pass only: the host compiler warns on an unknown pragma
#define KSTUDY_ROWS_UNROLL _Pragma("unroll")
#else
#define KSTUDY_ROWS_UNROLL
#endif

namespace kstudy::detail::rows {

// Four floats as one 16-byte aligned value: a View of it over a float allocation loads a quad at once.
struct alignas(16) float4_t {
  float x, y, z, w;
};

template <int Vec>
using vec_t = std::conditional_t<Vec == 4, float4_t, float>;

KOKKOS_INLINE_FUNCTION void unpack(const float4_t& q, float (&v)[4]) {
  v[0] = q.x;
  v[1] = q.y;
  v[2] = q.z;
  v[3] = q.w;
}
KOKKOS_INLINE_FUNCTION void unpack(const float q, float (&v)[1]) { v[0] = q; }
KOKKOS_INLINE_FUNCTION float4_t pack(const float (&v)[4]) {
  float4_t q;
  q.x = v[0];
  q.y = v[1];
  q.z = v[2];
  q.w = v[3];
  return q;
}
KOKKOS_INLINE_FUNCTION float pack(const float (&v)[1]) { return v[0]; }

// Whether p may be read as float4_t.
inline bool quad_aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % alignof(float4_t) == 0; }

// Unmanaged views of a kernel's arrays as Vec-float vectors. Restrict: no two arrays of a kernel overlap.
// (RandomAccess is left off: without the LDG intrinsic, Kokkos 3.4 maps it on CUDA to texture objects, which
// need Kokkos-allocated memory, abort on these unmanaged views and cap a 1-D texture below 2^28 elements.)
template <class ExecutionSpace, int Vec>
using input_view =
    Kokkos::View<const vec_t<Vec>*, Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>,
                 Kokkos::MemoryTraits<Kokkos::Unmanaged | Kokkos::Restrict>>;
template <class ExecutionSpace, int Vec>
using output_view = Kokkos::View<vec_t<Vec>*, Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>,
                                 Kokkos::MemoryTraits<Kokkos::Unmanaged | Kokkos::Restrict>>;

template <class ExecutionSpace, int Vec>
input_view<ExecutionSpace, Vec> as_input(const float* p, std::int64_t floats) {
  return input_view<ExecutionSpace, Vec>(reinterpret_cast<const vec_t<Vec>*>(p),
                                         static_cast<std::size_t>(floats / Vec));
}
template <class ExecutionSpace, int Vec>
output_view<ExecutionSpace, Vec> as_output(float* p, std::int64_t floats) {
  return output_view<ExecutionSpace, Vec>(reinterpret_cast<vec_t<Vec>*>(p), static_cast<std::size_t>(floats / Vec));
}

enum class shape { vector_rows, team_rows, team_rows_streamed };

inline const char* shape_name(shape s) {
  switch (s) {
    case shape::vector_rows:
      return "vector_rows";
    case shape::team_rows:
      return "team_rows";
    default:
      return "team_rows_streamed";
  }
}

// Floats a vector lane holds: up to 32 in vector_rows (a whole row per thread, no team reduction to amortise
// a larger team over); in the team shapes (and per chunk when streaming) a kernel's choice, team_floats by
// default. More floats a lane means fewer warps a row, so a row's fixed cost (its reductions, Kokkos' team
// bookkeeping) is shared by more elements and more of a row's bytes are in flight per thread; the price is
// registers (a kernel choosing 32 declares LaunchBounds that allow them).
constexpr int vector_rows_floats = 32;
constexpr int team_floats = 16;
// Threads of a vector_rows team on a device (8 warps, 8 rows): 256 threads, as the CUDA rungs' blocks.
constexpr int vector_rows_threads = 256;

// A launch: the shape, the vector width and the vectors per lane (the kernel's template arguments), and the
// TeamPolicy's team size, vector length and league.
struct plan {
  rows::shape shape = shape::vector_rows;
  int vec = 1, items = 1;
  int team_size = 1, vector_length = 1;
  std::int64_t league = 1;
};

inline int power_of_two_at_least(std::int64_t n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// The plan for rows x cols floats: vec4 when the arrays may be read as float4_t, vector_length 32 on CUDA
// (1 on hosts), max_team_size the most threads of vector_length lanes a team may have (1 on hosts),
// lane_floats the floats a lane holds in the team shapes (16 or 32: dispatch's TeamFloats).
inline plan plan_rows(std::int64_t rows, std::int64_t cols, bool vec4, int vector_length, int max_team_size,
                      int lane_floats = team_floats) {
  plan p;
  p.vec = vec4 ? 4 : 1;
  p.vector_length = vector_length;
  const std::int64_t vectors = cols / p.vec;
  if (cols <= std::int64_t(vector_length) * vector_rows_floats) {
    p.shape = shape::vector_rows;
    p.items = power_of_two_at_least((vectors + vector_length - 1) / vector_length);
    const int threads = std::max(1, std::min(max_team_size, vector_rows_threads / vector_length));
    p.team_size = static_cast<int>(std::min<std::int64_t>(threads, rows));
    p.league = (rows + p.team_size - 1) / p.team_size;
    return p;
  }
  p.items = lane_floats / p.vec;
  int team = 1;
  while (team < max_team_size && std::int64_t(team) * vector_length * lane_floats < cols) team *= 2;
  team = std::min(team, max_team_size);
  p.team_size = team;
  p.shape = std::int64_t(team) * vector_length * lane_floats >= cols ? shape::team_rows : shape::team_rows_streamed;
  p.league = rows;
  return p;
}

// Calls f(shape_constant, vec_constant, items_constant) with the plan's kernel arguments as
// std::integral_constant values. Device: whether team_rows is instantiated (a host never plans it: one
// thread of one lane holds at most 32 floats, which vector_rows takes). TeamFloats: the plan's lane_floats.
template <bool Device, int TeamFloats = team_floats, class F>
void dispatch(const plan& p, F&& f) {
  using vector_c = std::integral_constant<shape, shape::vector_rows>;
  using team_c = std::integral_constant<shape, shape::team_rows>;
  using streamed_c = std::integral_constant<shape, shape::team_rows_streamed>;
  using v1 = std::integral_constant<int, 1>;
  using v4 = std::integral_constant<int, 4>;
  const auto items_error = [&p] {
    return std::logic_error(std::string("kokkos_rows: no kernel for ") + shape_name(p.shape) + " with " +
                            std::to_string(p.items) + " vectors of " + std::to_string(p.vec) + " per lane");
  };
  switch (p.shape) {
    case shape::vector_rows:
      if (p.vec == 4) {
        switch (p.items) {
          case 1:
            return f(vector_c{}, v4{}, std::integral_constant<int, 1>{});
          case 2:
            return f(vector_c{}, v4{}, std::integral_constant<int, 2>{});
          case 4:
            return f(vector_c{}, v4{}, std::integral_constant<int, 4>{});
          case 8:
            return f(vector_c{}, v4{}, std::integral_constant<int, 8>{});
          default:
            throw items_error();
        }
      }
      switch (p.items) {
        case 1:
          return f(vector_c{}, v1{}, std::integral_constant<int, 1>{});
        case 2:
          return f(vector_c{}, v1{}, std::integral_constant<int, 2>{});
        case 4:
          return f(vector_c{}, v1{}, std::integral_constant<int, 4>{});
        case 8:
          return f(vector_c{}, v1{}, std::integral_constant<int, 8>{});
        case 16:
          return f(vector_c{}, v1{}, std::integral_constant<int, 16>{});
        case 32:
          return f(vector_c{}, v1{}, std::integral_constant<int, 32>{});
        default:
          throw items_error();
      }
    case shape::team_rows:
      if (p.items * p.vec != TeamFloats) throw items_error();
      if constexpr (Device) {
        if (p.vec == 4) return f(team_c{}, v4{}, std::integral_constant<int, TeamFloats / 4>{});
        return f(team_c{}, v1{}, std::integral_constant<int, TeamFloats>{});
      } else {
        throw items_error();
      }
    default:
      if (p.items * p.vec != TeamFloats) throw items_error();
      if (p.vec == 4) return f(streamed_c{}, v4{}, std::integral_constant<int, TeamFloats / 4>{});
      return f(streamed_c{}, v1{}, std::integral_constant<int, TeamFloats>{});
  }
}

// The reduction of per_slice(slice, value) over a row's slices, on every thread and lane of the row.
// Team: the row's slices are all the team's lanes (team_rows); else the calling thread's lanes
// (vector_rows, called inside the thread's TeamThreadRange iteration).
template <bool Team, class Member, class Reducer, class PerSlice>
KOKKOS_INLINE_FUNCTION void reduce_slices(const Member& member, const int vector_length, const PerSlice& per_slice,
                                          const Reducer& result) {
  using value_type = typename Reducer::value_type;
  if constexpr (Team) {
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(member, member.team_size()),
        [&](const int t, value_type& thread_value) {
          value_type lanes;
          Kokkos::parallel_reduce(
              Kokkos::ThreadVectorRange(member, vector_length),
              [&](const int lane, value_type& lane_value) { per_slice(t * vector_length + lane, lane_value); },
              Reducer(lanes));
          result.join(thread_value, lanes);
        },
        result);
  } else {
    Kokkos::parallel_reduce(Kokkos::ThreadVectorRange(member, vector_length), per_slice, result);
  }
}

// Calls f(slice) for each of a row's slices, on the thread and lane that reduced it.
template <bool Team, class Member, class F>
KOKKOS_INLINE_FUNCTION void for_slices(const Member& member, const int vector_length, const F& f) {
  if constexpr (Team) {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(member, member.team_size()), [&](const int t) {
      Kokkos::parallel_for(Kokkos::ThreadVectorRange(member, vector_length),
                           [&](const int lane) { f(t * vector_length + lane); });
    });
  } else {
    Kokkos::parallel_for(Kokkos::ThreadVectorRange(member, vector_length), f);
  }
}

// Part of a softmax row: its maximum and the sum of exp(x - max) over its elements; max = -inf: no element
// (the generated inputs are finite).
struct max_sum {
  float max, sum;
};

struct max_sum_combine {
  using value_type = max_sum;
  KOKKOS_INLINE_FUNCTION static max_sum identity() { return max_sum{-INFINITY, 0.0f}; }
  // a <- the pair of both parts: the sum under the smaller maximum is rescaled to the larger one (the
  // online softmax's merge).
  KOKKOS_INLINE_FUNCTION static void join(max_sum& a, const max_sum& b) {
    if (b.max > a.max) {
      a.sum = b.sum + a.sum * expf(a.max - b.max);  // an empty a: 0 * exp(-inf) = 0
      a.max = b.max;
    } else if (b.max != -INFINITY) {
      a.sum += b.sum * expf(b.max - a.max);
    }
  }
};

// Part of a LayerNorm row: its element count, mean and sum of squared deviations from the mean.
struct moments {
  float count, mean, m2;
};

struct moments_combine {
  using value_type = moments;
  KOKKOS_INLINE_FUNCTION static moments identity() { return moments{0.0f, 0.0f, 0.0f}; }
  // a <- the statistics of both parts (Chan, Golub and LeVeque's pairwise update); either may be empty.
  KOKKOS_INLINE_FUNCTION static void join(moments& a, const moments& b) {
    if (b.count == 0.0f) return;
    if (a.count == 0.0f) {
      a = b;
      return;
    }
    const float count = a.count + b.count, delta = b.mean - a.mean, wb = b.count / count;
    a.mean += delta * wb;
    a.m2 += b.m2 + delta * delta * a.count * wb;
    a.count = count;
  }
};

// A reducer over a small struct: Combine::identity() and Combine::join(a, b) (a <- a joined with b).
template <class Combine>
struct struct_reducer {
  using reducer = struct_reducer;
  using value_type = typename Combine::value_type;
  using result_view_type = Kokkos::View<value_type, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  KOKKOS_INLINE_FUNCTION explicit struct_reducer(value_type& value) : m_value(&value) {}

  KOKKOS_INLINE_FUNCTION void join(value_type& dest, const value_type& src) const { Combine::join(dest, src); }
  KOKKOS_INLINE_FUNCTION void init(value_type& value) const { value = Combine::identity(); }
  KOKKOS_INLINE_FUNCTION value_type& reference() const { return *m_value; }
  KOKKOS_INLINE_FUNCTION result_view_type view() const { return result_view_type(m_value); }
  KOKKOS_INLINE_FUNCTION bool references_scalar() const { return true; }

 private:
  value_type* m_value;
};

}  // namespace kstudy::detail::rows
