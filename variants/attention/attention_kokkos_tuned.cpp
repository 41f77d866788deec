// Fused attention in Kokkos, tuned (portable, rung 1 of family attention_kokkos): <operation>_kokkos_tuned
// (attention_kokkos_tuned, attention_bf16_kokkos_tuned, attention_fp16_kokkos_tuned) for every enabled
// execution space; the causal operations' ones on host spaces only (the device kernel has no mask; the host
// path is rung 0's, which honours it).
//
// Device: rung 0's register-tiled kernel (attention_kokkos_tiled in attention_kokkos.cpp) with the K/V tile
// copies taken off the critical path and the scratch accesses made shared-memory accesses.
//
// Why not the CUDA kernel's 64 x 64 tiles: Kokkos 3.4 caps level-0 team scratch at 40 KiB on CUDA (4.6: 48 KiB
// less 8 KiB for team reductions), and a 64-row Q block plus 64-key K and V tiles take 52 KB; a 64 x 64 P
// (18 KB) would need a fourth buffer besides. So the tiles stay 64 query rows x 32 keys, 128 threads, and each
// thread owns a 4 x 4 block of S and a 4 x 8 (DMAX 64) or 4 x 16 (DMAX 128) block of O, as in rung 0.
//
// What changes against rung 0:
//  1. Copies overlap the math. Tile j + 1's K and V are loaded from global memory into registers when tile
//     j's O += P V starts (its scores are dead by then, so the 8 (DMAX 64) or 16 (DMAX 128) quads of staging
//     cost no registers that S needs) and written to scratch after it: the load latency hides behind P V's
//     1,024 FMAs per thread instead of stalling the team, as cp.async does in attention_fused_pipelined, in
//     portable code. Rung 0 loads each tile synchronously between two barriers.
//  2. Shared-memory instructions. Kokkos hands team scratch out as a generic pointer, so rung 0's scratch
//     reads are generic loads (LD, 64-bit addresses: 96 ld.v4 and 1 ld.shared in its DMAX 64 PTX). On CUDA
//     the level-0 pointers are rebased onto a dynamic-shared-memory symbol (Kokkos' level-0 scratch is the
//     launch's dynamic shared memory), so the compiler emits ld.shared / st.shared with 32-bit addresses:
//     shorter latency and half the address registers (rung 0 spills 40-56 bytes; this kernel none).
//  3. float4 stores of O (fp32, head_dim % 4 == 0).
//
// Scratch layout and bank arithmetic (4-byte banks, 32 of them; a float4 access is served 8 lanes per
// wavefront, so 8 distinct float4s of one instruction are conflict-free when they cover 32 distinct banks).
// Thread t: warp w = t / 32, lane = 8 rg + cg; query rows r(i) = 16 w + rg + 4 i (i < 4), keys cg + 8 j
// (j < 4), output columns 32 dd + 4 cg + e (dd < DMAX / 32, e < 4).
//  Q [64][DMAX + 4], K [32][DMAX + 4], V [32][DMAX + 4]: row pitch DMAX + 4 = 4 (mod 32) floats, so row r
//    starts at bank 4 r (mod 32).
//    S loop, Q quad (row r(i), d): a warp reads 4 distinct quads (rg = 0..3) at banks 4 rg + d .. + 3: 16
//    distinct banks, each quad broadcast to the 8 lanes of its rg. K quad (key cg + 8 j, d): 8 distinct
//    quads at banks 4 cg + 32 j + d = 4 cg + d (mod 32): all 32 banks once, broadcast across rg.
//    P V loop, V quad (key c, 32 dd + 4 cg): 8 consecutive quads of one row, 128 contiguous bytes: 32 banks.
//    Tile stores: a warp stores 32 consecutive quads of a tile (rows of DMAX / 4 quads), each 8-lane phase
//    8 consecutive quads of one row: 32 banks per phase.
//    (K stored transposed, key-minor, as rung 0's host path does, would put the 8 keys of a K read in one
//    row: 8 consecutive floats, 8 banks, for a scalar read each -- that layout is the host's, not this one.)
//  P [64][32 + 8] over the K tile: pitch 40 = 8 (mod 32). Stores of p(r(i), cg + 8 j): bank 8 rg + cg + 8 j
//    (mod 32) for rg < 4, cg < 8: 32 distinct banks. Reads, quad (row r(i), c): 4 distinct quads at banks
//    8 rg + c .. + 3: distinct. (A pitch of 32 + 4 would give 4 rg + cg: 2-way conflicts on the stores.)
//  Partials [64][8] (row maxima of the 8 threads of a row, then row sums): store bank 8 rg + cg: distinct;
//    quad reads at 8 rg and 8 rg + 4: distinct.
// Level 0 at DMAX 64: Q 4,352 + P/K 2,560 + V 2,176 + partials 512 floats (+ 16 bytes to realign) = 38.4 KB.
// DMAX 128 keeps K, V, P and the partials (35.9 KB) in level 0 and the Q block in level 1 (global memory
// through L1), as rung 0 does.
// Registers (LaunchBounds): DMAX 64, 4 teams of 128 threads per SM (<= 128 registers); DMAX 128, 2 teams
// (<= 255: 64 accumulators and 16 staged quads). ptxas, sm_90, nvcc 13.0, Kokkos 3.4 and 4.6 alike: 128 and 255
// registers, no spills (the S and P V loops unrolled by 2: by 4 they spill 8-12 bytes at DMAX 64).
// Expected on the H200 at 16 x 16384 x 64: ~31 TFLOP/s, 0.85-0.92x attention_fused_pipelined (rung 0: 0.78x):
// the copy overlap is what took the CUDA kernel from 29.9 to 34.8-35.2; the 32-key tiles keep rung 0's
// 8-quads-per-64-FMA S loop and 4 barriers per 32 keys.
// The online softmax is rung 0's: per tile the row maximum from the 8 partials (one barrier: no portable warp
// shuffle in Kokkos 3.4), m_new = max(m, tile max), alpha = exp(m - m_new) (0 on the first tile),
// p = exp(s - m_new) (0 for keys beyond tokens, masked to -inf), per-thread running sums combined once at the
// end. head_dim <= 64 runs DMAX 64, up to 128 DMAX 128 (zero-padded beyond head_dim); query rows beyond
// tokens are computed on zero Q rows and not stored.
//
// Host: the register-tiled rungs' shared host kernel, rung 0's (kokkos_shared::host_body,
// attention_kokkos_common.hpp): a team is one thread and 64 query rows; the score row is updated along a
// 64-key K tile stored transposed in scratch and O += p V runs along head_dim (contiguous inner loops the
// compiler vectorises). Not tuned.
//
// attention_bf16 reads the 16-bit patterns and widens them to float (bits << 16, exact) on the load; scores,
// softmax and accumulation are float32 and O is rounded to bfloat16 (nearest even) once.
#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "attention/attention.hpp"
#include "attention/attention_kokkos_common.hpp"
#include "kstudy/support/kokkos_support.hpp"

