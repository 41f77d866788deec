// Attention in plain CUDA (family attention_cuda): O = softmax(scale * Q K^T) V per head, Q, K, V, O heads x
// tokens x head_dim row-major, scale = 1 / sqrt(head_dim); no mask except the causal textbooks.
// docs/lab2_attention_design.md has the design, the register and shared-memory budgets and the predicted
// throughput of each kernel.
//  1 attention_textbook / attention_bf16_textbook / attention_fp16_textbook: the seed's textbook, three steps
//    through device memory.
//    S = scale * Q K^T by one strided-batched cuBLAS GEMM (a batch per head; S is heads x tokens x tokens
//    float32), a row softmax kernel in place (one block per row: max, sum of exp, normalise), O = P V by a
//    second strided-batched GEMM. fp32: cublasSgemmStridedBatched with the default math mode (no TF32).
//    bf16: cublasGemmStridedBatchedEx, bf16 Q, K -> S float32 (CUBLAS_COMPUTE_32F); the softmax writes P as
//    bf16 over the first half of each S row (row pitch 2 * tokens bf16), and P V writes O as bf16 (fp32
//    compute, one rounding). fp16: the same with CUDA_R_16F and fp16 P. Peak device memory grows with tokens^2.
//    attention_causal_textbook / attention_bf16_causal_textbook / attention_fp16_causal_textbook: the same
//    GEMMs over the full tokens^2 (the masked half is computed too), the softmax over keys j <= t of query t
//    and P = 0 beyond.
//  2 attention_fused (fp32, CUDA cores): one block of 128 threads per (head, 64 query rows); K and V tiles
//    of 64 keys staged in shared memory; each thread owns a 4 x 8 block of the score tile and a 4 x 8 block
//    of the output (4 query rows, 8 of 64 head_dim columns), register-tiled FMA over float4 shared-memory
//    reads; online softmax (running max and sum per row, the accumulator rescaled); P goes through shared
//    memory (over the K tile) for P V; O written once.
//  2 attention_bf16_fused (tensor cores): mma.sync.m16n8k16 bf16 -> fp32 (inline PTX), one block of 8 warps
//    per (head, 128 query rows), 16 rows per warp. Q fragments in registers for the whole block; S = Q K^T
//    into fp32 fragments, online softmax on the fragments (a row is shared by the 4 threads of a quad:
//    two shuffles), P re-packed to bf16 A fragments in registers (FlashAttention-2's layout identity), V
//    transposed into shared memory so its B fragments are 32-bit loads (no ldmatrix). attention_fp16_fused:
//    the same kernel instantiated with mma .f16.f16 and fp16 packing (Fp16 = true). At head_dim <= 32 the
//    next K/V tile is prefetched into registers during the current one's math (at 64 the 16 registers it
//    takes would spill under the 128-register cap of two blocks per SM, so the tile is loaded in place).
//  3 attention_fused_pipelined (fp32): rung 2's kernel with 16-byte cp.async copies into three rotating tile
//    buffers, so the K and V copies of tile j + 1 overlap tile j's math (no staging registers).
//  3 attention_bf16_fused_pipelined: cp.async 2-stage K/V ring (one barrier per tile), V row-major and read
//    by ldmatrix.x4.trans (no transposing scalar stores), Q and K fragments by ldmatrix.x4, padded rows.
//    attention_fp16_fused_pipelined: its fp16 instance, as rung 2's.
//  4 attention_bf16_fused_autotuned: rung 3's kernel and a template of it over 4 / 8 warps and a 2 / 3-stage
//    ring, each timed on the prepared problem in prepare(); the fastest runs (tuned_parameters() says which).
// The fused kernels take any head_dim <= 128 (compiled for a maximum of 32, 64 or 128, zero-padded above
// head_dim) and any tokens >= 1 (keys beyond tokens scored -inf, queries beyond tokens not stored).
// Every variant queues on its own non-blocking stream; run() is enqueue_run() and a stream synchronisation.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attention/attention.hpp"
#include "attention/attention_cuda_base.cuh"
#include "kstudy/support/ampere_ptx.hpp"
#include "kstudy/support/cublas_check.hpp"
#include "kstudy/support/cuda_arch.hpp"
#include "kstudy/support/cuda_buffers.hpp"
#include "kstudy/support/cuda_variant.hpp"
#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::attention {
namespace {

using namespace kstudy::ampere;  // cp.async and ldmatrix (kstudy/support/ampere_ptx.hpp)

constexpr float log2_e = 1.4426950408889634f;
constexpr int max_head_dim = 128;  // of the fused kernels
constexpr std::int64_t max_grid = std::int64_t(1) << 30;

// ---------------------------------------------------------------------------------------------------------
// Rung 1's softmax: one block per row of S (float32, in place). P is written as Out (float: over S itself;
// bf16 bits or __half: over the first half of S's row, p_pitch = 2 * cols). Causal: row r is query
// t = r % cols, whose max and sum run over keys c <= t; P is 0 beyond (the P V GEMM still reads it).

constexpr int softmax_threads = 512;

template <bool Max>
__device__ float block_all_reduce(float v, float* slots) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = Max ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  __syncthreads();  // the previous call's readers are done with the slots
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  v = lane < warps ? slots[lane] : (Max ? -INFINITY : 0.0f);
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = Max ? fmaxf(v, other) : v + other;
  }
  return v;
}

__device__ __forceinline__ void store_probability(float* p, std::int64_t i, float value) { p[i] = value; }
__device__ __forceinline__ void store_probability(std::uint16_t* p, std::int64_t i, float value) {
  p[i] = __bfloat16_as_ushort(__float2bfloat16_rn(value));
}
__device__ __forceinline__ void store_probability(__half* p, std::int64_t i, float value) {
  p[i] = __float2half_rn(value);
}

