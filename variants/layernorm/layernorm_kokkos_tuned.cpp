// LayerNorm and the fused residual + LayerNorm in Kokkos, written for a GPU the way the CUDA rungs are and
// kept portable, for every enabled execution space (layernorm_kokkos_tuned and
// residual_layernorm_kokkos_tuned, rung 1 of families layernorm_kokkos and residual_layernorm_kokkos over
// the first attempt). On a device the rows map onto a TeamPolicy as detail/kokkos_rows.hpp lays out
// (vector_length 32 on CUDA, a warp per row up to 1,024 columns, a team per row up to 16,384, then
// streamed); hosts take a RangePolicy over rows with SIMD-friendly loops (layernorm_host_rows, below the
// device kernels).
//  - In registers (vector_rows, team_rows; 32 floats a lane in a team, as the CUDA register rung): each lane
//    loads its Items vectors of x once (float4 when hidden % 4 == 0; with the residual also r, writing
//    h = x + r as it goes). Two Sum<float> reductions follow, as in the CUDA register rung: the row's sum,
//    then the sum of squared deviations from its mean, both from the registers (the exact two-pass
//    statistics); a ThreadVectorRange reduction each (vector_rows: shuffles only) or a TeamThreadRange one
//    (team_rows), and y = (v - mean) * rstd * gamma + beta is written from the registers: x (and r) read once.
//  - Streamed (longer rows): each lane merges the statistics of its slice's chunks with Chan et al.'s formula
//    (count, mean, M2), one reduction merges the lanes, and a second pass re-reads the row (h with the
//    residual) to write y.
// Statistics are float on every backend: per-lane sums of at most 32 elements combined by a tree (shuffles,
// then the team's warps), or merges whose count grows chunk by chunk; no value is summed into a running total
// of the whole row, which is what swamps a float row sum next to outliers.
#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "detail/kokkos_rows.hpp"
#include "detail/kokkos_rows_launch.hpp"
#include "kstudy/support/kokkos_support.hpp"
#include "layernorm/layernorm.hpp"
#include "layernorm/layernorm_kokkos_base.hpp"

namespace kstudy::layernorm {
namespace {

namespace rows = detail::rows;

using rows::moments;
using rows::moments_combine;
using moments_reducer = rows::struct_reducer<moments_combine>;

// The team shapes' launch: LayerNorm holds 32 floats a lane (the CUDA register rung's 128 threads for a 4,096
// row) under LaunchBounds<512, 2> (64 registers, no spill): 0.78x -> 0.94x of that rung at 65,536 x 4,096 on the
// H200 (an A/B of the two builds, 746 -> 620 us against 580). The residual form, which also writes h, spills at 32
// floats under 64 registers and ran 5% slower than at 16 (performance note 46): it keeps 16 floats a lane under
// LaunchBounds<1024, 1>.
template <bool Residual>
struct launch_shape {
  static constexpr int lane_floats = Residual ? 16 : 32;
  static constexpr int max_threads = Residual ? 1024 : 512;
  static constexpr int min_blocks = Residual ? 1 : 2;
};
template <class ExecutionSpace, bool Residual>
using policy_type =
    Kokkos::TeamPolicy<ExecutionSpace,
                       Kokkos::LaunchBounds<launch_shape<Residual>::max_threads, launch_shape<Residual>::min_blocks>>;

// One kernel of the plan: Shape, Vec floats per vector, Items vectors per lane (per chunk when streaming).
// With Residual, v = x + r, also written to h.
template <class ExecutionSpace, bool Residual, rows::shape Shape, int Vec, int Items>
struct layernorm_rows {
  using member_type = typename policy_type<ExecutionSpace, Residual>::member_type;
  static constexpr int vec = Vec;

  rows::input_view<ExecutionSpace, Vec> x, r, gamma, beta;
  rows::output_view<ExecutionSpace, Vec> y, h;
  std::int64_t row_count = 0, vectors = 0;  // vectors per row: hidden / Vec
  int vector_length = 1;
  float hidden = 1.0f, epsilon = 0.0f;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& member) const {
    rows::run_team_rows<Shape>(member, row_count, *this);
  }

