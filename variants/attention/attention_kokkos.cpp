// Fused attention in Kokkos, for every enabled execution space (portable, rung 0, family attention_kokkos):
// <operation>_kokkos_fused for every attention operation (attention_kokkos_fused, attention_bf16_kokkos_fused,
// ..., attention_fp16_causal_kokkos_fused) and <operation>_kokkos_tiled for the unmasked ones (the causal ones
// on host spaces only: the device kernel has no mask).
// a TeamPolicy with one team per (head, block of query rows). The team stages its query block in team
// scratch, then streams K and V through scratch one tile of keys at a time (consecutive threads load
// consecutive elements: coalesced on a GPU). Each query row keeps an online softmax -- running max m,
// running sum l and an accumulator o[D] rescaled by exp(m_old - m_new) when the max grows -- so the T x T
// score matrix is never formed: a tile's scores live in scratch (block_q x block_k floats) and the memory
// beyond Q, K, V and O is per team, independent of T.
// On a device a team has one thread per query row: the K and V tile reads are broadcasts (every thread reads
// the same key), the per-row arrays have an odd stride so that the row-private reads of a warp hit 32
// different banks. On a host a team is one thread and walks its rows in turn (contiguous inner loops over d).
// Tile sizes start at 64 x 64 and shrink until the scratch fits the space's level-0 team scratch (Kokkos 3.4:
// 40 KB on CUDA, 32 KB on hosts); a head_dim too large even for 8 x 8 tiles uses level-1 scratch (global
// memory) instead.
// The bf16 and fp16 operations read the 16-bit patterns and widen them to float (exact); scores, softmax and
// accumulation are float32, and O is rounded to bfloat16 or fp16 (nearest even) once. With the causal mask a
// team's key tiles stop at its last row and each row takes the keys up to its own (attended_keys).
#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "attention/attention.hpp"
#include "attention/attention_kokkos_common.hpp"
#include "kstudy/support/kokkos_support.hpp"

namespace kstudy::attention {
namespace {

using namespace kokkos_shared;  // the helpers, host kernel and variant bases both rungs share

// The tiling of one launch: rows per team (block_q), keys per tile (block_k), the odd strides of the
// per-row arrays and the scratch level.
struct tiling {
  int block_q = 64, block_k = 64, level = 0;
  int row_stride = 1, score_stride = 1;
  static int odd(int n) { return n % 2 == 0 ? n + 1 : n; }
  // Floats of team scratch: Q block, O accumulators, K tile, V tile, tile scores, m and l per row.
  KOKKOS_INLINE_FUNCTION std::size_t floats(int dim) const {
    return std::size_t(2) * block_q * row_stride + std::size_t(2) * block_k * dim +
           std::size_t(block_q) * score_stride + std::size_t(2) * block_q;
  }
};

template <class ExecutionSpace>
std::size_t scratch_bytes(const tiling& t, int dim) {
  using scratch_view = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, unmanaged>;
  return scratch_view::shmem_size(t.floats(dim));
}

template <class ExecutionSpace>
tiling choose_tiling(int dim) {
  using policy = Kokkos::TeamPolicy<ExecutionSpace>;
  tiling t;
  const auto settle = [&t, dim] {
    t.row_stride = tiling::odd(dim);
    t.score_stride = tiling::odd(t.block_k);
  };
  settle();
  const auto level0 = static_cast<std::size_t>(policy::scratch_size_max(0));
  while (scratch_bytes<ExecutionSpace>(t, dim) > level0 && (t.block_q > 8 || t.block_k > 8)) {
    if (t.block_k >= t.block_q)
      t.block_k /= 2;
    else
      t.block_q /= 2;
    settle();
  }
  if (scratch_bytes<ExecutionSpace>(t, dim) > level0) {
    t.level = 1;
    if (scratch_bytes<ExecutionSpace>(t, dim) > static_cast<std::size_t>(policy::scratch_size_max(1)))
      throw std::invalid_argument("attention_kokkos_fused: head_dim " + std::to_string(dim) +
                                  " does not fit the team scratch even with 8 x 8 tiles");
  }
  return t;
}

template <class ExecutionSpace, attention_precision P, attention_mask M>
struct attention_body {
  using storage = storage_t<P>;
  using device_type = Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>;
  using array_type = Kokkos::View<storage*, device_type>;
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace>;
  using member_type = typename policy_type::member_type;
  using scratch_view = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, unmanaged>;