template <class Out, bool Causal = false>
__global__ void __launch_bounds__(softmax_threads)
    textbook_softmax(float* s, Out* p, std::int64_t rows, std::int64_t cols, std::int64_t p_pitch) {
  __shared__ float slots[32];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* sr = s + row * cols;
    Out* pr = p + row * p_pitch;
    const std::int64_t keys = Causal ? row % cols + 1 : cols;  // the keys query row % cols attends
    float m = -INFINITY;
    for (std::int64_t c = threadIdx.x; c < keys; c += blockDim.x) m = fmaxf(m, sr[c]);
    m = block_all_reduce<true>(m, slots);
    float sum = 0.0f;
    for (std::int64_t c = threadIdx.x; c < keys; c += blockDim.x) sum += expf(sr[c] - m);
    sum = block_all_reduce<false>(sum, slots);
    // In place, a chunk of blockDim.x columns at a time: every thread reads its score of the chunk before
    // any thread writes the chunk's probabilities. bf16 P of columns [c0, c0 + B) overlaps the floats
    // [c0 / 2, (c0 + B) / 2), all read already; later chunks are untouched.
    for (std::int64_t c0 = 0; c0 < cols; c0 += blockDim.x) {
      const std::int64_t c = c0 + threadIdx.x;
      const float x = c < cols ? sr[c] : 0.0f;
      __syncthreads();
      if (c < cols) store_probability(pr, c, Causal && c >= keys ? 0.0f : expf(x - m) / sum);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Rung 2, fp32: 128 threads, 64 query rows x 64 keys per tile. Warp w, lane = 8 * rg + cg: query rows
// w * 16 + rg + 4 i (i < 4), key columns cg + 8 j (j < 8) of the score tile, output columns
// 32 q + 4 cg + e (q < DMAX / 32, e < 4). Tiles are row-major in shared memory with a pitch of DMAX + 4
// floats (rows 16-byte aligned; consecutive rows start 4 banks apart, so the float4 reads of 4 or 8
// consecutive rows by a warp are conflict-free and broadcast to the lanes sharing them).

constexpr int f32_rows = 64, f32_keys = 64, f32_threads = 128;

template <int DMAX>
struct f32_tiles {
  static_assert(DMAX % 32 == 0 && DMAX <= max_head_dim, "DMAX: 32, 64, 96 or 128");
  static constexpr int pitch = DMAX + 4;        // Q, K, V tiles
  static constexpr int p_pitch = f32_keys + 4;  // P, over the K tile
  static constexpr int q_floats = f32_rows * pitch;
  static constexpr int kp_floats = f32_keys * (pitch > p_pitch ? pitch : p_pitch);
  static constexpr int v_floats = f32_keys * pitch;
  static constexpr std::size_t smem_bytes = sizeof(float) * std::size_t(q_floats + kp_floats + v_floats);
};

// Rows [row0, row0 + 64) of a tokens x head_dim matrix into a tile of pitch `pitch`: zero beyond tokens
// and beyond head_dim. float4 global loads when head_dim % 4 == 0 (then every row is 16-byte aligned).
template <int DMAX>
__device__ __forceinline__ void load_f32_tile(float* tile, int pitch, const float* __restrict__ src, std::int64_t row0,
                                              std::int64_t tokens, int head_dim, bool vec4) {
  constexpr int chunks = DMAX / 4;
  static_assert(f32_rows * chunks % f32_threads == 0, "whole float4s per thread");
  // Two float4s in flight per thread: unrolled further, the K and V loads would all be hoisted and hold 64
  // registers beside the 72 of the accumulators, scores and softmax state.
#pragma unroll 2
  for (int u = 0; u < f32_rows * chunks / f32_threads; ++u) {
    const int f = threadIdx.x + u * f32_threads;
    const int r = f / chunks, c = (f % chunks) * 4;
    const std::int64_t t = row0 + r;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (t < tokens && c < head_dim) {
      const float* p = src + t * head_dim + c;
      if (vec4) {
        v = *reinterpret_cast<const float4*>(p);
      } else {
        v.x = p[0];
        if (c + 1 < head_dim) v.y = p[1];
        if (c + 2 < head_dim) v.z = p[2];
        if (c + 3 < head_dim) v.w = p[3];
      }
    }
    *reinterpret_cast<float4*>(tile + r * pitch + c) = v;
  }
}

// Blocks per SM: DMAX = 64 takes 51 KiB of shared memory and, capped for three blocks, 168 registers
// (at four blocks' 128 it spilled ~100 bytes); DMAX = 32 fits four at 128; DMAX = 128 two (99 KiB).
template <int DMAX>
__global__ void __launch_bounds__(f32_threads, DMAX <= 32   ? 4
                                               : DMAX <= 64 ? 3
                                                            : 2)
    attention_fused_f32(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                        float* __restrict__ o, std::int64_t tokens, int head_dim, std::int64_t query_tiles,
                        float scale) {
  using tiles = f32_tiles<DMAX>;
  constexpr int pitch = tiles::pitch, p_pitch = tiles::p_pitch, dq = DMAX / 32;
  extern __shared__ float4 f32_smem[];
  float* qs = reinterpret_cast<float*>(f32_smem);
  float* ks = qs + tiles::q_floats;
  float* ps = ks;  // P replaces the K tile once the scores are computed
  float* vs = ks + tiles::kp_floats;

  const std::int64_t head = blockIdx.x / query_tiles;
  const std::int64_t row0 = (blockIdx.x % query_tiles) * f32_rows;
  const std::int64_t base = head * tokens * head_dim;
  const bool vec4 = head_dim % 4 == 0;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rg = lane >> 3, cg = lane & 7;
  const int r_first = warp * 16 + rg;  // this thread's rows: r_first + 4 i

  load_f32_tile<DMAX>(qs, pitch, q + base, row0, tokens, head_dim, vec4);

  float acc[4][dq][4];
  float m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < dq; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][c][e] = 0.0f;
  }

  for (std::int64_t key0 = 0; key0 < tokens; key0 += f32_keys) {
    __syncthreads();  // the previous tile's P V is done with P (over K) and V
    load_f32_tile<DMAX>(ks, pitch, k + base, key0, tokens, head_dim, vec4);
    load_f32_tile<DMAX>(vs, pitch, v + base, key0, tokens, head_dim, vec4);
    __syncthreads();  // (and Q's tile on the first pass)

    // S = Q K^T: per float4 of head_dim, 4 Q float4s and 8 K float4s for 128 FMAs.
    float s[4][8];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) s[i][j] = 0.0f;
#pragma unroll
    for (int d = 0; d < DMAX; d += 4) {
      float4 qv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) qv[i] = *reinterpret_cast<const float4*>(qs + (r_first + 4 * i) * pitch + d);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float4 kv = *reinterpret_cast<const float4*>(ks + (cg + 8 * j) * pitch + d);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          s[i][j] = fmaf(qv[i].x, kv.x, s[i][j]);
          s[i][j] = fmaf(qv[i].y, kv.y, s[i][j]);
          s[i][j] = fmaf(qv[i].z, kv.z, s[i][j]);
          s[i][j] = fmaf(qv[i].w, kv.w, s[i][j]);
        }
      }
    }

    // Online softmax: the row's 64 scores of this tile live in the 8 lanes sharing rg (xor 1, 2, 4).
    const bool edge = key0 + f32_keys > tokens;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float x = s[i][j] * scale;
        if (edge && key0 + cg + 8 * j >= tokens) x = -INFINITY;
        s[i][j] = x;
        tile_max = fmaxf(tile_max, x);
      }
#pragma unroll
      for (int offset = 1; offset < 8; offset *= 2)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
      // Key key0 < tokens is in every tile, so m_new is finite; on the first tile m[i] = -inf, alpha = 0.
      const float m_new = fmaxf(m[i], tile_max);
      const float alpha = expf(m[i] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        s[i][j] = expf(s[i][j] - m_new);  // 0 for the masked keys
        sum += s[i][j];
      }
#pragma unroll
      for (int offset = 1; offset < 8; offset *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      l[i] = l[i] * alpha + sum;
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < dq; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][c][e] *= alpha;
    }

    __syncthreads();  // every warp is done reading K before P overwrites it
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) ps[(r_first + 4 * i) * p_pitch + cg + 8 * j] = s[i][j];
    __syncthreads();

    // O += P V: per 4 keys, 4 P float4s and 4 * dq V float4s for 16 * 4 * dq FMAs.
#pragma unroll 4
    for (int c = 0; c < f32_keys; c += 4) {
      float4 pv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) pv[i] = *reinterpret_cast<const float4*>(ps + (r_first + 4 * i) * p_pitch + c);
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) {
#pragma unroll
        for (int dd = 0; dd < dq; ++dd) {
          const float4 vv = *reinterpret_cast<const float4*>(vs + (c + cc) * pitch + 32 * dd + 4 * cg);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float p = cc == 0 ? pv[i].x : cc == 1 ? pv[i].y : cc == 2 ? pv[i].z : pv[i].w;
            acc[i][dd][0] = fmaf(p, vv.x, acc[i][dd][0]);
            acc[i][dd][1] = fmaf(p, vv.y, acc[i][dd][1]);
            acc[i][dd][2] = fmaf(p, vv.z, acc[i][dd][2]);
            acc[i][dd][3] = fmaf(p, vv.w, acc[i][dd][3]);
          }
        }
      }
    }
  }

  // O = acc / l for the rows below tokens and the columns below head_dim.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const std::int64_t t = row0 + r_first + 4 * i;
    if (t >= tokens) continue;
    const float inv = 1.0f / l[i];
    float* orow = o + base + t * head_dim;