  // v[k] <- vector i of the row's input: x, or x + r (then also written to h).
  KOKKOS_INLINE_FUNCTION void load(const std::int64_t i, float (&v)[Vec]) const {
    const rows::vec_t<Vec> a = x(i);
    rows::unpack(a, v);
    if constexpr (Residual) {
      const rows::vec_t<Vec> b = r(i);
      float w[Vec];
      rows::unpack(b, w);
      KSTUDY_ROWS_UNROLL
      for (int j = 0; j < Vec; ++j) v[j] += w[j];
      h(i) = rows::pack(v);
    }
  }

  // y's vector i (q within the row) from v and the row's statistics.
  KOKKOS_INLINE_FUNCTION void store(const std::int64_t i, const std::int64_t q, const float (&v)[Vec], const float mean,
                                    const float rstd) const {
    const rows::vec_t<Vec> g_loaded = gamma(q), b_loaded = beta(q);
    float g[Vec], b[Vec], out[Vec];
    rows::unpack(g_loaded, g);
    rows::unpack(b_loaded, b);
    KSTUDY_ROWS_UNROLL
    for (int j = 0; j < Vec; ++j) out[j] = (v[j] - mean) * rstd * g[j] + b[j];
    y(i) = rows::pack(out);
  }

  // The sum of the squared deviations from mean of the first `valid` vectors of v.
  template <int N>
  KOKKOS_FORCEINLINE_FUNCTION static float squared_deviations(const float (&v)[N][Vec], const int valid,
                                                              const float mean) {
    float m2 = 0.0f;
    KSTUDY_ROWS_UNROLL
    for (int k = 0; k < N; ++k) {
      if (k < valid) {
        KSTUDY_ROWS_UNROLL
        for (int j = 0; j < Vec; ++j) {
          const float d = v[k][j] - mean;
          m2 += d * d;
        }
      }
    }
    return m2;
  }

  // The two-pass statistics of the first `valid` vectors of v.
  template <int N>
  KOKKOS_INLINE_FUNCTION static moments statistics(const float (&v)[N][Vec], const int valid) {
    if (valid == 0) return moments_combine::identity();
    float sum = 0.0f;
    KSTUDY_ROWS_UNROLL
    for (int k = 0; k < N; ++k) {
      KSTUDY_ROWS_UNROLL
      for (int j = 0; j < Vec; ++j) sum += v[k][j];  // the padding is 0
    }
    const float count = static_cast<float>(valid * Vec), mean = sum / count;
    return moments{count, mean, squared_deviations(v, valid, mean)};
  }

  // Two reductions of plain float sums, as the CUDA register rung: the row's sum (then its mean), then the
  // sum of squared deviations from that mean, both from the registers. A sum's join is one addition, where a
  // (count, mean, M2) merge costs a division per step: the first tuned version's single Chan reduction ran 4x
  // the CUDA rung's instructions per element (Nsight Compute, H200, 65,536 x 4,096; performance note 46).
  KOKKOS_INLINE_FUNCTION void resident_row(const member_type& member, const std::int64_t row) const {
    constexpr bool team = Shape != rows::shape::vector_rows;  // else the row's slices are one thread's lanes
    const int slices = team ? member.team_size() * vector_length : vector_length;
    const std::int64_t base = row * vectors;
    // The lane's elements (0 past the row's end). Zeroed first, as the compiler cannot tell that the range
    // over the vector lanes runs once on every lane (without it, -Wmaybe-uninitialized).
    float v[Items][Vec] = {};
    int valid = 0;  // vectors of the row this lane holds: a prefix of v
    float row_sum = 0.0f;
    rows::reduce_slices<team>(
        member, vector_length,
        [&](const int s, float& partial) {
          float sum = 0.0f;
          KSTUDY_ROWS_UNROLL
          for (int k = 0; k < Items; ++k) {
            const std::int64_t q = s + std::int64_t(k) * slices;
            if (q < vectors) {
              load(base + q, v[k]);
              ++valid;
            }
            KSTUDY_ROWS_UNROLL
            for (int j = 0; j < Vec; ++j) sum += v[k][j];  // the padding is 0
          }
          partial += sum;
        },
        Kokkos::Sum<float>(row_sum));
    const float mean = row_sum / hidden;
    // Kokkos 3.4's team reduction leaves its shared-memory slots without a closing barrier: the next one
    // must not overwrite them while a warp still reads (a warp's own shuffles need none).
    if constexpr (team) member.team_barrier();
    float row_m2 = 0.0f;
    rows::reduce_slices<team>(
        member, vector_length, [&](const int, float& partial) { partial += squared_deviations(v, valid, mean); },
        Kokkos::Sum<float>(row_m2));
    const float rstd = 1.0f / sqrtf(row_m2 / hidden + epsilon);
    rows::for_slices<team>(member, vector_length, [&](const int s) {
      KSTUDY_ROWS_UNROLL
      for (int k = 0; k < Items; ++k) {
        const std::int64_t q = s + std::int64_t(k) * slices;
        if (q < vectors) store(base + q, q, v[k], mean, rstd);
      }
    });
  }

