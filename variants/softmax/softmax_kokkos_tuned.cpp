// Softmax over rows in Kokkos, written for a GPU the way the CUDA rungs are and kept portable, for every
// enabled execution space (softmax_kokkos_tuned, rung 1 of family softmax_kokkos over the first attempt).
// On a device the rows map onto a TeamPolicy as detail/kokkos_rows.hpp lays out (vector_length 32 on CUDA,
// a warp per row up to 1,024 columns, a team per row up to 16,384, then streamed); hosts take a RangePolicy
// over rows with SIMD-friendly loops and an exp of their own (softmax_host_rows, below the device kernels).
//  - In registers (vector_rows, team_rows): each lane loads its Items vectors once (float4 when cols % 4 ==
//    0), takes its own maximum m and turns its elements into exp(x - m) in place, summing them. One
//    reduction combines the lanes' (m, sum) pairs (a sum joins another by rescaling to the larger max: the
//    online softmax's merge), so a row costs one ThreadVectorRange reduction (vector_rows: shuffles only)
//    or one TeamThreadRange reduction (team_rows). Each lane then writes its exps times
//    exp(m - row max) / row sum: one exp per element, the row read from memory once.
//  - Streamed (longer rows) on a device: each lane folds its slice in chunks of 32 floats into a running
//    (m, sum), one reduction combines the lanes, then a second pass re-reads the row (mostly from L2) and
//    writes exp(x - max) / sum.
// Against softmax_kokkos: no team scratch and no barrier of kstudy's own (the slot-per-thread reductions
// there cost shared-memory bank conflicts and four barriers per row), one reduction per row instead of two,
// warp-per-row teams for short rows, 128-bit loads and stores.
#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "detail/kokkos_rows.hpp"
#include "detail/kokkos_rows_launch.hpp"
#include "kstudy/support/kokkos_support.hpp"
#include "softmax/softmax.hpp"
#include "softmax/softmax_kokkos_base.hpp"

namespace kstudy::softmax {
namespace {

namespace rows = detail::rows;

using rows::max_sum;
using rows::max_sum_combine;
using max_sum_reducer = rows::struct_reducer<max_sum_combine>;

template <class ExecutionSpace>
using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<512, 2>>;
// Floats a lane holds in a team shape: 32 (128 threads a 4,096 row), so a row's fixed cost (its reduction,
// Kokkos' team bookkeeping) is shared by twice the elements of a 16-float lane; LaunchBounds<512, 2> leaves
// 64 registers a thread for them (no spill).
constexpr int lane_floats = 32;
constexpr int max_threads = 512;

// One kernel of the plan: Shape, Vec floats per vector, Items vectors per lane (per chunk when streaming).
template <class ExecutionSpace, rows::shape Shape, int Vec, int Items>
struct softmax_rows {
  using member_type = typename policy_type<ExecutionSpace>::member_type;
  static constexpr int vec = Vec;

  rows::input_view<ExecutionSpace, Vec> x;
  rows::output_view<ExecutionSpace, Vec> y;
  std::int64_t row_count = 0, vectors = 0;  // vectors per row: cols / Vec
  int vector_length = 1;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& member) const {
    rows::run_team_rows<Shape>(member, row_count, *this);
  }

  // v <- the lane's Items vectors of the row at base, from vector `first` on, slices apart, -inf past the
  // row's end; returns their maximum (-inf on a lane without elements).
  KOKKOS_FORCEINLINE_FUNCTION float load_lane(const std::int64_t base, const std::int64_t first, const int slices,
                                              float (&v)[Items][Vec]) const {
    const float minus_infinity = -INFINITY;  // the macro: numeric_limits is host-only in device code
    float m = minus_infinity;
    KSTUDY_ROWS_UNROLL
    for (int k = 0; k < Items; ++k) {
      const std::int64_t q = first + std::int64_t(k) * slices;
      if (q < vectors) {
        const rows::vec_t<Vec> loaded = x(base + q);
        rows::unpack(loaded, v[k]);
      } else {
        KSTUDY_ROWS_UNROLL
        for (int j = 0; j < Vec; ++j) v[k][j] = minus_infinity;
      }
      KSTUDY_ROWS_UNROLL
      for (int j = 0; j < Vec; ++j) m = m > v[k][j] ? m : v[k][j];
    }
    return m;
  }