#pragma unroll
    for (int dd = 0; dd < dq; ++dd) {
      const int d = 32 * dd + 4 * cg;
      if (d >= head_dim) continue;
      const float4 r = make_float4(acc[i][dd][0] * inv, acc[i][dd][1] * inv, acc[i][dd][2] * inv, acc[i][dd][3] * inv);
      if (vec4) {
        *reinterpret_cast<float4*>(orow + d) = r;
      } else {
        orow[d] = r.x;
        if (d + 1 < head_dim) orow[d + 1] = r.y;
        if (d + 2 < head_dim) orow[d + 2] = r.z;
        if (d + 3 < head_dim) orow[d + 3] = r.w;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Rung 2, bf16 on tensor cores: 8 warps, 128 query rows (16 per warp) x 64 keys per tile. mma.m16n8k16
// fragments (g = lane / 4, t = lane % 4): A 16 x 16 row-major {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..),
// (g+8, 2t+8..)}; B 16 x 8 "col" {(k = 2t..2t+1, n = g), (k = 2t+8.., n = g)}; C 16 x 8 fp32
// {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}. Shared memory (bf16 bits): K tile [64][DMAX + 8] (key
// major, so B fragments of K^T are 32-bit loads of consecutive head_dim pairs), V transposed [DMAX][64 + 8]
// (head_dim major, so B fragments of V are 32-bit loads of consecutive key pairs). Both pitches put the 8
// rows g of a fragment load 4 banks apart: conflict-free. Q is staged through the same memory once.

constexpr int bf16_rows = 128, bf16_keys = 64, bf16_threads = 256;

template <int DMAX>
struct bf16_tiles {
  static_assert(DMAX % 32 == 0 && DMAX <= max_head_dim, "DMAX: 32, 64, 96 or 128");
  static constexpr int k_pitch = DMAX + 8;       // K tile and Q staging, bf16 elements
  static constexpr int v_pitch = bf16_keys + 8;  // transposed V tile
  static constexpr int k_elems = bf16_keys * k_pitch;
  static constexpr int v_elems = DMAX * v_pitch;
  static constexpr int q_elems = bf16_rows * k_pitch;
  static constexpr int elems = q_elems > k_elems + v_elems ? q_elems : k_elems + v_elems;
  static constexpr std::size_t smem_bytes = sizeof(std::uint16_t) * std::size_t(elems);
  static constexpr int chunks = DMAX / 8;                          // uint4 per tile row
  static constexpr int loads = bf16_keys * chunks / bf16_threads;  // per thread per K or V tile
  static_assert(bf16_keys * chunks % bf16_threads == 0, "whole chunks per thread");
};

// Eight bf16 of row t of a tokens x head_dim matrix from column c: zero beyond tokens and head_dim. A
// 16-byte load when head_dim % 8 == 0 (rows then 16-byte aligned).
__device__ __forceinline__ uint4 load_bf16_chunk(const std::uint16_t* __restrict__ src, std::int64_t t, int c,
                                                 std::int64_t tokens, int head_dim, bool vec8) {
  uint4 r = make_uint4(0u, 0u, 0u, 0u);
  if (t >= tokens || c >= head_dim) return r;
  const std::uint16_t* p = src + t * head_dim + c;
  if (vec8) return *reinterpret_cast<const uint4*>(p);
  std::uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (c + e < head_dim) w[e / 2] |= std::uint32_t(p[e]) << (16 * (e % 2));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ std::uint16_t half_of(const uint4& v, int e) {
  const std::uint32_t w = e < 2 ? v.x : e < 4 ? v.y : e < 6 ? v.z : v.w;
  return static_cast<std::uint16_t>(w >> (16 * (e % 2)));
}

__device__ __forceinline__ std::uint32_t load_u32(const std::uint16_t* p) {
  return *reinterpret_cast<const std::uint32_t*>(p);
}

// Two floats as a bf16 pair, lo in the low half (the lower column of an A fragment register).
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  std::uint32_t bits;
  memcpy(&bits, &pair, sizeof(bits));
  return bits;
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  KSTUDY_UNREACHABLE_ON_THIS_TARGET();
#endif
}

// The fp16 twins: the same fragment layouts, f16 operands (rungs 2 and 3 with Fp16 = true).
__device__ __forceinline__ std::uint32_t pack_fp16(float lo, float hi) {
  const __half2 pair = __floats2half2_rn(lo, hi);
  std::uint32_t bits;
  memcpy(&bits, &pair, sizeof(bits));
  return bits;
}
__device__ __forceinline__ void mma_fp16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  KSTUDY_UNREACHABLE_ON_THIS_TARGET();
#endif
}

// The 16-bit format of a kernel instance: bf16, or fp16 when Fp16.
template <bool Fp16>
__device__ __forceinline__ std::uint32_t pack16(float lo, float hi) {
  if constexpr (Fp16)
    return pack_fp16(lo, hi);
  else
    return pack_bf16(lo, hi);
}
template <bool Fp16>
__device__ __forceinline__ void mma16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  if constexpr (Fp16)
    mma_fp16(c, a, b0, b1);
  else
    mma_bf16(c, a, b0, b1);
}
template <bool Fp16>
__device__ __forceinline__ std::uint16_t round16(float x) {
  if constexpr (Fp16)
    return __half_as_ushort(__float2half_rn(x));
  else
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// Two blocks (16 warps) per SM: at most 128 registers per thread for DMAX <= 64; DMAX = 128 takes what it
// needs (the generic path). Only DMAX = 32 has the registers to prefetch the next K/V tile.
// Fp16: the same kernel on fp16 Q, K, V, P and O (attention_fp16_fused).
template <int DMAX, bool Fp16 = false>
__global__ void __launch_bounds__(bf16_threads, DMAX <= 64 ? 2 : 1)
    attention_fused_bf16(const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                         const std::uint16_t* __restrict__ v, std::uint16_t* __restrict__ o, std::int64_t tokens,
                         int head_dim, std::int64_t query_tiles, float scale_log2) {
  using tiles = bf16_tiles<DMAX>;
  constexpr int k_pitch = tiles::k_pitch, v_pitch = tiles::v_pitch, chunks = tiles::chunks;
  constexpr int kt_steps = DMAX / 16, key_tiles8 = bf16_keys / 8, d_tiles8 = DMAX / 8;
  extern __shared__ uint4 bf16_smem[];
  std::uint16_t* ks = reinterpret_cast<std::uint16_t*>(bf16_smem);
  std::uint16_t* vt = ks + tiles::k_elems;
  std::uint16_t* qs = ks;  // Q's staging, before the first K tile

  const std::int64_t head = blockIdx.x / query_tiles;
  const std::int64_t row0 = (blockIdx.x % query_tiles) * bf16_rows;
  const std::int64_t base = head * tokens * head_dim;
  const bool vec8 = head_dim % 8 == 0;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;

  // Q: staged row-major, then this warp's 16 rows as A fragments for the whole kernel.
  static_assert(bf16_rows * chunks % bf16_threads == 0, "whole chunks per thread");
#pragma unroll
  for (int u = 0; u < bf16_rows * chunks / bf16_threads; ++u) {
    const int f = threadIdx.x + u * bf16_threads;
    const int r = f / chunks, c = (f % chunks) * 8;
    *reinterpret_cast<uint4*>(qs + r * k_pitch + c) = load_bf16_chunk(q + base, row0 + r, c, tokens, head_dim, vec8);
  }
  __syncthreads();
  std::uint32_t qa[kt_steps][4];
  {
    const std::uint16_t* q0 = qs + (warp * 16 + g) * k_pitch + 2 * t4;
#pragma unroll
    for (int kt = 0; kt < kt_steps; ++kt) {
      qa[kt][0] = load_u32(q0 + kt * 16);
      qa[kt][1] = load_u32(q0 + 8 * k_pitch + kt * 16);
      qa[kt][2] = load_u32(q0 + kt * 16 + 8);
      qa[kt][3] = load_u32(q0 + 8 * k_pitch + kt * 16 + 8);
    }
  }

  float acc[d_tiles8][4];
#pragma unroll
  for (int n = 0; n < d_tiles8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8 of the warp's 16

  // The K and V chunks of this thread: K chunk f is (key f / chunks, column f % chunks); V chunk f is
  // (key f % 64, column f / 64), so a warp's transposed stores go to consecutive keys.
  uint4 k_next[tiles::loads], v_next[tiles::loads];
  auto prefetch = [&](std::int64_t key0) {
#pragma unroll
    for (int u = 0; u < tiles::loads; ++u) {
      const int f = threadIdx.x + u * bf16_threads;
      k_next[u] = load_bf16_chunk(k + base, key0 + f / chunks, (f % chunks) * 8, tokens, head_dim, vec8);
      v_next[u] = load_bf16_chunk(v + base, key0 + f % bf16_keys, (f / bf16_keys) * 8, tokens, head_dim, vec8);
    }
  };
  constexpr bool prefetching = DMAX <= 32;
  if (prefetching) prefetch(0);

  for (std::int64_t key0 = 0; key0 < tokens; key0 += bf16_keys) {
    if (!prefetching) prefetch(key0);
    __syncthreads();  // the previous tile (or Q's staging) is done with the shared memory
#pragma unroll
    for (int u = 0; u < tiles::loads; ++u) {
      const int f = threadIdx.x + u * bf16_threads;
      *reinterpret_cast<uint4*>(ks + (f / chunks) * k_pitch + (f % chunks) * 8) = k_next[u];
      const int key = f % bf16_keys, c = (f / bf16_keys) * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e) vt[(c + e) * v_pitch + key] = half_of(v_next[u], e);
    }
    __syncthreads();
    if (prefetching && key0 + bf16_keys < tokens) prefetch(key0 + bf16_keys);  // in flight during the math

    // S = Q K^T: 8 key n-tiles x DMAX / 16 k-steps.
    float s[key_tiles8][4];
#pragma unroll
    for (int n = 0; n < key_tiles8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
      const std::uint16_t* k0 = ks + (n * 8 + g) * k_pitch + 2 * t4;
#pragma unroll
      for (int kt = 0; kt < kt_steps; ++kt)
        mma16<Fp16>(s[n], qa[kt], load_u32(k0 + kt * 16), load_u32(k0 + kt * 16 + 8));
    }

    // Online softmax in the log2 domain; row g holds s[.][0..1], row g + 8 s[.][2..3]; a row's 64 scores
    // are spread over the quad (xor 1, 2).
    const bool edge = key0 + bf16_keys > tokens;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < key_tiles8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float x = s[n][2 * h + e] * scale_log2;
          if (edge && key0 + n * 8 + 2 * t4 + e >= tokens) x = -INFINITY;
          s[n][2 * h + e] = x;
          tile_max = fmaxf(tile_max, x);
        }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float m_new = fmaxf(m[h], tile_max);  // finite: key key0 < tokens is in every tile
      const float alpha = exp2f(m[h] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < key_tiles8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = exp2f(s[n][2 * h + e] - m_new);
          s[n][2 * h + e] = p;
          sum += p;
        }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      l[h] = l[h] * alpha + sum;
      m[h] = m_new;
#pragma unroll
      for (int n = 0; n < d_tiles8; ++n) {
        acc[n][2 * h] *= alpha;
        acc[n][2 * h + 1] *= alpha;
      }
    }

    // O += P V: the C fragments of key n-tiles 2 kk and 2 kk + 1 are the A fragment of key k-step kk.
#pragma unroll
    for (int kk = 0; kk < bf16_keys / 16; ++kk) {
      const std::uint32_t pa[4] = {pack16<Fp16>(s[2 * kk][0], s[2 * kk][1]), pack16<Fp16>(s[2 * kk][2], s[2 * kk][3]),
                                   pack16<Fp16>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack16<Fp16>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int n = 0; n < d_tiles8; ++n) {
        const std::uint16_t* v0 = vt + (n * 8 + g) * v_pitch + kk * 16 + 2 * t4;
        mma16<Fp16>(acc[n], pa, load_u32(v0), load_u32(v0 + 8));
      }
    }
  }

  // O = acc / l, rounded to bf16 once; rows below tokens, columns below head_dim.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const std::int64_t t = row0 + warp * 16 + g + 8 * h;
    if (t >= tokens) continue;
    const float inv = 1.0f / l[h];
    std::uint16_t* orow = o + base + t * head_dim;