namespace kstudy::attention {
namespace {

using namespace kokkos_shared;  // the helpers, host kernel and variant bases both rungs share

#if defined(__CUDA_ARCH__)  // the device pass only: the host compiler warns on an unknown pragma
#define KSTUDY_ATTENTION_TUNED_UNROLL _Pragma("unroll")
#define KSTUDY_ATTENTION_TUNED_UNROLL_2 _Pragma("unroll 2")
#else
#define KSTUDY_ATTENTION_TUNED_UNROLL
#define KSTUDY_ATTENTION_TUNED_UNROLL_2
#endif

// Four outputs from global memory's row p (aligned to 4 elements when vector): one 16-byte store for float.
[[maybe_unused]] KOKKOS_FORCEINLINE_FUNCTION void store_output_quad(float* p, const quad& v, bool vector) {
  if (vector) {
    store_quad(p, v);
  } else {
    p[0] = v.x;
    p[1] = v.y;
    p[2] = v.z;
    p[3] = v.w;
  }
}
// 16-bit outputs (bfloat16 or fp16 patterns): four rounded scalar stores.
template <class Bits>
KOKKOS_FORCEINLINE_FUNCTION void store_output_quad(Bits* p, const quad& v, bool) {
  store_value(p[0], v.x);
  store_value(p[1], v.y);
  store_value(p[2], v.z);
  store_value(p[3], v.w);
}

// A level-0 scratch pointer the CUDA compiler knows to be in shared memory. Kokkos returns team scratch as a
// generic pointer (generic LD / ST, 64-bit addresses); its level-0 scratch is the launch's dynamic shared
// memory, so the same address formed from a dynamic-shared-memory symbol is one the compiler proves shared
// (ld.shared / st.shared, 32-bit addresses). Identity on every other backend and on the host pass.
[[maybe_unused]] KOKKOS_FORCEINLINE_FUNCTION float* shared_level0(float* p) {
#if defined(__CUDA_ARCH__)
  extern __shared__ float4 kstudy_attention_tuned_dynamic_smem[];
  float* const base = reinterpret_cast<float*>(kstudy_attention_tuned_dynamic_smem);
  return base + (p - base);
#else
  return p;
#endif
}

constexpr int tuned_keys = 32;  // keys per K/V tile on a device

template <int DMAX>
struct tuned_tiles {
  static_assert(DMAX % 32 == 0 && DMAX <= max_device_head_dim, "DMAX: a multiple of 32 up to 128");
  static constexpr int keys = tuned_keys;
  static constexpr int pitch = DMAX + 4;    // Q, K, V rows: 4 (mod 32), see the bank arithmetic above
  static constexpr int p_pitch = keys + 8;  // P rows: 8 (mod 32)
  static constexpr int dq = DMAX / 32;      // quads of O columns per thread
  static constexpr int chunks = DMAX / 4;   // quads per tile row
  static constexpr int staged = keys * chunks / device_threads;  // quads of one K or V tile per thread
  static constexpr int q_floats = tile_rows * pitch;
  static constexpr int kp_floats = keys * pitch > tile_rows* p_pitch ? keys* pitch : tile_rows* p_pitch;
  static constexpr int v_floats = keys * pitch;
  static constexpr int part_floats = tile_rows * 8;  // per row, one partial per thread of the row
  static constexpr int q_level = DMAX <= 64 ? 0 : 1;
  static constexpr int align_floats = 4;  // slack to realign a scratch level to 16 bytes
  // Teams per SM the launch bounds promise: 4 at DMAX 64 (<= 128 registers), 2 at DMAX 128.
  static constexpr int teams_per_sm = DMAX <= 64 ? 4 : 2;
  KOKKOS_INLINE_FUNCTION static constexpr std::size_t level_floats(int level) {
    return level == 0 ? std::size_t((q_level == 0 ? q_floats : 0) + kp_floats + v_floats + part_floats + align_floats)
                      : std::size_t(q_level == 1 ? q_floats + align_floats : 0);
  }
};
static_assert(device_threads == 2 * tile_rows && tuned_keys * tile_rows == 16 * device_threads,
              "the thread mapping: 8 threads per row group of 4 rows, 4 x 4 scores per thread");
static_assert(tuned_keys * 16 % device_threads == 0 && tile_rows * 16 % device_threads == 0,
              "whole quads per thread in the tile copies");

// The device kernel for head_dim <= DMAX.
template <class ExecutionSpace, attention_precision P, int DMAX>
struct tuned_device_body {
  using tiles = tuned_tiles<DMAX>;
  using storage = storage_t<P>;
  using device_type = Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>;
  using array_type = Kokkos::View<storage*, device_type>;
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<device_threads, tiles::teams_per_sm>>;
  using member_type = typename policy_type::member_type;