  KOKKOS_INLINE_FUNCTION void streamed_row(const member_type& member, const std::int64_t row) const {
    const int slices = member.team_size() * vector_length;
    const std::int64_t base = row * vectors, stride = std::int64_t(Items) * slices;
    moments total;
    rows::reduce_slices<true>(
        member, vector_length,
        [&](const int s, moments& partial) {
          moments lane = moments_combine::identity();
          for (std::int64_t chunk = s; chunk < vectors; chunk += stride) {  // chunk: the lane's first vector
            float v[Items][Vec];
            int valid = 0;
            KSTUDY_ROWS_UNROLL
            for (int k = 0; k < Items; ++k) {
              const std::int64_t q = chunk + std::int64_t(k) * slices;
              if (q < vectors) {
                load(base + q, v[k]);
                ++valid;
              } else {
                KSTUDY_ROWS_UNROLL
                for (int j = 0; j < Vec; ++j) v[k][j] = 0.0f;
              }
            }
            moments_combine::join(lane, statistics(v, valid));
          }
          moments_combine::join(partial, lane);
        },
        moments_reducer(total));
    const float mean = total.mean, rstd = 1.0f / sqrtf(total.m2 / hidden + epsilon);
    // The second read: of h with the residual (written above by this same lane: not x + r again), else x.
    const auto reload = [&](const std::int64_t i) -> rows::vec_t<Vec> {
      if constexpr (Residual)
        return h(i);
      else
        return x(i);
    };
    rows::for_slices<true>(member, vector_length, [&](const int s) {
      for (std::int64_t chunk = s; chunk < vectors; chunk += stride) {
        KSTUDY_ROWS_UNROLL
        for (int k = 0; k < Items; ++k) {
          const std::int64_t q = chunk + std::int64_t(k) * slices;
          if (q < vectors) {
            float v[Vec];
            const rows::vec_t<Vec> loaded = reload(base + q);
            rows::unpack(loaded, v);
            store(base + q, q, v, mean, rstd);
          }
        }
      }
    });
  }
};

// ---------------------------------------------------------------------------------------------------------
// Hosts: one row per index of a RangePolicy over raw pointers (a static schedule: each core streams its own
// block of rows), three passes of `omp simd` loops, the last two over the row in the core's cache (4,096
// floats: 16 KiB, inside L1): the sum (with the residual, h = x + r is written on the way), then the sum of
// squared deviations from the mean (the exact two-pass statistics), then y. Each sum is a rows::folded_sum:
// SIMD lanes over host_fold floats (16 terms a lane of an AVX-512 vector, 64 of an SSE one: a short
// sequential chunk, then a tree, which the gate's u K allows) folded into a double, so no float total of the
// whole row swamps the small terms next to outliers. One Chan merge (a division) per chunk of the streamed
// device kernel costs a host core more than the memory does (~40% of the host read roof); plain sums
// vectorise.
template <bool Residual>
struct layernorm_host_rows {
  const float *x = nullptr, *r = nullptr, *gamma = nullptr, *beta = nullptr;
  float *y = nullptr, *h = nullptr;
  std::int64_t hidden = 0;
  float epsilon = 0.0f;