#pragma unroll
    for (int n = 0; n < d_tiles8; ++n) {
      const int d = n * 8 + 2 * t4;
      if (d >= head_dim) continue;
      const float lo = acc[n][2 * h] * inv, hi = acc[n][2 * h + 1] * inv;
      if (head_dim % 2 == 0) {  // d even, so the pair is 4-byte aligned and inside the row
        *reinterpret_cast<std::uint32_t*>(orow + d) = pack16<Fp16>(lo, hi);
      } else {
        orow[d] = round16<Fp16>(lo);
        if (d + 1 < head_dim) orow[d + 1] = round16<Fp16>(hi);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Rung 3: copy pipelines. cp.async (sm_80+) copies 16 bytes global -> shared without staging registers;
// src_bytes 0 zero-fills the destination (rows beyond tokens, columns beyond head_dim). The aligned paths
// need head_dim % (16 bytes / element) == 0 and 16-byte aligned base pointers; otherwise the tiles are
// filled by the guarded scalar loads of rung 2 (synchronous, same slots, same barriers).

// Q, K, V (and O, stored by float4 in the fp32 kernel) 16-byte aligned.
__device__ __forceinline__ bool aligned16(const void* a, const void* b, const void* c, const void* d) {
  return ((reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b) |
           reinterpret_cast<std::uintptr_t>(c) | reinterpret_cast<std::uintptr_t>(d)) &
          15u) == 0;
}

// Rung 3, fp32: rung 2's thread mapping and register tiles, with the tile copies taken off the critical
// path. Three tile buffers rotate (Q stays in its own): during tile j, K_j is in buffer kb, V_j in vb; K_{j+1}
// is copied into the free buffer fb while S_j, the softmax and P V run, and V_{j+1} into kb (P_j's buffer)
// once P V is done, in flight while S_{j+1} and its softmax run. Two commit groups per tile, waited in order.

template <int DMAX>
struct f32_pipe_tiles {
  using base = f32_tiles<DMAX>;
  static constexpr int buf_floats = base::kp_floats;  // a K, V or P tile
  static constexpr std::size_t smem_bytes = sizeof(float) * std::size_t(base::q_floats + 3 * buf_floats);
};

template <int DMAX>
__device__ __forceinline__ void load_f32_tile_async(float* tile, int pitch, const float* __restrict__ src,
                                                    std::int64_t row0, std::int64_t tokens, int head_dim, bool vec4) {
  constexpr int chunks = DMAX / 4, per_thread = f32_rows * chunks / f32_threads;
  if (vec4) {
#pragma unroll 2
    for (int u = 0; u < per_thread; ++u) {
      const int f = threadIdx.x + u * f32_threads;
      const int r = f / chunks, c = (f % chunks) * 4;
      const std::int64_t t = row0 + r;
      const bool inside = t < tokens && c < head_dim;
      cp_async_16(tile + r * pitch + c, inside ? src + t * head_dim + c : src, inside ? 16 : 0);
    }
  } else {
    load_f32_tile<DMAX>(tile, pitch, src, row0, tokens, head_dim, false);
  }
}

// Shared memory (DMAX = 64): Q + 3 buffers of 64 x 68 floats = 68 KiB, three blocks per SM as rung 2.
template <int DMAX>
__global__ void __launch_bounds__(f32_threads, DMAX <= 64 ? 3 : 1)
    attention_pipelined_f32(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                            float* __restrict__ o, std::int64_t tokens, int head_dim, std::int64_t query_tiles,
                            float scale) {
  using tiles = f32_pipe_tiles<DMAX>;
  constexpr int pitch = f32_tiles<DMAX>::pitch, p_pitch = f32_tiles<DMAX>::p_pitch, dq = DMAX / 32;
  extern __shared__ float4 f32_pipe_smem[];
  float* qs = reinterpret_cast<float*>(f32_pipe_smem);
  float* bufs = qs + f32_tiles<DMAX>::q_floats;

  const std::int64_t head = blockIdx.x / query_tiles;
  const std::int64_t row0 = (blockIdx.x % query_tiles) * f32_rows;
  const std::int64_t base = head * tokens * head_dim;
  const bool vec4 = head_dim % 4 == 0 && aligned16(q, k, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rg = lane >> 3, cg = lane & 7;
  const int r_first = warp * 16 + rg;

  int kb = 0, vb = 1, fb = 2;  // buffer of K_j (then P_j), of V_j, free
  load_f32_tile_async<DMAX>(qs, pitch, q + base, row0, tokens, head_dim, vec4);
  load_f32_tile_async<DMAX>(bufs + kb * tiles::buf_floats, pitch, k + base, 0, tokens, head_dim, vec4);
  cp_async_commit();
  load_f32_tile_async<DMAX>(bufs + vb * tiles::buf_floats, pitch, v + base, 0, tokens, head_dim, vec4);
  cp_async_commit();
  cp_async_wait<1>();  // Q and K_0
  __syncthreads();

  float acc[4][dq][4];
  float m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < dq; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][c][e] = 0.0f;
  }

  for (std::int64_t key0 = 0; key0 < tokens; key0 += f32_keys) {
    const bool has_next = key0 + f32_keys < tokens;
    if (has_next)
      load_f32_tile_async<DMAX>(bufs + fb * tiles::buf_floats, pitch, k + base, key0 + f32_keys, tokens, head_dim,
                                vec4);
    cp_async_commit();  // possibly empty: keeps two groups per tile for the waits below
    const float* ks = bufs + kb * tiles::buf_floats;
    float* ps = bufs + kb * tiles::buf_floats;
    const float* vs = bufs + vb * tiles::buf_floats;

    float s[4][8];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) s[i][j] = 0.0f;
#pragma unroll
    for (int d = 0; d < DMAX; d += 4) {
      float4 qv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) qv[i] = *reinterpret_cast<const float4*>(qs + (r_first + 4 * i) * pitch + d);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float4 kv = *reinterpret_cast<const float4*>(ks + (cg + 8 * j) * pitch + d);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          s[i][j] = fmaf(qv[i].x, kv.x, s[i][j]);
          s[i][j] = fmaf(qv[i].y, kv.y, s[i][j]);
          s[i][j] = fmaf(qv[i].z, kv.z, s[i][j]);
          s[i][j] = fmaf(qv[i].w, kv.w, s[i][j]);
        }
      }
    }

    const bool edge = key0 + f32_keys > tokens;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float x = s[i][j] * scale;
        if (edge && key0 + cg + 8 * j >= tokens) x = -INFINITY;
        s[i][j] = x;
        tile_max = fmaxf(tile_max, x);
      }
#pragma unroll
      for (int offset = 1; offset < 8; offset *= 2)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
      const float m_new = fmaxf(m[i], tile_max);  // finite: key key0 < tokens is in every tile
      const float alpha = expf(m[i] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        s[i][j] = expf(s[i][j] - m_new);
        sum += s[i][j];
      }
#pragma unroll
      for (int offset = 1; offset < 8; offset *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      l[i] = l[i] * alpha + sum;
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < dq; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][c][e] *= alpha;
    }

    __syncthreads();  // every warp is done reading K_j before P_j overwrites it
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) ps[(r_first + 4 * i) * p_pitch + cg + 8 * j] = s[i][j];
    cp_async_wait<1>();  // V_j (K_{j+1}, the newer group, may still be in flight)
    __syncthreads();     // P_j and V_j visible

#pragma unroll 4
    for (int c = 0; c < f32_keys; c += 4) {
      float4 pv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) pv[i] = *reinterpret_cast<const float4*>(ps + (r_first + 4 * i) * p_pitch + c);
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) {
#pragma unroll
        for (int dd = 0; dd < dq; ++dd) {
          const float4 vv = *reinterpret_cast<const float4*>(vs + (c + cc) * pitch + 32 * dd + 4 * cg);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float p = cc == 0 ? pv[i].x : cc == 1 ? pv[i].y : cc == 2 ? pv[i].z : pv[i].w;
            acc[i][dd][0] = fmaf(p, vv.x, acc[i][dd][0]);
            acc[i][dd][1] = fmaf(p, vv.y, acc[i][dd][1]);
            acc[i][dd][2] = fmaf(p, vv.z, acc[i][dd][2]);
            acc[i][dd][3] = fmaf(p, vv.w, acc[i][dd][3]);
          }
        }
      }
    }

    cp_async_wait<0>();  // K_{j+1}
    __syncthreads();     // K_{j+1} visible; every warp is done with P_j and V_j
    if (has_next)
      load_f32_tile_async<DMAX>(bufs + kb * tiles::buf_floats, pitch, v + base, key0 + f32_keys, tokens, head_dim,
                                vec4);
    cp_async_commit();
    const int next_k = fb;
    fb = vb;
    vb = kb;
    kb = next_k;
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const std::int64_t t = row0 + r_first + 4 * i;
    if (t >= tokens) continue;
    const float inv = 1.0f / l[i];
    float* orow = o + base + t * head_dim;
#pragma unroll
    for (int dd = 0; dd < dq; ++dd) {
      const int d = 32 * dd + 4 * cg;
      if (d >= head_dim) continue;
      const float4 r = make_float4(acc[i][dd][0] * inv, acc[i][dd][1] * inv, acc[i][dd][2] * inv, acc[i][dd][3] * inv);
      if (vec4) {
        *reinterpret_cast<float4*>(orow + d) = r;
      } else {
        orow[d] = r.x;
        if (d + 1 < head_dim) orow[d + 1] = r.y;
        if (d + 2 < head_dim) orow[d + 2] = r.z;
        if (d + 3 < head_dim) orow[d + 3] = r.w;
      }
    }
  }
}