  array_type q, k, v, o;
  std::int64_t tokens = 0;
  int dim = 0, blocks_per_head = 1;
  tiling tiles;
  float scale = 1.0f;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const int bq = tiles.block_q, bk = tiles.block_k, rs = tiles.row_stride, ss = tiles.score_stride;
    const std::int64_t h = team.league_rank() / blocks_per_head;
    const std::int64_t q0 = std::int64_t(team.league_rank() % blocks_per_head) * bq;
    const int rows = static_cast<int>(tokens - q0 < bq ? tokens - q0 : bq);
    const scratch_view scratch(team.team_scratch(tiles.level), tiles.floats(dim));
    float* const qs = scratch.data();
    float* const os = qs + std::size_t(bq) * rs;
    float* const ks = os + std::size_t(bq) * rs;
    float* const vs = ks + std::size_t(bk) * dim;
    float* const scores = vs + std::size_t(bk) * dim;
    float* const row_max = scores + std::size_t(bq) * ss;
    float* const row_sum = row_max + bq;
    const float minus_infinity = -INFINITY;  // the macro: numeric_limits is host-only in device code

    const std::int64_t q_base = (h * tokens + q0) * dim;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * dim), [&](const int i) {
      const int r = i / dim, d = i % dim;
      qs[r * rs + d] = load_value(q(q_base + i));
      os[r * rs + d] = 0.0f;
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](const int r) {
      row_max[r] = minus_infinity;
      row_sum[r] = 0.0f;
    });
    const std::int64_t keys_end = key_end<M>(tokens, q0 + rows - 1);
    for (std::int64_t k0 = 0; k0 < keys_end; k0 += bk) {
      const int keys = static_cast<int>(keys_end - k0 < bk ? keys_end - k0 : bk);
      const std::int64_t kv_base = (h * tokens + k0) * dim;
      team.team_barrier();  // the previous tile is consumed (and the Q block staged) before it is overwritten
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, keys * dim), [&](const int i) {
        ks[i] = load_value(k(kv_base + i));
        vs[i] = load_value(v(kv_base + i));
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](const int r) {
        const float* const qr = qs + r * rs;
        float* const orow = os + r * rs;
        float* const sr = scores + r * ss;
        const int attended = attended_keys<M>(q0 + r, k0, keys);
        float tile_max = minus_infinity;
        for (int j = 0; j < attended; ++j) {
          const float* const kj = ks + j * dim;
          float dot = 0.0f;
          for (int d = 0; d < dim; ++d) dot += qr[d] * kj[d];
          const float s = dot * scale;
          sr[j] = s;
          tile_max = tile_max > s ? tile_max : s;
        }
        accumulate_tile(sr, tile_max, vs, attended, dim, orow, row_max[r], row_sum[r]);
      });
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * dim), [&](const int i) {
      const int r = i / dim, d = i % dim;
      store_value(o(q_base + i), os[r * rs + d] / row_sum[r]);
    });
  }
};

template <class ExecutionSpace, attention_precision P, attention_mask M>
class attention_kokkos_fused final : public attention_kokkos_base<ExecutionSpace, P> {
 public:
  using body_type = attention_body<ExecutionSpace, P, M>;
  using policy_type = typename body_type::policy_type;
  using attention_kokkos_base<ExecutionSpace, P>::on_host;

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = attention_problem(problem, P, M);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    if (data.tokens() > std::numeric_limits<int>::max() / 2 || data.head_dim() > 65536)
      throw std::invalid_argument("attention_kokkos_fused: tokens or head_dim too large");
    const tiling tiles = choose_tiling<ExecutionSpace>(static_cast<int>(data.head_dim()));
    const std::int64_t blocks = (data.tokens() + tiles.block_q - 1) / tiles.block_q;
    if (data.heads() * blocks > std::numeric_limits<int>::max())
      throw std::invalid_argument("attention_kokkos_fused: more teams than a Kokkos league holds (2^31 - 1)");
    this->allocate(data.elements());
    m_body.q = this->m_q;
    m_body.k = this->m_k;
    m_body.v = this->m_v;
    m_body.o = this->m_o;
    m_body.tokens = data.tokens();
    m_body.dim = static_cast<int>(data.head_dim());
    m_body.blocks_per_head = static_cast<int>(blocks);
    m_body.tiles = tiles;
    m_body.scale = data.scale();
    m_teams = static_cast<int>(data.heads() * blocks);
    this->upload(data.streamed_inputs());
  }

  void launch() override {
    const int team_size = on_host ? 1 : m_body.tiles.block_q;  // one thread per query row on a device
    const auto bytes = scratch_bytes<ExecutionSpace>(m_body.tiles, m_body.dim);
    const policy_type policy =
        policy_type(this->m_space, m_teams, team_size).set_scratch_size(m_body.tiles.level, Kokkos::PerTeam(bytes));
    Kokkos::parallel_for("kstudy::attention_kokkos_fused", policy, m_body);
  }

 private:
  body_type m_body;
  int m_teams = 1;
};