  KOKKOS_INLINE_FUNCTION void resident_row(const member_type& member, const std::int64_t row) const {
    constexpr bool team = Shape != rows::shape::vector_rows;  // else the row's slices are one thread's lanes
    const int slices = team ? member.team_size() * vector_length : vector_length;
    const std::int64_t base = row * vectors;
    const float minus_infinity = -INFINITY;  // the macro: numeric_limits is host-only in device code
    float v[Items][Vec] = {};                // the lane's elements, then their exp(x - lane_max)
    float lane_max = minus_infinity;         // -inf on a lane without elements
    max_sum total;
    rows::reduce_slices<team>(
        member, vector_length,
        [&](const int s, max_sum& partial) {
          const float m = load_lane(base, s, slices, v);
          float sum = 0.0f;
          if (m != minus_infinity) {
            KSTUDY_ROWS_UNROLL
            for (int k = 0; k < Items; ++k) {
              KSTUDY_ROWS_UNROLL
              for (int j = 0; j < Vec; ++j) {
                v[k][j] = expf(v[k][j] - m);  // 0 for the padding's -inf
                sum += v[k][j];
              }
            }
          }
          lane_max = m;
          max_sum_combine::join(partial, max_sum{m, sum});
        },
        max_sum_reducer(total));
    rows::for_slices<team>(member, vector_length, [&](const int s) {
      if (lane_max == minus_infinity) return;  // no elements
      const float scale = expf(lane_max - total.max) / total.sum;
      KSTUDY_ROWS_UNROLL
      for (int k = 0; k < Items; ++k) {
        const std::int64_t q = s + std::int64_t(k) * slices;
        if (q < vectors) {
          float out[Vec];
          KSTUDY_ROWS_UNROLL
          for (int j = 0; j < Vec; ++j) out[j] = v[k][j] * scale;
          y(base + q) = rows::pack(out);
        }
      }
    });
  }

  KOKKOS_INLINE_FUNCTION void streamed_row(const member_type& member, const std::int64_t row) const {
    const int slices = member.team_size() * vector_length;
    const std::int64_t base = row * vectors, stride = std::int64_t(Items) * slices;
    max_sum total;
    rows::reduce_slices<true>(
        member, vector_length,
        [&](const int s, max_sum& partial) {
          max_sum lane = max_sum_combine::identity();
          for (std::int64_t chunk = s; chunk < vectors; chunk += stride) {  // chunk: the lane's first vector
            float v[Items][Vec];
            const float m = load_lane(base, chunk, slices, v);
            float sum = 0.0f;  // m is finite: vector `chunk` is in the row
            KSTUDY_ROWS_UNROLL
            for (int k = 0; k < Items; ++k) {
              KSTUDY_ROWS_UNROLL
              for (int j = 0; j < Vec; ++j) sum += expf(v[k][j] - m);
            }
            max_sum_combine::join(lane, max_sum{m, sum});
          }
          max_sum_combine::join(partial, lane);
        },
        max_sum_reducer(total));
    rows::for_slices<true>(member, vector_length, [&](const int s) {
      for (std::int64_t chunk = s; chunk < vectors; chunk += stride) {
        KSTUDY_ROWS_UNROLL
        for (int k = 0; k < Items; ++k) {
          const std::int64_t q = chunk + std::int64_t(k) * slices;
          if (q < vectors) {
            float v[Vec];
            const rows::vec_t<Vec> loaded = x(base + q);
            rows::unpack(loaded, v);
            KSTUDY_ROWS_UNROLL
            for (int j = 0; j < Vec; ++j) v[j] = expf(v[j] - total.max) / total.sum;
            y(base + q) = rows::pack(v);
          }
        }
      }
    });
  }
};

// ---------------------------------------------------------------------------------------------------------
// Hosts. A core is bound by exp, not by memory, when it takes one scalar library expf per element (a team of
// one thread per row over the kernels above reached ~15% of the host read roof): softmax_host_rows runs one
// row per index of a RangePolicy over raw pointers, each pass an `omp simd` loop (max and sum reductions in
// SIMD lanes, no fast-math needed) around an exp written in plain, branch-free float arithmetic, so the
// compiler turns the exp into SIMD code as well.

// exp(d) for d <= 0 (or -inf), without a library call. Cody and Waite's reduction d = n ln2 + r, |r| <=
// ln2 / 2, with ln2 split so that n * ln2_hi is exact (n has at most 8 bits), then Cephes' expf polynomial
// (1 + r + r^2 P(r), P of degree 5) and the scale 2^n built from its exponent bits. Measured against a
// float64 exp over every float in [-90, 0]: a relative error of at most 1.37u (u = 2^-24), within the 2 ulp
// (4u) the softmax gate allows an exp besides its 3u|d| for the argument's rounding (none here: d is exact,
// and so is n * ln2_hi). Below min_arg (< ln(FLT_MIN)) the result is 0: exp(d) < FLT_MIN, the gate's atol.
// Branch-free (masks, not selects: GCC keeps a float select as a branch under its default -ftrapping-math,
// and a loop with a branch does not vectorise).
inline float host_exp_nonpositive(const float d) {
  constexpr float log2e = 1.44269504088896341f;
  constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  constexpr float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds |t| < 2^22 to an integer
  constexpr float min_arg = -87.3365479f;     // the float just below ln(FLT_MIN): 2^n stays normal above
  const std::int32_t below = -static_cast<std::int32_t>(d < min_arg);  // all ones where the result is 0
  std::int32_t d_bits, min_bits;
  std::memcpy(&d_bits, &d, sizeof d_bits);
  std::memcpy(&min_bits, &min_arg, sizeof min_bits);
  const std::int32_t a_bits = (d_bits & ~below) | (min_bits & below);
  float a;  // max(d, min_arg): n >= -126
  std::memcpy(&a, &a_bits, sizeof a);
  const float n = (a * log2e + round_magic) - round_magic;
  const float r = (a - n * ln2_hi) - n * ln2_lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = (p * (r * r) + r) + 1.0f;
  const std::int32_t bits = ((static_cast<std::int32_t>(n) + 127) << 23) & ~below;  // 2^n (n + 127 in 1..127), or 0
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return e * scale;
}

// One row per index, three passes, the last two over the row in the core's cache (4,096 floats: 16 KiB of
// x and of y, inside L1): the maximum; y = exp(x - max) and its sum (rows::folded_sum: in SIMD lanes over
// short chunks, folded into a double); y *= 1 / sum (a reciprocal and a multiply: the gate's 2 roundings).
// One exp per element; the row is read from memory once and written once.
struct softmax_host_rows {
  const float* x = nullptr;
  float* y = nullptr;
  std::int64_t cols = 0;

