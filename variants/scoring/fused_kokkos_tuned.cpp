// fused_kokkos_row_major_tuned: the whole operation in one Kokkos kernel on a row-major (LayoutRight) table,
// written for a GPU the way the CUDA kernels are and kept portable, for every enabled execution space (rung 1
// of family fused_kokkos, over fused_kokkos_row_major's tile copy through team scratch).
//
// Device: no team scratch and no barrier. A team thread owns a row; its vector lanes cover the row with 16-byte
// loads (float4 when features % 4 == 0 and the arrays are 16-byte aligned, single floats otherwise): as many
// lanes as the row has vectors, rounded up to a power of two and at most 32, a vector a lane. At 16 features
// that is 4 lanes a row, so a warp (8 team threads, adjacent rows) reads 8 whole rows, 512 contiguous bytes,
// per load instruction; past 32 vectors it is a warp a row walking the row in chunks of 32 vectors.
//  - A lane's mean, inv_std and weight vectors are the same for every row: loaded once into its registers, so
//    the row loop issues the table's loads only.
//  - A thread takes 4 rows at once: 4 independent 16-byte loads in flight a lane before the first is used.
//  - One ThreadVectorRange parallel_reduce over a struct of the Rows sums (warp shuffles; the lane mask Kokkos
//    computes per reduction is paid once for Rows rows). Every lane then holds every sum, so every lane counts
//    the flags the same (Kokkos' team reduction takes a thread's value from its lanes, which must agree), and
//    lane l stores the scores and flags of the thread's rows l, l + lanes, ...
//  - One resident wave of 256-thread teams (LaunchBounds<256, 4>: at most 64 registers, four teams an SM, as
//    the feature-major kernel) strides over blocks of team_size x Rows rows.
//  - Rows over 32 vectors (128 floats as float4): the lanes walk 4 rows at once in chunks of 32 vectors (a
//    vector a lane), reading the feature vectors beside the table (they stay in L1). Two vectors a lane with the
//    feature vectors in registers and 2 rows a thread, the first version for up to 64 vectors, ran at 0.71x
//    Kokkos feature-major at 262,144 x 256 on the H200 (Kokkos 4.6: 132 against 93 us), while the chunked walk
//    reached 0.91x at 1M x 512.
// Host spaces: a row per work item, eight features loaded at a time, then their terms summed in order (rung 0's
// host loop; see run_host).
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "detail/fused_kokkos_info.hpp"
#include "detail/kokkos_rows.hpp"  // variants/detail: float4_t, vec_t, input_view, struct_reducer
#include "detail/scoring_kokkos_variant.hpp"

namespace kstudy {
namespace {

namespace rows = detail::rows;
using detail::clamp_nan_through;
using detail::write_row;

// Device launch: 256-thread teams, at most 64 registers a thread so that four are resident on an SM.
constexpr int team_threads = 256;
constexpr int min_teams_per_sm = 4;
constexpr int max_lanes = 32;  // a warp
// Host: features loaded ahead of their use, a batch at a time.
constexpr int host_batch = 8;

template <class ExecutionSpace>
using device_policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<team_threads, min_teams_per_sm>>;

// The scores of the Rows rows a thread reduces at once: one vector reduction for all of them.
template <int Rows>
struct row_sums {
  float v[Rows];
};

template <int Rows>
struct row_sums_combine {
  using value_type = row_sums<Rows>;
  KOKKOS_INLINE_FUNCTION static value_type identity() {
    value_type s;
    for (int k = 0; k < Rows; ++k) s.v[k] = 0.0f;
    return s;
  }
  KOKKOS_INLINE_FUNCTION static void join(value_type& a, const value_type& b) {
    for (int k = 0; k < Rows; ++k) a.v[k] += b.v[k];
  }
};

// One vector of the feature vectors, zero beyond the row (a zero weight: padding lanes add exactly 0).
template <class View, int Vec>
KOKKOS_FORCEINLINE_FUNCTION void load_or_zero(const View& v, std::int64_t q, std::int64_t vectors, float (&out)[Vec]) {
  if (q < vectors) {
    const rows::vec_t<Vec> loaded = v(q);
    rows::unpack(loaded, out);
  } else {
    for (int j = 0; j < Vec; ++j) out[j] = 0.0f;
  }
}

// sum + the vector's standardized, clipped, weighted terms, in feature order.
template <int Vec>
KOKKOS_FORCEINLINE_FUNCTION float add_terms(float sum, const rows::vec_t<Vec>& x, const float (&m)[Vec],
                                            const float (&s)[Vec], const float (&w)[Vec], float clip) {
  float v[Vec];
  rows::unpack(x, v);
  for (int j = 0; j < Vec; ++j) sum += clamp_nan_through((v[j] - m[j]) * s[j], clip) * w[j];
  return sum;
}

// The device kernel: Vec floats a vector, Items vectors a lane (per chunk unless Resident), Rows rows a thread.
// Resident: the row is at most lanes x Items vectors, so a lane's feature vectors stay in its registers.
template <class ExecutionSpace, int Vec, int Items, int Rows, bool Resident>
struct row_major_kernel {
  using member_type = typename device_policy<ExecutionSpace>::member_type;
  using memory_space = typename ExecutionSpace::memory_space;
  using vec_type = rows::vec_t<Vec>;
  using sums_type = row_sums<Rows>;
  using reducer_type = rows::struct_reducer<row_sums_combine<Rows>>;