// ---------------------------------------------------------------------------------------------------------
// attention_kokkos_tiled: the CUDA fused kernel's register tiling (attention_fused_f32) in portable Kokkos.
//
// Device (team of 128 threads per (head, 64 query rows)). Team scratch holds the Q block (64 x DMAX), one
// K/V tile of 32 keys (32 x DMAX each), P (64 x 32, over the K tile once the scores are done) and the
// per-row partials of the 8 threads sharing a row (64 x 8). Rows are padded to DMAX + 4 floats (P: 32 + 8),
// so consecutive rows start 4 (8) banks apart and the quad reads of a warp below are conflict-free. Thread
// t (warp w = t / 32, lane = 8 rg + cg) owns query rows w 16 + rg + 4 i (i < 4), keys cg + 8 j (j < 4) of a
// tile's 64 x 32 scores and output columns 32 dd + 4 cg + e (dd < DMAX / 32, e < 4): a 4 x 4 block of S and
// a 4 x 8 (DMAX 64) or 4 x 16 (DMAX 128) block of O in registers. S: per 4 of head_dim, 4 Q quads and 4 K
// quads for 64 FMAs; O += P V: per 4 keys, 4 P quads and 4 DMAX / 32 V quads for 16 DMAX / 8 FMAs. Quads
// are float4 loads on CUDA (the scratch is realigned to 16 bytes), 4 scalar loads elsewhere. The row maxima
// go through the partials array (one barrier per tile: no portable warp shuffle in Kokkos 3.4); the row sums
// stay per thread (every thread of a row rescales by the same max) and are combined once at the end.
// Kokkos 3.4 caps level-0 team scratch at 40 KiB on CUDA (4.6: 48 KiB less 8 KiB for team reductions):
// DMAX 64 takes 38.4 KB of level 0; DMAX 128 keeps K, V, P and the partials (35.9 KB) in level 0 and the
// Q block in level 1 (global memory through L1). Why 32-key tiles: Q + 64-key K and V tiles (52 KB) do not
// fit 40 KiB. head_dim <= 64 runs the DMAX 64 kernel, up to 128 the DMAX 128 one (Q, K and V zero-padded
// beyond head_dim in scratch, keys beyond tokens masked to -inf, rows beyond tokens not stored).
// Expected on the H200 at 16 x 16384 x 64 (fp32 and bf16 alike: the inputs are widened on the load):
// ~25 TFLOP/s (70-80% of attention_fused's 33.3: the same 12-quads-per-128-FMA O loop, an S loop with
// 8 quads per 64 FMAs, twice the barriers and softmax work per FMA with 32-key tiles, 4 teams of 4 warps
// per SM at <= 128 registers).
//
// Host: the register-tiled rungs' shared host kernel (kokkos_shared::host_body, attention_kokkos_common.hpp):
// a team is one thread and 64 query rows; the score row is updated along a 64-key K tile stored transposed in
// team scratch and O += p V runs along head_dim, both contiguous inner loops the compiler vectorises.

#if defined(__CUDA_ARCH__)  // the device pass only: the host compiler warns on an unknown pragma
#define KSTUDY_ATTENTION_UNROLL _Pragma("unroll")
#define KSTUDY_ATTENTION_UNROLL_2 _Pragma("unroll 2")
#define KSTUDY_ATTENTION_UNROLL_4 _Pragma("unroll 4")
#else
#define KSTUDY_ATTENTION_UNROLL
#define KSTUDY_ATTENTION_UNROLL_2
#define KSTUDY_ATTENTION_UNROLL_4
#endif