  void operator()(const std::int64_t row) const {
    const std::int64_t base = row * hidden;
    const float* const __restrict__ in = x + base;
    float* const __restrict__ out = y + base;
    const float* const __restrict__ g = gamma;
    const float* const __restrict__ b = beta;
    // The normalised input: h = x + r (written here, re-read from the cache below), else x.
    const float* v = in;
    double sum = 0.0;
    if constexpr (Residual) {
      const float* const __restrict__ res = r + base;
      float* const __restrict__ sums = h + base;
      sum = rows::folded_sum(hidden, [&](const std::int64_t i) {
        const float e = in[i] + res[i];
        sums[i] = e;
        return e;
      });
      v = sums;
    } else {
      sum = rows::folded_sum(hidden, [&](const std::int64_t i) { return in[i]; });
    }
    const float mean = static_cast<float>(sum / static_cast<double>(hidden));
    const float* const __restrict__ w = v;
    const double m2 = rows::folded_sum(hidden, [&](const std::int64_t i) {
      const float d = w[i] - mean;
      return d * d;
    });
    const float rstd = static_cast<float>(1.0 / std::sqrt(m2 / static_cast<double>(hidden) + double(epsilon)));
#pragma omp simd
    for (std::int64_t i = 0; i < hidden; ++i) out[i] = (w[i] - mean) * rstd * g[i] + b[i];
  }
};

// A row is read from memory once up to this many floats (else it is streamed, read twice): on a device the
// floats its registers hold, 16,384 (32 floats on each of 512 threads, or 16 on each of 1,024 with the
// residual); on a host the rows its core's cache holds between the passes (x, or x, r and h: 192 KiB at
// 16,384, inside a server core's L2).
template <class ExecutionSpace, bool Residual>
constexpr std::int64_t resident_hidden() {
  using shape = launch_shape<Residual>;
  return is_host_space_v<ExecutionSpace> ? std::int64_t(16384) : std::int64_t(shape::max_threads) * shape::lane_floats;
}

template <class ExecutionSpace, layernorm_kind K>
class layernorm_kokkos_tuned final : public layernorm_kokkos_base<ExecutionSpace, K> {
  using base = layernorm_kokkos_base<ExecutionSpace, K>;
  static constexpr bool residual = has_residual(K);
  using shape = launch_shape<residual>;

 public:
  using base::on_host;

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = this->prepare_arrays(problem, options, /*rows_in_league=*/true);
    bool vec4 = m_hidden % 4 == 0;
    for (const auto* p : {m_x.data(), m_y.data(), m_r.data(), m_h.data(), m_gamma.data(), m_beta.data()})
      vec4 = vec4 && rows::quad_aligned(p);  // a null (absent) array is aligned
    m_plan = rows::plan_launch<policy_type<ExecutionSpace, residual>>(m_rows, m_hidden, vec4, shape::max_threads,
                                                                      shape::lane_floats);
    if constexpr (!on_host)
      rows::check_team_size<policy_type<ExecutionSpace, residual>, shape::lane_floats>(
          m_space, m_plan, std::string(operation_name(K)) + "_kokkos_tuned", make_kernel());
    this->upload(data.streamed_inputs());
  }

  void launch() override {
    if constexpr (on_host) {
      const layernorm_host_rows<residual> rows_functor{m_x.data(), m_r.data(), m_gamma.data(), m_beta.data(),
                                                       m_y.data(), m_h.data(), m_hidden,       epsilon};
      rows::launch_host_rows(m_space, m_rows, std::string("kstudy::") + operation_name(K) + "_kokkos_tuned_host_rows",
                             rows_functor);
    } else {
      rows::launch_plan<policy_type<ExecutionSpace, residual>, shape::lane_floats>(
          m_space, m_plan, std::string("kstudy::") + operation_name(K) + "_kokkos_tuned_", make_kernel());
    }
  }