  rows::input_view<ExecutionSpace, Vec> x;  // the table as vectors; row r starts at r * pitch
  rows::input_view<ExecutionSpace, Vec> mean, inv_std, weight;
  Kokkos::View<float*, memory_space> score;
  Kokkos::View<std::uint8_t*, memory_space> flag;
  std::int64_t row_count = 0, pitch = 0, vectors = 0, blocks = 0;  // vectors: a row's, features / Vec
  int lanes = 1;
  float clip = 0, threshold = 0;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team, std::int64_t& count) const {
    const int threads = team.team_size();
    // A range of exactly `lanes` indices gives each vector lane one index, its own (CUDA: threadIdx.x), the
    // same in every such range: a lane's index and its feature vectors set here stay in its registers for the
    // reductions and the stores below.
    int lane_index = 0;
    float m[Items][Vec], s[Items][Vec], w[Items][Vec];
    Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, lanes), [&](const int lane) {
      lane_index = lane;
      if constexpr (Resident) {
        for (int i = 0; i < Items; ++i) {
          const std::int64_t q = lane + std::int64_t(i) * lanes;
          load_or_zero(mean, q, vectors, m[i]);
          load_or_zero(inv_std, q, vectors, s[i]);
          load_or_zero(weight, q, vectors, w[i]);
        }
      }
    });
    for (std::int64_t b = team.league_rank(); b < blocks; b += team.league_size()) {
      // Row k of the thread: adjacent threads take adjacent rows, so a warp's lanes read contiguous bytes.
      const std::int64_t first = b * threads * Rows + team.team_rank();
      sums_type sums;
      Kokkos::parallel_reduce(
          Kokkos::ThreadVectorRange(team, lanes),
          [&](const int lane, sums_type& part) {
            if constexpr (Resident) {
              vec_type v[Rows][Items];  // every load issued before the first is used
              for (int k = 0; k < Rows; ++k)
                for (int i = 0; i < Items; ++i) {
                  const std::int64_t r = first + std::int64_t(k) * threads, q = lane + std::int64_t(i) * lanes;
                  v[k][i] = r < row_count && q < vectors ? x(r * pitch + q) : vec_type{};
                }
              for (int k = 0; k < Rows; ++k)
                for (int i = 0; i < Items; ++i) part.v[k] = add_terms<Vec>(part.v[k], v[k][i], m[i], s[i], w[i], clip);
            } else {
              for (std::int64_t c = lane; c < vectors; c += std::int64_t(Items) * lanes) {
                vec_type v[Rows][Items];
                for (int k = 0; k < Rows; ++k)
                  for (int i = 0; i < Items; ++i) {
                    const std::int64_t r = first + std::int64_t(k) * threads, q = c + std::int64_t(i) * lanes;
                    v[k][i] = r < row_count && q < vectors ? x(r * pitch + q) : vec_type{};
                  }
                for (int i = 0; i < Items; ++i) {
                  const std::int64_t q = c + std::int64_t(i) * lanes;
                  float cm[Vec], cs[Vec], cw[Vec];
                  load_or_zero(mean, q, vectors, cm);
                  load_or_zero(inv_std, q, vectors, cs);
                  load_or_zero(weight, q, vectors, cw);
                  for (int k = 0; k < Rows; ++k) part.v[k] = add_terms<Vec>(part.v[k], v[k][i], cm, cs, cw, clip);
                }
              }
            }
          },
          reducer_type(sums));
      for (int k = 0; k < Rows; ++k)
        if (first + std::int64_t(k) * threads < row_count) count += sums.v[k] > threshold;
      // Lane l stores the thread's rows l, l + lanes, ...: one store instruction a warp where lanes >= Rows,
      // where Kokkos::single would have lane 0 issue Rows of them (and recompute Kokkos' lane mask).
      for (int k = lane_index; k < Rows; k += lanes) {
        const std::int64_t r = first + std::int64_t(k) * threads;
        float sum = sums.v[0];
        for (int j = 1; j < Rows; ++j) sum = j == k ? sums.v[j] : sum;  // no dynamically indexed register array
        if (r < row_count) {
          score(r) = sum;
          flag(r) = sum > threshold;
        }
      }
    }
  }
};