template <int DMAX>
struct device_tiles {
  static_assert(DMAX % 32 == 0 && DMAX <= max_device_head_dim, "DMAX: a multiple of 32 up to 128");
  static constexpr int keys = 32;           // per K/V tile
  static constexpr int pitch = DMAX + 4;    // Q, K, V rows
  static constexpr int p_pitch = keys + 8;  // P rows
  static constexpr int dq = DMAX / 32;      // quads of O columns per thread
  static constexpr int q_floats = tile_rows * pitch;
  static constexpr int kp_floats = keys * pitch > tile_rows* p_pitch ? keys* pitch : tile_rows* p_pitch;
  static constexpr int v_floats = keys * pitch;
  static constexpr int part_floats = tile_rows * 8;  // per row, one partial per thread of the row
  static constexpr int q_level = DMAX <= 64 ? 0 : 1;
  static constexpr int align_floats = 4;  // slack to realign a scratch level to 16 bytes
  KOKKOS_INLINE_FUNCTION static constexpr std::size_t level_floats(int level) {
    return level == 0 ? std::size_t((q_level == 0 ? q_floats : 0) + kp_floats + v_floats + part_floats + align_floats)
                      : std::size_t(q_level == 1 ? q_floats + align_floats : 0);
  }
};
static_assert(device_threads == 2 * tile_rows && device_tiles<64>::keys * tile_rows == 16 * device_threads,
              "the thread mapping: 8 threads per row group of 4 rows, 4 x 4 scores per thread");

// The device kernel (see above) for head_dim <= DMAX.
template <class ExecutionSpace, attention_precision P, int DMAX>
struct tiled_device_body {
  using tiles = device_tiles<DMAX>;
  using storage = storage_t<P>;
  using device_type = Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>;
  using array_type = Kokkos::View<storage*, device_type>;
  // Teams of 128 threads, 4 per SM for DMAX 64 (at most 128 registers a thread), 3 for DMAX 128 (168; capped
  // for four it spilled 244 bytes). sm_90, nvcc 13: 128 / 168 registers, 40-56 bytes of spills either way
  // (long-lived 64-bit scratch pointers: Kokkos hands scratch out as generic pointers).
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<device_threads, DMAX <= 64 ? 4 : 3>>;
  using member_type = typename policy_type::member_type;

  array_type q, k, v, o;
  std::int64_t tokens = 0;
  int dim = 0, blocks_per_head = 1;
  float scale = 1.0f;