 private:
  // The plan's kernel from dispatch's arguments, over this variant's arrays.
  auto make_kernel() const {
    return [this](auto shape_c, auto vec_c, auto items_c) {
      using functor = layernorm_rows<ExecutionSpace, residual, decltype(shape_c)::value, decltype(vec_c)::value,
                                     decltype(items_c)::value>;
      constexpr int vec = functor::vec;
      const auto n = m_rows * m_hidden;
      functor f;
      f.x = rows::as_input<ExecutionSpace, vec>(m_x.data(), n);
      f.gamma = rows::as_input<ExecutionSpace, vec>(m_gamma.data(), m_hidden);
      f.beta = rows::as_input<ExecutionSpace, vec>(m_beta.data(), m_hidden);
      f.y = rows::as_output<ExecutionSpace, vec>(m_y.data(), n);
      if constexpr (residual) {
        f.r = rows::as_input<ExecutionSpace, vec>(m_r.data(), n);
        f.h = rows::as_output<ExecutionSpace, vec>(m_h.data(), n);
      }
      f.row_count = m_rows;
      f.vectors = m_hidden / vec;
      f.vector_length = m_plan.vector_length;
      f.hidden = static_cast<float>(m_hidden);
      f.epsilon = epsilon;
      return f;
    };
  }

  using base::m_beta;
  using base::m_gamma;
  using base::m_h;
  using base::m_hidden;
  using base::m_r;
  using base::m_rows;
  using base::m_space;
  using base::m_x;
  using base::m_y;
  rows::plan m_plan;
};

// Matrix reads of the kernel: once from registers, twice when the rows are streamed.
template <class Space, bool Residual>
int row_reads(std::int64_t hidden) {
  return hidden <= resident_hidden<Space, Residual>() ? 1 : 2;
}

template <class Space>
void register_space() {
  const std::string kokkos =
      "Kokkos hierarchical parallelism: TeamPolicy and vector_length 32 on a device (1 on hosts); rows up to 1,024 "
      "cols one per team thread (8 per team) reduced across its vector lanes by ThreadVectorRange parallel_reduce "
      "(warp shuffles), longer rows one per team by TeamThreadRange parallel_reduce over nested ThreadVectorRange "
      "ones; two Sum<float> reductions per row (the sum, then the squared deviations from the registers), no team "
      "scratch; the row in registers up to 16,384 cols (float4 loads through unmanaged Restrict Views of a 16-byte "
      "struct when hidden % 4 == 0), longer rows streamed twice (Chan merges of the lanes' chunks)";
  auto plain = variant_info_for(layernorm_kind::plain, "layernorm_kokkos_tuned", "layernorm_kokkos",
                                kokkos + "; LaunchBounds<512,2>, 32 floats a lane in a team", 1, 1);
  plain.traffic = [](const table_shape& s) {
    return pass_traffic(s.rows, s.features, row_reads<Space, false>(s.features), 1);
  };
  plain.rung = 1;
  plain.implementation = implementation::kokkos;
  plain.kernels_launched = 1;  // the row kernel of the plan's shape
  register_kokkos_variant<layernorm_kokkos_tuned<Space, layernorm_kind::plain>>(std::move(plain));

  auto fused =
      variant_info_for(layernorm_kind::residual, "residual_layernorm_kokkos_tuned", "residual_layernorm_kokkos",
                       kokkos +
                           "; LaunchBounds<1024,1>, 16 floats a lane in a team; x and r loaded together, "
                           "h = x + r written on the load (4 passes)",
                       2, 2);
  // Streamed rows read h back (written by the same kernel) in the second pass.
  fused.traffic = [](const table_shape& s) {
    return pass_traffic(s.rows, s.features, 1 + row_reads<Space, true>(s.features), 2);
  };
  fused.rung = 1;
  fused.implementation = implementation::kokkos;
  fused.fusion = fusion_level::full;
  fused.kernels_launched = 1;  // the row kernel of the plan's shape
  register_kokkos_variant<layernorm_kokkos_tuned<Space, layernorm_kind::residual>>(std::move(fused));
}

[[maybe_unused]] const int registered =
    for_each_enabled_space([](auto tag) { register_space<typename decltype(tag)::type>(); });

}  // namespace
}  // namespace kstudy::layernorm