template <class ExecutionSpace, class Value = float>
class fused_kokkos_tuned final
    : public detail::pipelined_scoring_kokkos_variant<ExecutionSpace, Kokkos::LayoutRight, Value> {
  static_assert(std::is_same_v<Value, float>, "the device kernel reads float4 vectors");
  static constexpr bool on_host = is_host_space_v<ExecutionSpace>;

 public:
  // Queues the kernel; its flagged count lands in m_count_host.
  void launch() override {
    if constexpr (on_host) {
      run_host();
    } else {
      const std::int64_t pitch = this->m_x.stride(0);
      const bool vec4 = this->m_shape.features % 4 == 0 && pitch % 4 == 0 && rows::quad_aligned(this->m_x.data()) &&
                        rows::quad_aligned(this->m_vectors.mean.data()) &&
                        rows::quad_aligned(this->m_vectors.inv_std.data()) &&
                        rows::quad_aligned(this->m_vectors.weight.data());
      if (vec4)
        run_device<4>();
      else
        run_device<1>();
    }
  }

  // The kernel for rows of `vectors` Vec-float vectors: one vector a lane (4 rows a thread) up to 32, chunks
  // of 32 vectors beyond (4 rows a thread; two vectors a lane and 2 rows spilled 16 bytes under the 64
  // registers).
  template <int Vec>
  void run_device() {
    const std::int64_t vectors = this->m_shape.features / Vec;
    if (vectors <= max_lanes)
      run_kernel<Vec, 1, 4, true>(rows::power_of_two_at_least(vectors));
    else
      run_kernel<Vec, 1, 4, false>(max_lanes);
  }

  template <int Vec, int Items, int Rows, bool Resident>
  void run_kernel(int lanes) {
    using kernel_type = row_major_kernel<ExecutionSpace, Vec, Items, Rows, Resident>;
    const std::int64_t features = this->m_shape.features, row_count = this->m_shape.rows;
    const std::int64_t pitch = this->m_x.stride(0);
    kernel_type kernel;
    kernel.x = rows::as_input<ExecutionSpace, Vec>(this->m_x.data(), row_count * pitch);
    kernel.mean = rows::as_input<ExecutionSpace, Vec>(this->m_vectors.mean.data(), features);
    kernel.inv_std = rows::as_input<ExecutionSpace, Vec>(this->m_vectors.inv_std.data(), features);
    kernel.weight = rows::as_input<ExecutionSpace, Vec>(this->m_vectors.weight.data(), features);
    kernel.score = this->m_score;
    kernel.flag = this->m_flag;
    kernel.row_count = row_count;
    kernel.pitch = pitch / Vec;
    kernel.vectors = features / Vec;
    kernel.lanes = lanes;
    kernel.clip = this->m_clip;
    kernel.threshold = this->m_threshold;
    const int team_size = team_threads / lanes;
    const std::int64_t rows_per_block = std::int64_t(team_size) * Rows;
    kernel.blocks = (row_count + rows_per_block - 1) / rows_per_block;
    const std::int64_t teams = balanced_teams(
        kernel.blocks, guaranteed_resident_teams(this->m_space, team_threads, team_threads * min_teams_per_sm));
    Kokkos::parallel_reduce(
        "kstudy::fused_kokkos_tuned<row_major>",
        light_weight(device_policy<ExecutionSpace>(this->m_space, static_cast<int>(teams), team_size, lanes)), kernel,
        this->m_count_host);
  }

  // Host: a row per work item, eight loads ahead of the arithmetic (rung 0's host loop).
  void run_host() {
    const float* x = this->m_x.data();
    const float *mean = this->m_vectors.mean.data(), *inv_std = this->m_vectors.inv_std.data(),
                *weight = this->m_vectors.weight.data();
    const auto score = this->m_score;
    const auto flag = this->m_flag;
    const float clip = this->m_clip, threshold = this->m_threshold;
    const std::int64_t features = this->m_shape.features, pitch = this->m_x.stride(0);
    Kokkos::parallel_reduce(
        "kstudy::fused_kokkos_tuned<row_major,host>",
        Kokkos::RangePolicy<ExecutionSpace>(this->m_space, 0, this->m_shape.rows),
        [=](const std::int64_t r, std::int64_t& count) {
          const float* row = x + r * pitch;
          // Rung 0's row loop (eight loads, then one running sum): eight interleaved partial sums ran 3x
          // slower on the H200 host's 16 cores (117 against 40 ms at 16M x 16; not investigated further).
          float sum = 0.0f;
          std::int64_t f = 0;
          for (; f + host_batch <= features; f += host_batch) {
            float v[host_batch];
            for (int k = 0; k < host_batch; ++k) v[k] = row[f + k];
            for (int k = 0; k < host_batch; ++k)
              sum += clamp_nan_through((v[k] - mean[f + k]) * inv_std[f + k], clip) * weight[f + k];
          }
          for (; f < features; ++f) sum += clamp_nan_through((row[f] - mean[f]) * inv_std[f], clip) * weight[f];
          write_row(score, r, sum, threshold, flag, count);
        },
        this->m_count_host);
  }
};

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  auto info = detail::fused_info(
      "fused_kokkos_row_major_tuned", table_layout::row_major,
      "one kernel; device: a team thread per row, its vector lanes covering the row with float4 loads (4 lanes at "
      "16 features, a warp at 256), feature vectors in registers, 4 or 2 rows a thread reduced by one "
      "ThreadVectorRange parallel_reduce, no scratch, a resident wave of LaunchBounds<256,4> teams; host: rung 0's "
      "row loop");
  info.rung = 1;  // over fused_kokkos_row_major (rung 0)
  register_kokkos_variant<fused_kokkos_tuned<space>>(std::move(info));
});

}  // namespace
}  // namespace kstudy