  // Rows [row0, row0 + count) of a head's tokens x dim matrix into a tile of pitch tiles::pitch, zero beyond
  // tokens and dim; consecutive threads load consecutive quads of a row (coalesced).
  KOKKOS_INLINE_FUNCTION void load_tile(float* tile, int count, const storage* src, std::int64_t row0, int rank,
                                        bool vector) const {
    constexpr int chunks = DMAX / 4;
    // Two quads in flight per thread, as in attention_fused_f32: unrolled further the loads hold registers
    // the accumulators need.
    KSTUDY_ATTENTION_UNROLL_2
    for (int f = rank; f < count * chunks; f += device_threads) {
      const int r = f / chunks, c = (f % chunks) * 4;
      const std::int64_t t = row0 + r;
      quad x = {0.0f, 0.0f, 0.0f, 0.0f};
      if (t < tokens && c < dim) {
        const storage* p = src + t * dim + c;
        if (vector) {
          x = load_input_quad(p);
        } else {
          x.x = load_value(p[0]);
          if (c + 1 < dim) x.y = load_value(p[1]);
          if (c + 2 < dim) x.z = load_value(p[2]);
          if (c + 3 < dim) x.w = load_value(p[3]);
        }
      }
      store_quad(tile + r * tiles::pitch + c, x);
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    constexpr int pitch = tiles::pitch, p_pitch = tiles::p_pitch, dq = tiles::dq, keys = tiles::keys;
    const scratch_floats<ExecutionSpace> level0(team.team_scratch(0), tiles::level_floats(0));
    float* const base0 = align16(level0.data());
    float* qs = base0;
    float* ks = base0;
    if constexpr (tiles::q_level == 1) {
      const scratch_floats<ExecutionSpace> level1(team.team_scratch(1), tiles::level_floats(1));
      qs = align16(level1.data());
    } else {
      ks = base0 + tiles::q_floats;
    }
    float* const ps = ks;  // P replaces the K tile once the scores are computed
    float* const vs = ks + tiles::kp_floats;
    float* const part = vs + tiles::v_floats;

    const int rank = team.team_rank();
    const int warp = rank >> 5, lane = rank & 31, rg = lane >> 3, cg = lane & 7;
    const int r_first = warp * 16 + rg;  // this thread's rows: r_first + 4 i
    const std::int64_t head = team.league_rank() / blocks_per_head;
    const std::int64_t row0 = std::int64_t(team.league_rank() % blocks_per_head) * tile_rows;
    const std::int64_t head_base = head * tokens * dim;
    const bool vector = dim % 4 == 0;  // every row starts 4-element aligned
    const float minus_infinity = -INFINITY;

    load_tile(qs, tile_rows, q.data() + head_base, row0, rank, vector);

    float acc[4][dq][4];
    float m[4], l[4];
    KSTUDY_ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i) {
      m[i] = minus_infinity;
      l[i] = 0.0f;
      KSTUDY_ATTENTION_UNROLL
      for (int c = 0; c < dq; ++c) {
        KSTUDY_ATTENTION_UNROLL
        for (int e = 0; e < 4; ++e) acc[i][c][e] = 0.0f;
      }
    }

    for (std::int64_t key0 = 0; key0 < tokens; key0 += keys) {
      team.team_barrier();  // the previous tile's O += P V is done with P (over K) and V
      load_tile(ks, keys, k.data() + head_base, key0, rank, vector);
      load_tile(vs, keys, v.data() + head_base, key0, rank, vector);
      team.team_barrier();  // (and the Q block on the first pass)

      float s[4][4];
      KSTUDY_ATTENTION_UNROLL
      for (int i = 0; i < 4; ++i) {
        KSTUDY_ATTENTION_UNROLL
        for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
      }
      // Unrolled by 4 (of DMAX / 4): fully unrolled, the hoisted Q and K loads spill.
      KSTUDY_ATTENTION_UNROLL_4
      for (int d = 0; d < DMAX; d += 4) {
        quad qv[4];
        KSTUDY_ATTENTION_UNROLL
        for (int i = 0; i < 4; ++i) qv[i] = load_quad(qs + (r_first + 4 * i) * pitch + d);
        KSTUDY_ATTENTION_UNROLL
        for (int j = 0; j < 4; ++j) {
          const quad kv = load_quad(ks + (cg + 8 * j) * pitch + d);
          KSTUDY_ATTENTION_UNROLL
          for (int i = 0; i < 4; ++i) {
            s[i][j] += qv[i].x * kv.x;
            s[i][j] += qv[i].y * kv.y;
            s[i][j] += qv[i].z * kv.z;
            s[i][j] += qv[i].w * kv.w;
          }
        }
      }

      // This thread's maxima of its rows, to the partials; keys beyond tokens are masked.
      const bool edge = key0 + keys > tokens;
      KSTUDY_ATTENTION_UNROLL
      for (int i = 0; i < 4; ++i) {
        float tile_max = minus_infinity;
        KSTUDY_ATTENTION_UNROLL
        for (int j = 0; j < 4; ++j) {
          float x = s[i][j] * scale;
          if (edge && key0 + cg + 8 * j >= tokens) x = minus_infinity;
          s[i][j] = x;
          tile_max = fmaxf(tile_max, x);
        }
        part[(r_first + 4 * i) * 8 + cg] = tile_max;
      }
      team.team_barrier();  // the partials are complete and every thread is done reading K: P may replace it

      KSTUDY_ATTENTION_UNROLL
      for (int i = 0; i < 4; ++i) {
        const float* const pr = part + (r_first + 4 * i) * 8;
        const quad a = load_quad(pr), b = load_quad(pr + 4);
        const float tile_max = fmaxf(fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)), fmaxf(fmaxf(b.x, b.y), fmaxf(b.z, b.w)));
        // Key key0 < tokens is in every tile, so m_new is finite; on the first tile m[i] = -inf, alpha = 0.
        const float m_new = fmaxf(m[i], tile_max);
        const float alpha = expf(m[i] - m_new);
        float sum = 0.0f;
        KSTUDY_ATTENTION_UNROLL
        for (int j = 0; j < 4; ++j) {
          const float p = expf(s[i][j] - m_new);  // 0 for the masked keys
          ps[(r_first + 4 * i) * p_pitch + cg + 8 * j] = p;
          sum += p;
        }
        l[i] = l[i] * alpha + sum;  // this thread's keys only: combined with the row's other 7 at the end
        m[i] = m_new;
        KSTUDY_ATTENTION_UNROLL
        for (int c = 0; c < dq; ++c) {
          KSTUDY_ATTENTION_UNROLL
          for (int e = 0; e < 4; ++e) acc[i][c][e] *= alpha;
        }
      }
      team.team_barrier();  // P is complete