// Rung 3, bf16: 8 warps x 16 query rows = 128 rows per block (as rung 2: K and V cross L2 once per 128 query
// rows, ~2 TB/s at 250 TFLOP/s at 16 x 16,384 x 64; 64-row blocks would double it). Q, and K and V tiles of 64
// keys in a 2-stage ring, all row-major in shared memory with a pitch of DMAX + 8 bf16: the 8 row addresses
// of an 8 x 8 ldmatrix matrix are 16 B x (pitch / 8) apart, i.e. in 8 different 16-byte bank groups (pitch
// 144 B at DMAX = 64, 80 B at 32, 272 B at 128): conflict-free. Fragments: Q's A by ldmatrix.x4, K's B (of
// K^T: a key row is a B column) by ldmatrix.x4 covering two k-steps, V's B by ldmatrix.x4.trans covering
// two head_dim n-tiles (the transposing load gives each thread the consecutive key pair of one head_dim
// column). One barrier per tile: it publishes tile j and retires tile j - 1's stage, into which tile j + 1 is
// then copied during tile j's math.

constexpr int bf16p_warps = 8, bf16p_threads = 32 * bf16p_warps, bf16p_rows = 16 * bf16p_warps, bf16p_keys = 64;

template <int DMAX>
struct bf16_pipe_tiles {
  static_assert(DMAX % 32 == 0 && DMAX <= max_head_dim, "DMAX: 32, 64, 96 or 128");
  static constexpr int pitch = DMAX + 8;
  static constexpr int q_elems = bf16p_rows * pitch;
  static constexpr int tile_elems = bf16p_keys * pitch;
  static constexpr std::size_t smem_bytes = sizeof(std::uint16_t) * std::size_t(q_elems + 4 * tile_elems);
};

template <int DMAX, int Rows>
__device__ __forceinline__ void load_bf16_tile_async(std::uint16_t* tile, const std::uint16_t* __restrict__ src,
                                                     std::int64_t row0, std::int64_t tokens, int head_dim, bool vec8) {
  constexpr int chunks = DMAX / 8, pitch = bf16_pipe_tiles<DMAX>::pitch;
  static_assert(Rows * chunks % bf16p_threads == 0, "whole chunks per thread");
#pragma unroll
  for (int u = 0; u < Rows * chunks / bf16p_threads; ++u) {
    const int f = threadIdx.x + u * bf16p_threads;
    const int r = f / chunks, c = (f % chunks) * 8;
    const std::int64_t t = row0 + r;
    std::uint16_t* dst = tile + r * pitch + c;
    if (vec8) {
      const bool inside = t < tokens && c < head_dim;
      cp_async_16(dst, inside ? src + t * head_dim + c : src, inside ? 16 : 0);
    } else {
      *reinterpret_cast<uint4*>(dst) = load_bf16_chunk(src, t, c, tokens, head_dim, false);
    }
  }
}