  array_type q, k, v, o;
  int tokens = 0;  // below 2^30 (prepare): 32-bit row and key indices hold fewer registers
  int dim = 0, blocks_per_head = 1;
  float scale = 1.0f;

  // This thread's quads of a tile: rows r0 + u * rows_per_pass (u < tiles::staged) at column c0 of the tile,
  // the same for every tile, so one 64-bit row pointer per tile and 32-bit offsets address them.
  static constexpr int rows_per_pass = device_threads / tiles::chunks;
  static_assert(device_threads % tiles::chunks == 0, "a pass of the team covers whole tile rows");

  // This thread's quads of rows [row0, row0 + tiles::keys) of a head's tokens x dim matrix src, zero beyond
  // tokens and dim; consecutive threads load consecutive quads of a row (coalesced).
  KOKKOS_FORCEINLINE_FUNCTION void fetch_tile(quad (&staged)[tiles::staged], const storage* src, int row0, int r0,
                                              int c0, bool vector) const {
    const storage* const first = src + std::int64_t(row0 + r0) * dim + c0;
    const int rows_left = tokens - row0 - r0;  // this thread's rows u * rows_per_pass below it exist
    KSTUDY_ATTENTION_TUNED_UNROLL
    for (int u = 0; u < tiles::staged; ++u) {
      quad x = {0.0f, 0.0f, 0.0f, 0.0f};
      if (u * rows_per_pass < rows_left && c0 < dim) {
        const storage* const p = first + u * rows_per_pass * dim;
        if (vector) {
          x = load_input_quad(p);
        } else {
          x.x = load_value(p[0]);
          if (c0 + 1 < dim) x.y = load_value(p[1]);
          if (c0 + 2 < dim) x.z = load_value(p[2]);
          if (c0 + 3 < dim) x.w = load_value(p[3]);
        }
      }
      staged[u] = x;
    }
  }
  KOKKOS_FORCEINLINE_FUNCTION static void store_tile(float* tile, const quad (&staged)[tiles::staged], int r0, int c0) {
    KSTUDY_ATTENTION_TUNED_UNROLL
    for (int u = 0; u < tiles::staged; ++u) store_quad(tile + (r0 + u * rows_per_pass) * tiles::pitch + c0, staged[u]);
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    constexpr int pitch = tiles::pitch, p_pitch = tiles::p_pitch, dq = tiles::dq, keys = tiles::keys;
    const scratch_floats<ExecutionSpace> level0(team.team_scratch(0), tiles::level_floats(0));
    float* const base0 = shared_level0(align16(level0.data()));
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
    const int row0 = (team.league_rank() % blocks_per_head) * tile_rows;
    const std::int64_t head_base = head * tokens * dim;
    const storage* const kg = k.data() + head_base;
    const storage* const vg = v.data() + head_base;
    const bool vector = dim % 4 == 0;  // every row starts 4-element aligned
    const float minus_infinity = -INFINITY;
    const int r0 = rank / tiles::chunks, c0 = (rank % tiles::chunks) * 4;  // this thread's first quad of a tile

    // The Q block (through the same registers as the tiles, two quads in flight per thread), then tile 0.
    {
      const storage* const qg = q.data() + head_base;
      constexpr int q_quads = tile_rows * tiles::chunks;
      KSTUDY_ATTENTION_TUNED_UNROLL_2
      for (int f = rank; f < q_quads; f += device_threads) {
        const int r = f / tiles::chunks, c = (f % tiles::chunks) * 4;
        const int t = row0 + r;
        quad x = {0.0f, 0.0f, 0.0f, 0.0f};
        if (t < tokens && c < dim) {
          const storage* p = qg + std::int64_t(t) * dim + c;
          if (vector) {
            x = load_input_quad(p);
          } else {
            x.x = load_value(p[0]);
            if (c + 1 < dim) x.y = load_value(p[1]);
            if (c + 2 < dim) x.z = load_value(p[2]);
            if (c + 3 < dim) x.w = load_value(p[3]);
          }
        }
        store_quad(qs + r * pitch + c, x);
      }
    }
    {
      quad kst[tiles::staged], vst[tiles::staged];
      fetch_tile(kst, kg, 0, r0, c0, vector);
      fetch_tile(vst, vg, 0, r0, c0, vector);
      store_tile(ks, kst, r0, c0);
      store_tile(vs, vst, r0, c0);
    }

    float acc[4][dq][4];
    float m[4], l[4];
    KSTUDY_ATTENTION_TUNED_UNROLL
    for (int i = 0; i < 4; ++i) {
      m[i] = minus_infinity;
      l[i] = 0.0f;
      KSTUDY_ATTENTION_TUNED_UNROLL
      for (int c = 0; c < dq; ++c) {
        KSTUDY_ATTENTION_TUNED_UNROLL
        for (int e = 0; e < 4; ++e) acc[i][c][e] = 0.0f;
      }
    }
    team.team_barrier();  // Q and tile 0 are in scratch

    for (int key0 = 0; key0 < tokens; key0 += keys) {
      float s[4][4];
      KSTUDY_ATTENTION_TUNED_UNROLL
      for (int i = 0; i < 4; ++i) {
        KSTUDY_ATTENTION_TUNED_UNROLL
        for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
      }
      // S = Q K^T: per 4 of head_dim, 4 Q quads and 4 K quads for 64 FMAs. Unrolled by 2: by 4, the hoisted
      // loads spill at 128 registers (DMAX 64).
      KSTUDY_ATTENTION_TUNED_UNROLL_2
      for (int d = 0; d < DMAX; d += 4) {
        quad qv[4];
        KSTUDY_ATTENTION_TUNED_UNROLL
        for (int i = 0; i < 4; ++i) qv[i] = load_quad(qs + (r_first + 4 * i) * pitch + d);
        KSTUDY_ATTENTION_TUNED_UNROLL
        for (int j = 0; j < 4; ++j) {
          const quad kv = load_quad(ks + (cg + 8 * j) * pitch + d);
          KSTUDY_ATTENTION_TUNED_UNROLL
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
      KSTUDY_ATTENTION_TUNED_UNROLL
      for (int i = 0; i < 4; ++i) {
        float tile_max = minus_infinity;
        KSTUDY_ATTENTION_TUNED_UNROLL
        for (int j = 0; j < 4; ++j) {
          float x = s[i][j] * scale;
          if (edge && key0 + cg + 8 * j >= tokens) x = minus_infinity;
          s[i][j] = x;
          tile_max = fmaxf(tile_max, x);
        }
        part[(r_first + 4 * i) * 8 + cg] = tile_max;
      }
      team.team_barrier();  // the partials are complete and every thread is done reading K: P may replace it

      KSTUDY_ATTENTION_TUNED_UNROLL
      for (int i = 0; i < 4; ++i) {
        const float* const pr = part + (r_first + 4 * i) * 8;
        const quad a = load_quad(pr), b = load_quad(pr + 4);
        const float tile_max = fmaxf(fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)), fmaxf(fmaxf(b.x, b.y), fmaxf(b.z, b.w)));
        // Key key0 < tokens is in every tile, so m_new is finite; on the first tile m[i] = -inf, alpha = 0.
        const float m_new = fmaxf(m[i], tile_max);
        const float alpha = expf(m[i] - m_new);
        float sum = 0.0f;
        KSTUDY_ATTENTION_TUNED_UNROLL
        for (int j = 0; j < 4; ++j) {
          const float p = expf(s[i][j] - m_new);  // 0 for the masked keys
          ps[(r_first + 4 * i) * p_pitch + cg + 8 * j] = p;
          sum += p;
        }
        l[i] = l[i] * alpha + sum;  // this thread's keys only: combined with the row's other 7 at the end
        m[i] = m_new;
        KSTUDY_ATTENTION_TUNED_UNROLL
        for (int c = 0; c < dq; ++c) {
          KSTUDY_ATTENTION_TUNED_UNROLL
          for (int e = 0; e < 4; ++e) acc[i][c][e] *= alpha;
        }
      }
      team.team_barrier();  // P is complete

      // The next tile's K and V, in flight during O += P V (the scores are dead: the staging takes their
      // registers).
      const bool next = key0 + keys < tokens;
      quad kst[tiles::staged], vst[tiles::staged];
      if (next) {
        fetch_tile(kst, kg, key0 + keys, r0, c0, vector);
        fetch_tile(vst, vg, key0 + keys, r0, c0, vector);
      }

      // O += P V: per 4 keys, 4 P quads and 4 DMAX / 32 V quads for 16 DMAX / 8 FMAs. Unrolled by 2 (of 8):
      // by 4, the hoisted P and V loads spill beside the staged tile (DMAX 64, 128 registers).
      KSTUDY_ATTENTION_TUNED_UNROLL_2
      for (int c = 0; c < keys; c += 4) {
        quad pv[4];
        KSTUDY_ATTENTION_TUNED_UNROLL
        for (int i = 0; i < 4; ++i) pv[i] = load_quad(ps + (r_first + 4 * i) * p_pitch + c);
        KSTUDY_ATTENTION_TUNED_UNROLL
        for (int cc = 0; cc < 4; ++cc) {
          KSTUDY_ATTENTION_TUNED_UNROLL
          for (int dd = 0; dd < dq; ++dd) {
            const quad vv = load_quad(vs + (c + cc) * pitch + 32 * dd + 4 * cg);
            KSTUDY_ATTENTION_TUNED_UNROLL
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

      if (next) {             // uniform across the team: key0 and tokens are
        team.team_barrier();  // every thread is done with P (over K) and V
        store_tile(ks, kst, r0, c0);
        store_tile(vs, vst, r0, c0);
        team.team_barrier();  // the next tile is complete
      }
    }

    // Row sums: every thread read the last maxima before the last tile's second barrier, so the partials are
    // free.
    KSTUDY_ATTENTION_TUNED_UNROLL
    for (int i = 0; i < 4; ++i) part[(r_first + 4 * i) * 8 + cg] = l[i];
    team.team_barrier();
    KSTUDY_ATTENTION_TUNED_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int t = row0 + r_first + 4 * i;
      if (t >= tokens) continue;
      const float* const pr = part + (r_first + 4 * i) * 8;
      const quad a = load_quad(pr), b = load_quad(pr + 4);
      const float inv = 1.0f / (((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w)));
      storage* const orow = o.data() + head_base + std::int64_t(t) * dim;
      KSTUDY_ATTENTION_TUNED_UNROLL
      for (int dd = 0; dd < dq; ++dd) {
        const int d = 32 * dd + 4 * cg;
        const quad r = {acc[i][dd][0] * inv, acc[i][dd][1] * inv, acc[i][dd][2] * inv, acc[i][dd][3] * inv};
        if (d + 3 < dim) {
          store_output_quad(orow + d, r, vector);
        } else if (d < dim) {
          store_value(orow[d], r.x);
          if (d + 1 < dim) store_value(orow[d + 1], r.y);
          if (d + 2 < dim) store_value(orow[d + 2], r.z);
        }
      }
    }
  }
};

template <class ExecutionSpace, attention_precision P, attention_mask M>
class attention_kokkos_tuned final : public tiled_attention_variant<ExecutionSpace, P, M, tuned_device_body> {
 public:
  attention_kokkos_tuned() : attention_kokkos_tuned::tiled_attention_variant("attention_kokkos_tuned") {}
};

template <class Space, attention_precision P, attention_mask M>
void register_operation() {
  const bool host = is_host_space_v<Space>;
  // Variant ids are unique per backend across operations, so each carries its operation's name.
  auto info = variant_info_for(
      P, M, std::string(operation_name(P, M)) + "_kokkos_tuned", "attention_kokkos",
      std::string("Kokkos TeamPolicy, one team per (head, 64 query rows), online softmax: ") +
          (host ? "host path not tuned (rung 0's: one thread per team, 64-key K tiles transposed in team "
                  "scratch, vectorised score rows and O += p V)"
                : "rung 0's 128-thread register tiling (4 x 4 S, 4 x 8 or 4 x 16 O per thread, 32-key tiles in "
                  "padded, bank-conflict-free scratch) with the next K/V tile loaded into registers during "
                  "O += P V, scratch rebased to shared-memory instructions on CUDA, float4 O stores") +
          storage_note(P) + causal_note(M));
  register_fused_rung<attention_kokkos_tuned<Space, P, M>>(std::move(info), 1);  // one kernel, attention_kokkos_tuned
}

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  for_each_attention_operation([](auto precision, auto mask) {
    // The device kernel has no mask: the causal operations get the host path only.
    if constexpr (is_host_space_v<space> || decltype(mask)::value == attention_mask::none)
      register_operation<space, decltype(precision)::value, decltype(mask)::value>();
  });
});

}  // namespace
}  // namespace kstudy::attention