      // Unrolled by 4 (of 8): fully unrolled, the hoisted P and V loads spill.
      KSTUDY_ATTENTION_UNROLL_4
      for (int c = 0; c < keys; c += 4) {
        quad pv[4];
        KSTUDY_ATTENTION_UNROLL
        for (int i = 0; i < 4; ++i) pv[i] = load_quad(ps + (r_first + 4 * i) * p_pitch + c);
        KSTUDY_ATTENTION_UNROLL
        for (int cc = 0; cc < 4; ++cc) {
          KSTUDY_ATTENTION_UNROLL
          for (int dd = 0; dd < dq; ++dd) {
            const quad vv = load_quad(vs + (c + cc) * pitch + 32 * dd + 4 * cg);
            KSTUDY_ATTENTION_UNROLL
            for (int i = 0; i < 4; ++i) {
              const float p = cc == 0 ? pv[i].x : cc == 1 ? pv[i].y : cc == 2 ? pv[i].z : pv[i].w;
              acc[i][dd][0] += p * vv.x;
              acc[i][dd][1] += p * vv.y;
              acc[i][dd][2] += p * vv.z;
              acc[i][dd][3] += p * vv.w;
            }
          }
        }
      }
    }

    // Row sums: every thread read the last maxima before the last barrier, so the partials are free.
    KSTUDY_ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i) part[(r_first + 4 * i) * 8 + cg] = l[i];
    team.team_barrier();
    KSTUDY_ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i) {
      const std::int64_t t = row0 + r_first + 4 * i;
      if (t >= tokens) continue;
      const float* const pr = part + (r_first + 4 * i) * 8;
      const quad a = load_quad(pr), b = load_quad(pr + 4);
      const float inv = 1.0f / (((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w)));
      storage* const orow = o.data() + head_base + t * dim;
      KSTUDY_ATTENTION_UNROLL
      for (int dd = 0; dd < dq; ++dd) {
        KSTUDY_ATTENTION_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int d = 32 * dd + 4 * cg + e;
          if (d < dim) store_value(orow[d], acc[i][dd][e] * inv);
        }
      }
    }
  }
};

template <class ExecutionSpace, attention_precision P, attention_mask M>
class attention_kokkos_tiled final : public tiled_attention_variant<ExecutionSpace, P, M, tiled_device_body> {
 public:
  attention_kokkos_tiled() : attention_kokkos_tiled::tiled_attention_variant("attention_kokkos_tiled") {}
};

template <class Space, attention_precision P, attention_mask M>
void register_tiled(const std::string& operation) {
  const bool host = is_host_space_v<Space>;
  auto tiled = variant_info_for(
      P, M, operation + "_kokkos_tiled", "attention_kokkos",
      std::string("Kokkos TeamPolicy, one team per (head, 64 query rows), online softmax: ") +
          (host ? "one thread per team, 64-key K tiles transposed in team scratch, vectorised score rows and "
                  "O += p V"
                : "128 threads, Q block and 32-key K/V tiles in padded team scratch, 4 x 4 register tiles of S "
                  "and 4 x 8 (head_dim <= 64) or 4 x 16 of O per thread, quad scratch reads") +
          storage_note(P) + causal_note(M));
  register_fused_rung<attention_kokkos_tiled<Space, P, M>>(std::move(tiled), 0);  // one kernel, attention_kokkos_tiled
}

template <class Space, attention_precision P, attention_mask M>
void register_operation() {
  // Variant ids are unique per backend across operations, so each carries its operation's name.
  const std::string operation = operation_name(P, M);
  auto info = variant_info_for(
      P, M, operation + "_kokkos_fused", "attention_kokkos",
      std::string("Kokkos TeamPolicy, one team per (head, block of query rows): K and V tiles staged in team "
                  "scratch, online softmax per row (running max and sum, rescaled accumulator); never forms the "
                  "T x T scores") +
          storage_note(P) + causal_note(M));
  register_fused_rung<attention_kokkos_fused<Space, P, M>>(std::move(info), 0);  // one kernel, attention_kokkos_fused
  // The tiled rung's device kernel has no mask: the causal operations get its host path only.
  if constexpr (is_host_space_v<Space> || M == attention_mask::none) register_tiled<Space, P, M>(operation);
}

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  for_each_attention_operation([](auto precision, auto mask) {
    register_operation<space, decltype(precision)::value, decltype(mask)::value>();
  });
});

}  // namespace
}  // namespace kstudy::attention