// Two blocks (16 warps) per SM at <= 128 registers for DMAX <= 64 (54 KiB of shared memory each at 64).
// Fp16: the same kernel on fp16 Q, K, V, P and O (attention_fp16_fused_pipelined).
template <int DMAX, bool Fp16 = false>
__global__ void __launch_bounds__(bf16p_threads, DMAX <= 64 ? 2 : 1)
    attention_pipelined_bf16(const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                             const std::uint16_t* __restrict__ v, std::uint16_t* __restrict__ o, std::int64_t tokens,
                             int head_dim, std::int64_t query_tiles, float scale_log2) {
  using tiles = bf16_pipe_tiles<DMAX>;
  constexpr int pitch = tiles::pitch, kt_steps = DMAX / 16, key_tiles8 = bf16p_keys / 8, d_tiles8 = DMAX / 8;
  static_assert(kt_steps % 2 == 0 && d_tiles8 % 2 == 0, "ldmatrix.x4 covers two k-steps / two n-tiles");
  extern __shared__ uint4 bf16_pipe_smem[];
  std::uint16_t* qs = reinterpret_cast<std::uint16_t*>(bf16_pipe_smem);
  std::uint16_t* ring = qs + tiles::q_elems;  // stage s: K at ring + 2 s tile_elems, V after it

  const std::int64_t head = blockIdx.x / query_tiles;
  const std::int64_t row0 = (blockIdx.x % query_tiles) * bf16p_rows;
  const std::int64_t base = head * tokens * head_dim;
  const bool vec8 = head_dim % 8 == 0 && aligned16(q, k, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;

  load_bf16_tile_async<DMAX, bf16p_rows>(qs, q + base, row0, tokens, head_dim, vec8);
  load_bf16_tile_async<DMAX, bf16p_keys>(ring, k + base, 0, tokens, head_dim, vec8);
  load_bf16_tile_async<DMAX, bf16p_keys>(ring + tiles::tile_elems, v + base, 0, tokens, head_dim, vec8);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // Q's A fragments: lanes 0-15 address rows 0-15 at column 16 kt, lanes 16-31 the same rows at 16 kt + 8
  // (matrices 0..3 = a0..a3).
  std::uint32_t qa[kt_steps][4];
  {
    const std::uint16_t* q0 = qs + (warp * 16 + (lane & 15)) * pitch + (lane >> 4) * 8;
#pragma unroll
    for (int kt = 0; kt < kt_steps; ++kt) ldmatrix_x4(qa[kt], q0 + kt * 16);
  }
  // Per-lane offsets: K (non-transposed) matrices i = lane / 8 are head_dim columns 8 i of keys lane % 8; V
  // (transposed) matrices are keys (lane / 8 % 2) 8 + lane % 8 at head_dim columns 8 (lane / 16).
  const int k_lane = (lane & 7) * pitch + (lane >> 3) * 8;
  const int v_lane = ((lane & 7) + ((lane >> 3) & 1) * 8) * pitch + (lane >> 4) * 8;

  float acc[d_tiles8][4];
#pragma unroll
  for (int n = 0; n < d_tiles8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  int stage = 0;
  for (std::int64_t key0 = 0; key0 < tokens; key0 += bf16p_keys) {
    if (key0 > 0) {
      cp_async_wait<0>();  // this thread's copies of tile j
      __syncthreads();     // everyone's; and every warp is done with tile j - 1's stage
    }
    if (key0 + bf16p_keys < tokens) {
      std::uint16_t* next = ring + (stage ^ 1) * 2 * tiles::tile_elems;
      load_bf16_tile_async<DMAX, bf16p_keys>(next, k + base, key0 + bf16p_keys, tokens, head_dim, vec8);
      load_bf16_tile_async<DMAX, bf16p_keys>(next + tiles::tile_elems, v + base, key0 + bf16p_keys, tokens, head_dim,
                                             vec8);
      cp_async_commit();
    }
    const std::uint16_t* ks = ring + stage * 2 * tiles::tile_elems;
    const std::uint16_t* vs = ks + tiles::tile_elems;

    // S = Q K^T: per key n-tile, one ldmatrix.x4 = the B fragments of k-steps 2 kp and 2 kp + 1.
    float s[key_tiles8][4];
#pragma unroll
    for (int n = 0; n < key_tiles8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
      for (int kp = 0; kp < kt_steps / 2; ++kp) {
        std::uint32_t b[4];
        ldmatrix_x4(b, ks + n * 8 * pitch + kp * 32 + k_lane);
        mma16<Fp16>(s[n], qa[2 * kp], b[0], b[1]);
        mma16<Fp16>(s[n], qa[2 * kp + 1], b[2], b[3]);
      }
    }

    const bool edge = key0 + bf16p_keys > tokens;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < key_tiles8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float x = s[n][2 * h + e] * scale_log2;
          if (edge && key0 + n * 8 + 2 * t4 + e >= tokens) x = -INFINITY;
          s[n][2 * h + e] = x;
          tile_max = fmaxf(tile_max, x);
        }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float m_new = fmaxf(m[h], tile_max);  // finite: key key0 < tokens is in every tile
      const float alpha = exp2f(m[h] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < key_tiles8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = exp2f(s[n][2 * h + e] - m_new);
          s[n][2 * h + e] = p;
          sum += p;
        }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      l[h] = l[h] * alpha + sum;
      m[h] = m_new;
#pragma unroll
      for (int n = 0; n < d_tiles8; ++n) {
        acc[n][2 * h] *= alpha;
        acc[n][2 * h + 1] *= alpha;
      }
    }

    // O += P V: P's A fragments from the S fragments (rung 2); per pair of head_dim n-tiles one
    // ldmatrix.x4.trans = b0, b1 of n-tile 2 np and b0, b1 of 2 np + 1.
#pragma unroll
    for (int kk = 0; kk < bf16p_keys / 16; ++kk) {
      const std::uint32_t pa[4] = {pack16<Fp16>(s[2 * kk][0], s[2 * kk][1]), pack16<Fp16>(s[2 * kk][2], s[2 * kk][3]),
                                   pack16<Fp16>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack16<Fp16>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < d_tiles8 / 2; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, vs + kk * 16 * pitch + np * 16 + v_lane);
        mma16<Fp16>(acc[2 * np], pa, b[0], b[1]);
        mma16<Fp16>(acc[2 * np + 1], pa, b[2], b[3]);
      }
    }
    stage ^= 1;
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const std::int64_t t = row0 + warp * 16 + g + 8 * h;
    if (t >= tokens) continue;
    const float inv = 1.0f / l[h];
    std::uint16_t* orow = o + base + t * head_dim;
#pragma unroll
    for (int n = 0; n < d_tiles8; ++n) {
      const int d = n * 8 + 2 * t4;
      if (d >= head_dim) continue;
      const float lo = acc[n][2 * h] * inv, hi = acc[n][2 * h + 1] * inv;
      if (head_dim % 2 == 0) {
        *reinterpret_cast<std::uint32_t*>(orow + d) = pack16<Fp16>(lo, hi);
      } else {
        orow[d] = round16<Fp16>(lo);
        if (d + 1 < head_dim) orow[d + 1] = round16<Fp16>(hi);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Rung 4, bf16: rung 3's kernel over Warps (16 query rows each: 4 -> 64-row blocks, 8 -> 128) and a K/V ring
// of Stages (2 or 3) tiles; the variant times the candidates in prepare() and keeps the fastest. 4 warps
// halve the rows over which K and V are shared (twice the L2 traffic) but fit four blocks per SM (45 KiB of
// shared memory and 128 registers at DMAX = 64), so one block's barrier stalls are hidden by three others.
// A 3-deep ring keeps two tiles in flight: tile j + 2 is issued during tile j's math. Rung 3's own kernel is
// the (8 warps, 2 stages) candidate, so the tuned choice is never slower than rung 3 beyond timing noise.
// Rung 3 keeps its own kernel rather than this template at (8, 2): that instantiation is not the same code
// (a guarded prologue, a general ring index) and spills 32 bytes at DMAX = 64 under the 128-register cap.

template <int DMAX, int Warps, int Stages>
struct bf16_tuned_tiles {
  static_assert(DMAX % 32 == 0 && DMAX <= max_head_dim, "DMAX: 32, 64, 96 or 128");
  static_assert(Warps == 4 || Warps == 8, "4 or 8 warps");
  static_assert(Stages == 2 || Stages == 3, "2 or 3 stages");
  static constexpr int threads = 32 * Warps, rows = 16 * Warps, keys = 64;
  static constexpr int pitch = DMAX + 8;  // as rung 3: conflict-free ldmatrix rows
  static constexpr int q_elems = rows * pitch;
  static constexpr int tile_elems = keys * pitch;
  static constexpr std::size_t smem_bytes = sizeof(std::uint16_t) * std::size_t(q_elems + 2 * Stages * tile_elems);
  // 128 registers per thread (the 64 K of an SM over 16 warps) for DMAX <= 64; DMAX = 128 takes twice that.
  static constexpr int min_blocks = (DMAX <= 64 ? 16 : 8) / Warps;
};

template <int DMAX, int Rows, int Threads>
__device__ __forceinline__ void load_bf16_tile_tuned(std::uint16_t* tile, const std::uint16_t* __restrict__ src,
                                                     std::int64_t row0, std::int64_t tokens, int head_dim, bool vec8) {
  constexpr int chunks = DMAX / 8, pitch = DMAX + 8;
  static_assert(Rows * chunks % Threads == 0, "whole chunks per thread");
#pragma unroll
  for (int u = 0; u < Rows * chunks / Threads; ++u) {
    const int f = threadIdx.x + u * Threads;
    const int r = f / chunks, c = (f % chunks) * 8;
    const std::int64_t t = row0 + r;
    std::uint16_t* dst = tile + r * pitch + c;
    if (vec8) {
      const bool inside = t < tokens && c < head_dim;
      cp_async_16(dst, inside ? src + t * head_dim + c : src, inside ? 16 : 0);
    } else {
      *reinterpret_cast<uint4*>(dst) = load_bf16_chunk(src, t, c, tokens, head_dim, false);
    }
  }
}

// Ring protocol (Stages = S): the prologue commits tiles 0 .. S - 2 (Q with tile 0), one group each. Before
// tile j, S - 1 + j groups (tiles 0 .. j + S - 2) are committed, so waiting until at most S - 2 are pending
// completes tile j; the barrier then publishes it and retires tile j - 1's stage, into which tile j + S - 1
// is issued. Every iteration commits a group, empty past the last tile, to keep that count exact.
template <int DMAX, int Warps, int Stages>
__global__ void __launch_bounds__(32 * Warps, bf16_tuned_tiles<DMAX, Warps, Stages>::min_blocks)
    attention_tuned_bf16(const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                         const std::uint16_t* __restrict__ v, std::uint16_t* __restrict__ o, std::int64_t tokens,
                         int head_dim, std::int64_t query_tiles, float scale_log2) {
  using tiles = bf16_tuned_tiles<DMAX, Warps, Stages>;
  constexpr int threads = tiles::threads, rows = tiles::rows, keys = tiles::keys;
  constexpr int pitch = tiles::pitch, kt_steps = DMAX / 16, key_tiles8 = keys / 8, d_tiles8 = DMAX / 8;
  static_assert(kt_steps % 2 == 0 && d_tiles8 % 2 == 0, "ldmatrix.x4 covers two k-steps / two n-tiles");
  extern __shared__ uint4 bf16_tuned_smem[];
  std::uint16_t* qs = reinterpret_cast<std::uint16_t*>(bf16_tuned_smem);
  std::uint16_t* ring = qs + tiles::q_elems;  // stage s: K at ring + 2 s tile_elems, V after it

  const std::int64_t head = blockIdx.x / query_tiles;
  const std::int64_t row0 = (blockIdx.x % query_tiles) * rows;
  const std::int64_t base = head * tokens * head_dim;
  const bool vec8 = head_dim % 8 == 0 && aligned16(q, k, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;

  load_bf16_tile_tuned<DMAX, rows, threads>(qs, q + base, row0, tokens, head_dim, vec8);
#pragma unroll
  for (int s = 0; s < Stages - 1; ++s) {
    const std::int64_t key0 = std::int64_t(s) * keys;
    if (key0 < tokens) {
      std::uint16_t* dst = ring + s * 2 * tiles::tile_elems;
      load_bf16_tile_tuned<DMAX, keys, threads>(dst, k + base, key0, tokens, head_dim, vec8);
      load_bf16_tile_tuned<DMAX, keys, threads>(dst + tiles::tile_elems, v + base, key0, tokens, head_dim, vec8);
    }
    cp_async_commit();
  }
  cp_async_wait<Stages - 2>();
  __syncthreads();

  std::uint32_t qa[kt_steps][4];
  {
    const std::uint16_t* q0 = qs + (warp * 16 + (lane & 15)) * pitch + (lane >> 4) * 8;
#pragma unroll
    for (int kt = 0; kt < kt_steps; ++kt) ldmatrix_x4(qa[kt], q0 + kt * 16);
  }
  const int k_lane = (lane & 7) * pitch + (lane >> 3) * 8;
  const int v_lane = ((lane & 7) + ((lane >> 3) & 1) * 8) * pitch + (lane >> 4) * 8;

  float acc[d_tiles8][4];
#pragma unroll
  for (int n = 0; n < d_tiles8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  int stage = 0;  // tile j's; tile j + Stages - 1 goes into tile j - 1's (one counter: 128 registers, no spill)
  for (std::int64_t key0 = 0; key0 < tokens; key0 += keys) {
    if (key0 > 0) {
      cp_async_wait<Stages - 2>();  // this thread's copies of tile j
      __syncthreads();              // everyone's; and every warp is done with tile j - 1's stage
    }
    const std::int64_t load0 = key0 + std::int64_t(Stages - 1) * keys;
    if (load0 < tokens) {
      const int load_stage = stage == 0 ? Stages - 1 : stage - 1;
      std::uint16_t* next = ring + load_stage * 2 * tiles::tile_elems;
      load_bf16_tile_tuned<DMAX, keys, threads>(next, k + base, load0, tokens, head_dim, vec8);
      load_bf16_tile_tuned<DMAX, keys, threads>(next + tiles::tile_elems, v + base, load0, tokens, head_dim, vec8);
    }
    if (Stages > 2 || load0 < tokens) cp_async_commit();  // 2 stages wait for all groups: no empty ones
    const std::uint16_t* ks = ring + stage * 2 * tiles::tile_elems;
    const std::uint16_t* vs = ks + tiles::tile_elems;

    float s[key_tiles8][4];
#pragma unroll
    for (int n = 0; n < key_tiles8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
      for (int kp = 0; kp < kt_steps / 2; ++kp) {
        std::uint32_t b[4];
        ldmatrix_x4(b, ks + n * 8 * pitch + kp * 32 + k_lane);
        mma_bf16(s[n], qa[2 * kp], b[0], b[1]);
        mma_bf16(s[n], qa[2 * kp + 1], b[2], b[3]);
      }
    }

    const bool edge = key0 + keys > tokens;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < key_tiles8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float x = s[n][2 * h + e] * scale_log2;
          if (edge && key0 + n * 8 + 2 * t4 + e >= tokens) x = -INFINITY;
          s[n][2 * h + e] = x;
          tile_max = fmaxf(tile_max, x);
        }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float m_new = fmaxf(m[h], tile_max);  // finite: key key0 < tokens is in every tile
      const float alpha = exp2f(m[h] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < key_tiles8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = exp2f(s[n][2 * h + e] - m_new);
          s[n][2 * h + e] = p;
          sum += p;
        }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      l[h] = l[h] * alpha + sum;
      m[h] = m_new;
#pragma unroll
      for (int n = 0; n < d_tiles8; ++n) {
        acc[n][2 * h] *= alpha;
        acc[n][2 * h + 1] *= alpha;
      }
    }

#pragma unroll
    for (int kk = 0; kk < keys / 16; ++kk) {
      const std::uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                   pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < d_tiles8 / 2; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, vs + kk * 16 * pitch + np * 16 + v_lane);
        mma_bf16(acc[2 * np], pa, b[0], b[1]);
        mma_bf16(acc[2 * np + 1], pa, b[2], b[3]);
      }
    }
    stage = stage == Stages - 1 ? 0 : stage + 1;
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const std::int64_t t = row0 + warp * 16 + g + 8 * h;
    if (t >= tokens) continue;
    const float inv = 1.0f / l[h];
    std::uint16_t* orow = o + base + t * head_dim;
#pragma unroll
    for (int n = 0; n < d_tiles8; ++n) {
      const int d = n * 8 + 2 * t4;
      if (d >= head_dim) continue;
      const float lo = acc[n][2 * h] * inv, hi = acc[n][2 * h + 1] * inv;
      if (head_dim % 2 == 0) {
        *reinterpret_cast<std::uint32_t*>(orow + d) = pack_bf16(lo, hi);
      } else {
        orow[d] = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
        if (d + 1 < head_dim) orow[d + 1] = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Rung 1: the textbook

// 16-bit storage: cuBLAS's data type and the softmax's P type.
template <attention_precision P>
struct half_storage {
  static constexpr cudaDataType_t type = CUDA_R_16BF;
  using probability = std::uint16_t;  // bf16 bits (store_probability rounds to bf16)
};
template <>
struct half_storage<attention_precision::fp16> {
  static constexpr cudaDataType_t type = CUDA_R_16F;
  using probability = __half;
};

// M causal: S and P V stay full products (the textbook does the masked half's work too); the softmax
// writes P = 0 above the diagonal.
template <attention_precision P, attention_mask M = attention_mask::none>
class attention_textbook final : public attention_cuda_base<P, M> {
  using base = attention_cuda_base<P, M>;

 public:
  ~attention_textbook() override {
    release();
    if (m_handle != nullptr) cublasDestroy(m_handle);
  }

  void enqueue_run() override {
    const int t = static_cast<int>(this->m_tokens), d = static_cast<int>(this->m_head_dim);
    const int heads = static_cast<int>(this->m_heads);
    const long long td = static_cast<long long>(this->m_tokens) * this->m_head_dim;
    const long long tt = static_cast<long long>(this->m_tokens) * this->m_tokens;
    const float alpha = this->m_scale, one = 1.0f, zero = 0.0f;
    // Column-major view: a row-major tokens x head_dim matrix is head_dim x tokens with ld head_dim, and S
    // (row-major tokens x tokens) is S^T. S^T = K_cm^T Q_cm, then O_cm = V_cm P^T_cm.
    if constexpr (P == attention_precision::fp32) {
      KSTUDY_CUBLAS_CHECK(cublasSgemmStridedBatched(m_handle, CUBLAS_OP_T, CUBLAS_OP_N, t, t, d, &alpha, this->m_k, d,
                                                    td, this->m_q, d, td, &zero, m_scores, t, tt, heads));
      launch_softmax(m_scores, t);
      KSTUDY_CUBLAS_CHECK(cublasSgemmStridedBatched(m_handle, CUBLAS_OP_N, CUBLAS_OP_N, d, t, t, &one, this->m_v, d, td,
                                                    m_scores, t, tt, &zero, this->m_o, d, td, heads));
    } else {
      constexpr cudaDataType_t type = half_storage<P>::type;
      KSTUDY_CUBLAS_CHECK(cublasGemmStridedBatchedEx(m_handle, CUBLAS_OP_T, CUBLAS_OP_N, t, t, d, &alpha, this->m_k,
                                                     type, d, td, this->m_q, type, d, td, &zero, m_scores, CUDA_R_32F,
                                                     t, tt, heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      // Row pitch 2 * tokens 16-bit values, over S.
      auto* probabilities = reinterpret_cast<typename half_storage<P>::probability*>(m_scores);
      launch_softmax(probabilities, 2 * static_cast<std::int64_t>(t));
      KSTUDY_CUBLAS_CHECK(cublasGemmStridedBatchedEx(m_handle, CUBLAS_OP_N, CUBLAS_OP_N, d, t, t, &one, this->m_v, type,
                                                     d, td, probabilities, type, 2 * t, 2 * tt, &zero, this->m_o, type,
                                                     d, td, heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  }

 protected:
  void check_shape(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim) const override {
    base::check_shape(heads, tokens, head_dim);
    // cuBLAS's int dimensions; the bf16 P's leading dimension is 2 * tokens.
    if (heads > INT_MAX || 2 * tokens > INT_MAX || head_dim > INT_MAX)
      throw std::invalid_argument("attention_textbook: heads, 2 * tokens and head_dim must fit an int");
  }

  void plan() override {
    const std::size_t score_bytes =
        static_cast<std::size_t>(this->m_heads) * this->m_tokens * this->m_tokens * sizeof(float);
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, score_bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky; clear it for the next variant
      throw std::runtime_error("out of device memory: the score matrix needs " + std::to_string(score_bytes) +
                               " bytes (heads x tokens x tokens float32)");
    }
    KSTUDY_CUDA_CHECK(status);
    m_scores = static_cast<float*>(p);
    if (m_handle == nullptr) KSTUDY_CUBLAS_CHECK(cublasCreate(&m_handle));
    KSTUDY_CUBLAS_CHECK(cublasSetStream(m_handle, this->m_stream));
    KSTUDY_CUBLAS_CHECK(cublasSetPointerMode(m_handle, CUBLAS_POINTER_MODE_HOST));
    // Default math: no TF32 for the float32 GEMMs (the fp32 gate is strict); bf16 inputs use tensor cores
    // with float32 accumulation under CUBLAS_COMPUTE_32F either way.
    KSTUDY_CUBLAS_CHECK(cublasSetMathMode(m_handle, CUBLAS_DEFAULT_MATH));
  }
  void release() override { device_free(m_scores); }

 private:
  template <class Out>
  void launch_softmax(Out* probabilities, std::int64_t p_pitch) {
    const std::int64_t rows = this->m_heads * this->m_tokens;
    const unsigned int grid = static_cast<unsigned int>(std::min(rows, max_grid));
    textbook_softmax<Out, M == attention_mask::causal>
        <<<grid, softmax_threads, 0, this->m_stream>>>(m_scores, probabilities, rows, this->m_tokens, p_pitch);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }

  cublasHandle_t m_handle = nullptr;
  float* m_scores = nullptr;  // heads x tokens x tokens float32 (bf16, fp16: P over the first half of each row)
};

// ---------------------------------------------------------------------------------------------------------
// Rung 2: the fused kernels

template <attention_precision P>
struct fused_kernels;
template <>
struct fused_kernels<attention_precision::fp32> {
  using element = float;
  using kernel_t = void (*)(const float*, const float*, const float*, float*, std::int64_t, int, std::int64_t, float);
  static constexpr int rows = f32_rows, threads = f32_threads;
  template <int DMAX>
  static kernel_t kernel() {
    return attention_fused_f32<DMAX>;
  }
  template <int DMAX>
  static std::size_t smem() {
    return f32_tiles<DMAX>::smem_bytes;
  }
  static float scale_argument(float scale) { return scale; }  // expf on scale * (q . k)
};
template <>
struct fused_kernels<attention_precision::bf16> {
  using element = std::uint16_t;
  using kernel_t = void (*)(const std::uint16_t*, const std::uint16_t*, const std::uint16_t*, std::uint16_t*,
                            std::int64_t, int, std::int64_t, float);
  static constexpr int rows = bf16_rows, threads = bf16_threads;
  template <int DMAX>
  static kernel_t kernel() {
    return attention_fused_bf16<DMAX>;
  }
  template <int DMAX>
  static std::size_t smem() {
    return bf16_tiles<DMAX>::smem_bytes;
  }
  static float scale_argument(float scale) { return scale * log2_e; }  // exp2f in the log2 domain
};

// Rung 3's kernels: the same arguments and launch shape as rung 2's.
template <attention_precision P>
struct pipelined_kernels;
template <>
struct pipelined_kernels<attention_precision::fp32> : fused_kernels<attention_precision::fp32> {
  template <int DMAX>
  static kernel_t kernel() {
    return attention_pipelined_f32<DMAX>;
  }
  template <int DMAX>
  static std::size_t smem() {
    return f32_pipe_tiles<DMAX>::smem_bytes;
  }
};
template <>
struct pipelined_kernels<attention_precision::bf16> : fused_kernels<attention_precision::bf16> {
  static constexpr int rows = bf16p_rows, threads = bf16p_threads;
  template <int DMAX>
  static kernel_t kernel() {
    return attention_pipelined_bf16<DMAX>;
  }
  template <int DMAX>
  static std::size_t smem() {
    return bf16_pipe_tiles<DMAX>::smem_bytes;
  }
};
// fp16: the bf16 kernels' Fp16 instances, the same launch shapes.
template <>
struct fused_kernels<attention_precision::fp16> : fused_kernels<attention_precision::bf16> {
  template <int DMAX>
  static kernel_t kernel() {
    return attention_fused_bf16<DMAX, true>;
  }
};
template <>
struct pipelined_kernels<attention_precision::fp16> : pipelined_kernels<attention_precision::bf16> {
  template <int DMAX>
  static kernel_t kernel() {
    return attention_pipelined_bf16<DMAX, true>;
  }
};

// Rungs 2 and 3 (Kernels: fused_kernels or pipelined_kernels).
template <attention_precision P, class Kernels = fused_kernels<P>>
class attention_fused final : public attention_cuda_base<P> {
  using base = attention_cuda_base<P>;
  using kernels = Kernels;

 public:
  void enqueue_run() override {
    m_kernel<<<m_grid, kernels::threads, m_smem, this->m_stream>>>(
        this->m_q, this->m_k, this->m_v, this->m_o, this->m_tokens, static_cast<int>(this->m_head_dim), m_query_tiles,
        kernels::scale_argument(this->m_scale));
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }

  double calculated_occupancy() const override {
    if (m_kernel == nullptr) return 0.0;
    int blocks = 0;
    KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, m_kernel, kernels::threads, m_smem));
    return double(blocks * kernels::threads) / double(device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor));
  }

 protected:
  void check_shape(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim) const override {
    base::check_shape(heads, tokens, head_dim);
    if (head_dim > max_head_dim)
      throw std::invalid_argument("attention_fused: head_dim " + std::to_string(head_dim) + " is over " +
                                  std::to_string(max_head_dim));
    const std::int64_t tiles = (tokens + kernels::rows - 1) / kernels::rows;
    if (heads > INT_MAX / tiles) throw std::invalid_argument("attention_fused: too many blocks for one grid");
  }

  // The smallest compiled maximum head_dim that covers the problem's; shared memory over 48 KiB opted in.
  void plan() override {
    if (this->m_head_dim <= 32)
      choose<32>();
    else if (this->m_head_dim <= 64)
      choose<64>();
    else
      choose<128>();
    m_query_tiles = (this->m_tokens + kernels::rows - 1) / kernels::rows;
    m_grid = static_cast<unsigned int>(this->m_heads * m_query_tiles);
  }

 private:
  template <int DMAX>
  void choose() {
    m_kernel = kernels::template kernel<DMAX>();
    m_smem = kernels::template smem<DMAX>();
    if (m_smem > 48 * 1024)
      KSTUDY_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(m_kernel),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(m_smem)));
  }

  typename kernels::kernel_t m_kernel = nullptr;
  std::size_t m_smem = 0;
  std::int64_t m_query_tiles = 1;
  unsigned int m_grid = 1;
};

// ---------------------------------------------------------------------------------------------------------
// Rung 4: the autotuned bf16 kernel

// One launch configuration: all candidates take rung 3's arguments and compute the same sums in the same key
// order per query row, so the choice changes the speed, not the result.
struct bf16_candidate {
  fused_kernels<attention_precision::bf16>::kernel_t kernel;
  int warps, stages;
  std::size_t smem;
};

class attention_bf16_autotuned final : public attention_cuda_base<attention_precision::bf16> {
  using base = attention_cuda_base<attention_precision::bf16>;

 public:
  // Allocates, plan() (the candidates of the problem's DMAX), uploads; then times each candidate on the
  // prepared problem (1 warm-up + 2 launches, CUDA events on the variant's stream) and keeps the fastest.
  void prepare(const problem_data& problem, const run_options& options) override {
    base::prepare(problem, options);
    if (m_candidates.size() == 1) return;
    event_pair events;
    float best_ms = 0.0f;
    for (std::size_t i = 0; i < m_candidates.size(); ++i) {
      launch(m_candidates[i]);  // warm-up
      KSTUDY_CUDA_CHECK(cudaEventRecord(events.start(), m_stream));
      launch(m_candidates[i]);
      launch(m_candidates[i]);
      KSTUDY_CUDA_CHECK(cudaEventRecord(events.stop(), m_stream));
      KSTUDY_CUDA_CHECK(cudaEventSynchronize(events.stop()));
      float ms = 0.0f;
      KSTUDY_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start(), events.stop()));
      if (i == 0 || ms < best_ms) {
        best_ms = ms;
        m_chosen = i;
      }
    }
  }

  void enqueue_run() override { launch(m_candidates[m_chosen]); }

  double calculated_occupancy() const override {
    if (m_candidates.empty()) return 0.0;
    const auto& c = m_candidates[m_chosen];
    int blocks = 0;
    KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, c.kernel, 32 * c.warps, c.smem));
    return double(blocks * 32 * c.warps) / double(device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor));
  }

  // The chosen configuration, then how it was chosen: the candidates timed, and rung 3 when its own kernel (the
  // first candidate) won (0: one of the tuned kernels).
  std::vector<std::pair<std::string, std::int64_t>> tuned_parameters() const override {
    if (m_candidates.empty()) return {};
    const auto& c = m_candidates[m_chosen];
    return {{"warps", c.warps},
            {"query_rows", 16 * c.warps},
            {"stages", c.stages},
            {"key_tile", bf16p_keys},
            {"candidates", static_cast<std::int64_t>(m_candidates.size())},
            {"same_as_rung", m_chosen == 0 ? 3 : 0}};
  }

 protected:
  void check_shape(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim) const override {
    base::check_shape(heads, tokens, head_dim);
    if (head_dim > max_head_dim)
      throw std::invalid_argument("attention_bf16_fused_autotuned: head_dim " + std::to_string(head_dim) + " is over " +
                                  std::to_string(max_head_dim));
    const std::int64_t tiles = (tokens + bf16p_rows - 1) / bf16p_rows;  // rung 3's blocks always fit
    if (heads > INT_MAX / tiles)
      throw std::invalid_argument("attention_bf16_fused_autotuned: too many blocks for one grid");
  }

  // Rung 3's kernel first (the reference the others must beat), then the tuned configurations; 64-row
  // blocks only where their grid fits.
  void plan() override {
    m_candidates.clear();
    m_chosen = 0;
    if (m_head_dim <= 32)
      add_candidates<32>();
    else if (m_head_dim <= 64)
      add_candidates<64>();
    else
      add_candidates<128>();
    for (const auto& c : m_candidates)
      if (c.smem > 48 * 1024)
        KSTUDY_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(c.kernel),
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(c.smem)));
  }

 private:
  template <int DMAX>
  void add_candidates() {
    m_candidates.push_back({attention_pipelined_bf16<DMAX>, bf16p_warps, 2, bf16_pipe_tiles<DMAX>::smem_bytes});
    // 8 warps x 3 stages at DMAX = 64 spills (20 bytes) under the 128-register cap of two blocks per SM.
    if constexpr (DMAX != 64) add<DMAX, 8, 3>();
    const std::int64_t tiles64 = (m_tokens + 63) / 64;
    if (m_heads <= INT_MAX / tiles64) {
      add<DMAX, 4, 2>();
      add<DMAX, 4, 3>();
    }
  }
  template <int DMAX, int Warps, int Stages>
  void add() {
    m_candidates.push_back(
        {attention_tuned_bf16<DMAX, Warps, Stages>, Warps, Stages, bf16_tuned_tiles<DMAX, Warps, Stages>::smem_bytes});
  }

  void launch(const bf16_candidate& c) const {
    const int rows = 16 * c.warps;
    const std::int64_t query_tiles = (m_tokens + rows - 1) / rows;
    c.kernel<<<static_cast<unsigned int>(m_heads * query_tiles), 32 * c.warps, c.smem, m_stream>>>(
        m_q, m_k, m_v, m_o, m_tokens, static_cast<int>(m_head_dim), query_tiles, m_scale * log2_e);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }

  std::vector<bf16_candidate> m_candidates;
  std::size_t m_chosen = 0;
};