  void operator()(const std::int64_t row) const {
    const float* const __restrict__ in = x + row * cols;
    float* const __restrict__ out = y + row * cols;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (std::int64_t i = 0; i < cols; ++i) m = m > in[i] ? m : in[i];
    const double sum = rows::folded_sum(cols, [&](const std::int64_t i) {
      const float e = host_exp_nonpositive(in[i] - m);
      out[i] = e;
      return e;
    });
    const float scale = 1.0f / static_cast<float>(sum);
#pragma omp simd
    for (std::int64_t i = 0; i < cols; ++i) out[i] *= scale;
  }
};

template <class ExecutionSpace>
class softmax_kokkos_tuned final : public softmax_kokkos_base<ExecutionSpace> {
  using base = softmax_kokkos_base<ExecutionSpace>;

 public:
  using base::on_host;

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = this->prepare_arrays(problem, options, "softmax_kokkos_tuned");
    const bool vec4 = m_cols % 4 == 0 && rows::quad_aligned(m_x.data()) && rows::quad_aligned(m_y.data());
    m_plan = rows::plan_launch<policy_type<ExecutionSpace>>(m_rows, m_cols, vec4, max_threads, lane_floats);
    if constexpr (!on_host)
      rows::check_team_size<policy_type<ExecutionSpace>, lane_floats>(m_space, m_plan, "softmax_kokkos_tuned",
                                                                      make_kernel());
    this->upload(data.streamed_inputs());
  }

  void launch() override {
    if constexpr (on_host)
      rows::launch_host_rows(m_space, m_rows, "kstudy::softmax_kokkos_tuned_host_rows",
                             softmax_host_rows{m_x.data(), m_y.data(), m_cols});
    else
      rows::launch_plan<policy_type<ExecutionSpace>, lane_floats>(m_space, m_plan, "kstudy::softmax_kokkos_tuned_",
                                                                  make_kernel());
  }

 private:
  // The plan's kernel from dispatch's arguments, over this variant's arrays.
  auto make_kernel() const {
    return [this](auto shape_c, auto vec_c, auto items_c) {
      using functor =
          softmax_rows<ExecutionSpace, decltype(shape_c)::value, decltype(vec_c)::value, decltype(items_c)::value>;
      constexpr int vec = functor::vec;
      const auto n = static_cast<std::int64_t>(m_x.size());
      return functor{rows::as_input<ExecutionSpace, vec>(m_x.data(), n),
                     rows::as_output<ExecutionSpace, vec>(m_y.data(), n), m_rows, m_cols / vec, m_plan.vector_length};
    };
  }

  using base::m_cols;
  using base::m_rows;
  using base::m_space;
  using base::m_x;
  using base::m_y;
  rows::plan m_plan;
};

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  auto info = variant_info_for(
      "kokkos_tuned", "softmax_kokkos",
      "Kokkos hierarchical parallelism: TeamPolicy with LaunchBounds<512,2> and vector_length 32 on a device "
      "(1 on hosts); rows up to 1,024 cols one per team thread (8 per team) reduced across its vector lanes by "
      "a ThreadVectorRange parallel_reduce (warp shuffles), longer rows one per team by a TeamThreadRange "
      "parallel_reduce over nested ThreadVectorRange ones (32 floats a lane); a custom reducer merges (max, sum of "
      "exp) pairs: "
      "one reduction per row, no team scratch; the row in registers up to 16,384 cols (float4 loads through "
      "an unmanaged Restrict View of a 16-byte struct when cols % 4 == 0), longer rows streamed twice");
  info.rung = 1;
  info.implementation = implementation::kokkos;
  info.kernels_launched = 1;  // the row kernel of the plan's shape
  register_kokkos_variant<softmax_kokkos_tuned<space>>(std::move(info));
});

}  // namespace
}  // namespace kstudy::softmax