// ---------------------------------------------------------------------------------------------------------
// Registration

// Declared with their fields in attention_cuda_info.cpp, which every build compiles.
[[maybe_unused]] const int registered = [] {
  constexpr auto fp32 = attention_precision::fp32;
  constexpr auto bf16 = attention_precision::bf16;
  constexpr auto fp16 = attention_precision::fp16;
  constexpr auto causal = attention_mask::causal;
  variant_binding<attention_textbook<fp32>>{"attention_textbook@cuda"};
  variant_binding<attention_fused<fp32>>{"attention_fused@cuda"};
  variant_binding<attention_textbook<bf16>>{"attention_bf16_textbook@cuda"};
  variant_binding<attention_fused<bf16>>{"attention_bf16_fused@cuda"};
  variant_binding<attention_fused<fp32, pipelined_kernels<fp32>>>{"attention_fused_pipelined@cuda"};
  variant_binding<attention_fused<bf16, pipelined_kernels<bf16>>>{"attention_bf16_fused_pipelined@cuda"};
  variant_binding<attention_bf16_autotuned>{"attention_bf16_fused_autotuned@cuda"};
  variant_binding<attention_textbook<fp16>>{"attention_fp16_textbook@cuda"};
  variant_binding<attention_fused<fp16>>{"attention_fp16_fused@cuda"};
  variant_binding<attention_fused<fp16, pipelined_kernels<fp16>>>{"attention_fp16_fused_pipelined@cuda"};
  variant_binding<attention_textbook<fp32, causal>>{"attention_causal_textbook@cuda"};
  variant_binding<attention_textbook<bf16, causal>>{"attention_bf16_causal_textbook@cuda"};
  variant_binding<attention_textbook<fp16, causal>>{"attention_fp16_causal_textbook@cuda"};
  return 0;
}();

}  // namespace
}  // namespace kstudy::attention
