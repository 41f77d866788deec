// Tensor-core GEMM in plain CUDA (WMMA, fp32 accumulate) for gemm_tf32 and gemm_bf16, and the cuBLAS
// baselines at the same precision. The handwritten kernels take row-major A (m x k), B (k x n) and C
// (m x n, float32); they handle any m, n, k >= 1 (edge tiles zero-filled in shared memory, edge C tiles
// stored through a shared-memory staging tile with bounds checks).
//
// Family gemm_tensor_cuda, one ladder per operation, one change per rung:
//  1 <op>_wmma_naive  one warp per 16 x 16 C tile, fragments loaded straight from global memory
//                     (wmma m16n16k8 tf32 / m16n16k16 bf16); 4 warps a block side by side along n, so the
//                     block's warps share A's rows through L1. A k-step whose A or B tile is not entirely
//                     inside the matrix, or whose rows are not 16-byte multiples (wmma's ldm rule), is
//                     staged through a per-warp shared-memory tile with guarded loads and zero fill.
//  2 <op>_wmma_smem   block tile 128 x 128 x 32 staged through shared memory (rows padded by 16 bytes:
//                     ldmatrix / wmma loads conflict-free), 8 warps each owning 64 x 32 of C (4 x 2
//                     accumulator fragments: every A fragment feeds 2 mma, every B fragment 4), tiles
//                     fetched with 16-byte cp.async (zero-fill past the edges) into a pipeline of S stages
//                     (tf32: 2, double buffering; bf16: 4) so the next tiles load while this one multiplies.
//                     Where k or n is not a multiple of the 16-byte vector (4 floats, 8 bf16) the tiles are
//                     loaded by guarded scalar loads instead (same pipeline, synchronous stores).
//  3 gemm_bf16_mma_ldmatrix (bf16 only)
//                     rung 2's loader and pipeline with the multiply in PTX: ldmatrix.x4 (.trans for B) into
//                     mma.sync m16n8k16 fragments, 128 x 256 x 32 block tiles, 8 warps of 64 x 64 (each A
//                     fragment feeds 8 mma instead of 2), C stored from the accumulator registers with guarded
//                     float2 stores (no staging tile needed: every lane knows its elements' coordinates).
//  3 gemm_tf32_mma / 4 gemm_bf16_mma_autotuned (round 2)
//                     one mma.sync kernel template (mma_tuned_kernel) over a set of tilings, warp grids and
//                     stage counts, plus a grouped block order for L2 reuse; the fastest candidate is timed
//                     in prepare() and reported by tuned_parameters(). TF32: m16n8k8 with A by ldmatrix on
//                     32-bit data, B by conflict-free 32-bit loads, cvt.rna.tf32 on every element.
// TF32 rounding: wmma's tf32 fragments hold floats; each loaded A and B element is rounded to TF32 with
// wmma::__float_to_tf32 (round to nearest, relative error <= 2^-11) rather than left to the hardware,
// which would ignore the low 13 mantissa bits (truncation, <= 2^-10). BF16 inputs are exact: the
// operation stores them as bf16 bit patterns, uploaded as uint16_t and read as __nv_bfloat16.
//
// Family cublas (rung 0): cublasGemmEx_64 with CUBLAS_COMPUTE_32F_FAST_TF32 on float A, B, C (tf32) or
// CUDA_R_16BF (bf16) / CUDA_R_16F (fp16: gemm_fp16's only rungs in this file) A, B, CUDA_R_32F C and
// CUBLAS_COMPUTE_32F, in both layouts: feature_major (column-major)
// directly, row_major as the column-major C^T = B^T A^T (row-major X is column-major X^T, same memory).
// Every variant queues on its own non-blocking stream, so CUDA events around enqueue_run() time only its
// kernel; run() is enqueue_run() and a stream synchronisation.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kstudy/support/ampere_ptx.hpp"
#include "kstudy/support/cublas_check.hpp"
#include "kstudy/support/cuda_arch.hpp"
#include "kstudy/support/cuda_buffers.hpp"
#include "kstudy/support/cuda_variant.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_tensor_common.cuh"
#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::gemm {
namespace {

using namespace tensor;          // gemm_tensor_common.cuh: precisions, buffers, the pair store, registration fields
using namespace kstudy::ampere;  // cp.async and ldmatrix (kstudy/support/ampere_ptx.hpp)

// ---------------------------------------------------------------------------------------------------------
// Fragments: what wmma loads and accumulates at each precision.

template <gemm_precision P>
using frag_a = wmma::fragment<wmma::matrix_a, 16, 16, tc_traits<P>::frag_k, typename tc_traits<P>::fragment_precision,
                              wmma::row_major>;
template <gemm_precision P>
using frag_b = wmma::fragment<wmma::matrix_b, 16, 16, tc_traits<P>::frag_k, typename tc_traits<P>::fragment_precision,
                              wmma::row_major>;
template <gemm_precision P>
using frag_c = wmma::fragment<wmma::accumulator, 16, 16, tc_traits<P>::frag_k, float>;

// wmma::load_matrix_sync from storage (float or uint16_t bf16 patterns), then TF32 rounding where it applies.
template <gemm_precision P, class Fragment>
__device__ __forceinline__ void load_fragment(Fragment& f, const typename tc_traits<P>::storage* p, unsigned ldm) {
  wmma::load_matrix_sync(f, reinterpret_cast<const typename tc_traits<P>::element*>(p), ldm);
  if constexpr (P == gemm_precision::tf32) {
#pragma unroll
    for (int i = 0; i < f.num_elements; ++i) f.x[i] = wmma::__float_to_tf32(f.x[i]);
  }
}

// A 16 x 16 accumulator to C(row0.., col0..): straight to global memory when the tile is inside C and its
// rows meet wmma's rules (ldm a multiple of 4 floats; the pointer is then 32-byte aligned, as row0 and col0
// are multiples of 16), else through the warp's 16 x 16 staging tile with a guarded copy.
template <gemm_precision P>
__device__ __forceinline__ void store_tile(const frag_c<P>& acc, float* __restrict__ c, float* staging, std::int64_t m,
                                           std::int64_t n, std::int64_t row0, std::int64_t col0, bool vector_c) {
  if (vector_c && row0 + 16 <= m && col0 + 16 <= n) {
    wmma::store_matrix_sync(c + row0 * n + col0, acc, static_cast<unsigned>(n), wmma::mem_row_major);
    return;
  }
  wmma::store_matrix_sync(staging, acc, 16, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32;
  for (int e = lane; e < 256; e += 32) {
    const std::int64_t r = row0 + e / 16, col = col0 + e % 16;
    if (r < m && col < n) c[r * n + col] = staging[e];
  }
  __syncwarp();  // the staging tile is reused by the warp's next store
}

// ---------------------------------------------------------------------------------------------------------
// Rung 1: one warp per 16 x 16 tile of C, 4 warps a block along n (block: 16 rows x 64 columns); blocks
// stride over row tiles beyond gridDim.y. No __syncthreads, so a warp past the last column returns early.

constexpr int naive_warps = 4;

template <gemm_precision P>
__global__ void __launch_bounds__(naive_warps * 32)
    wmma_naive_kernel(const typename tc_traits<P>::storage* __restrict__ a,
                      const typename tc_traits<P>::storage* __restrict__ b, float* __restrict__ c, std::int64_t m,
                      std::int64_t n, std::int64_t k, bool vector_ab, bool vector_c) {
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)  // TF32 and bf16 wmma fragments
  using T = tc_traits<P>;
  using storage = typename T::storage;
  constexpr int kf = T::frag_k;
  // Per warp: the guarded A (16 x kf) and B (kf x 16) tiles and the C staging tile; 32-byte aligned bases
  // (each tile is a multiple of 32 bytes) as wmma requires.
  __shared__ __align__(32) storage stage_a[naive_warps][16 * kf];
  __shared__ __align__(32) storage stage_b[naive_warps][kf * 16];
  __shared__ __align__(32) float stage_c[naive_warps][256];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t col0 = (std::int64_t(blockIdx.x) * naive_warps + warp) * 16;
  if (col0 >= n) return;
  const bool cols_full = col0 + 16 <= n;
  storage* sa = stage_a[warp];
  storage* sb = stage_b[warp];
  for (std::int64_t row0 = std::int64_t(blockIdx.y) * 16; row0 < m; row0 += std::int64_t(gridDim.y) * 16) {
    const bool rows_full = row0 + 16 <= m;
    frag_c<P> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (std::int64_t k0 = 0; k0 < k; k0 += kf) {
      frag_a<P> fa;
      frag_b<P> fb;
      if (vector_ab && rows_full && cols_full && k0 + kf <= k) {
        // Pointers 32-byte aligned: row0 * k and k0 * n are multiples of 16 and kf elements (32 bytes) in
        // rows that are 16-byte multiples; k0 and col0 are multiples of 32 bytes.
        load_fragment<P>(fa, a + row0 * k + k0, static_cast<unsigned>(k));
        load_fragment<P>(fb, b + k0 * n + col0, static_cast<unsigned>(n));
      } else {
        for (int e = lane; e < 16 * kf; e += 32) {
          const std::int64_t r = row0 + e / kf, l = k0 + e % kf;
          sa[e] = r < m && l < k ? a[r * k + l] : storage(0);
        }
        for (int e = lane; e < kf * 16; e += 32) {
          const std::int64_t l = k0 + e / 16, col = col0 + e % 16;
          sb[e] = l < k && col < n ? b[l * n + col] : storage(0);
        }
        __syncwarp();
        load_fragment<P>(fa, sa, kf);
        load_fragment<P>(fb, sb, 16);
        __syncwarp();  // the staging tiles are rewritten by the next k-step
      }
      wmma::mma_sync(acc, fa, fb, acc);
    }
    store_tile<P>(acc, c, stage_c[warp], m, n, row0, col0, vector_c);
  }
#else
  KSTUDY_UNREACHABLE_ON_THIS_TARGET();
#endif
}

// ---------------------------------------------------------------------------------------------------------
// Rung 2: block tile 128 x 128 x 32 in shared memory, S-stage cp.async pipeline, 8 warps of 64 x 32.

// Rungs 2 and 3 share the block's k depth, its 8 warps in a 2 x 4 grid and the tile loader.
constexpr int block_k = 32;
constexpr int smem_warps_m = 2, smem_warps_n = 4, smem_threads = smem_warps_m * smem_warps_n * 32;
// Rung 2: 128 x 128 block tiles, warps of 64 x 32 = 4 x 2 wmma fragments.
constexpr int wmma_block_m = 128, wmma_block_n = 128;
constexpr int warp_m = wmma_block_m / smem_warps_m, warp_n = wmma_block_n / smem_warps_n;
constexpr int frags_m = warp_m / 16, frags_n = warp_n / 16;
// (Also what keeps the names referenced in a pre-sm_80 device pass, where the kernel body is compiled out.)
static_assert(frags_m * 16 == warp_m && frags_n * 16 == warp_n, "a warp tile is whole wmma fragments");

// The shared-memory stages of a block_m x block_n block tile: per stage the A tile (block_m rows of lda)
// then the B tile (block_k rows of ldb).
template <gemm_precision P, int BlockM, int BlockN, int Stages>
struct smem_layout {
  using storage = typename tc_traits<P>::storage;
  static constexpr int block_m = BlockM, block_n = BlockN;
  static constexpr int pad = tc_traits<P>::vector;  // 16 bytes: rows start 4 banks apart, ldm stays legal
  static constexpr int lda = block_k + pad;         // A tile: block_m rows of lda
  static constexpr int ldb = block_n + pad;         // B tile: block_k rows of ldb
  static constexpr int a_elements = block_m * lda;
  static constexpr int stage_elements = a_elements + block_k * ldb;
  static constexpr int stages = Stages;
  static constexpr int bytes = stages * stage_elements * int(sizeof(storage));
  // wmma needs 32-byte aligned fragment pointers: every stage, the B tile and each fragment's first
  // element (16-row and 16- or 8-column offsets) must fall on a 32-byte boundary.
  static_assert((a_elements * sizeof(storage)) % 32 == 0, "B tile misaligned");
  static_assert((stage_elements * sizeof(storage)) % 32 == 0, "stage misaligned");
  static_assert((16 * lda * sizeof(storage)) % 32 == 0 && (16 * ldb * sizeof(storage)) % 32 == 0, "rows misaligned");
  static_assert((tc_traits<P>::frag_k * ldb * sizeof(storage)) % 32 == 0, "k-step misaligned");
  static_assert(smem_threads / 32 * 256 * sizeof(float) <= bytes, "the warps' C staging tiles do not fit");
};

// The A tile (block_m x block_k at row0, k0) and B tile (block_k x block_n at k0, col0) into one stage.
// Vector: 16-byte cp.async chunks (k and n multiples of the vector, so a chunk is wholly in or out of the
// matrix; out: zero-filled). Otherwise guarded scalar loads and stores (completed before the barrier that
// precedes their use, like the cp.async groups).
template <gemm_precision P, class L, bool Vector>
__device__ __forceinline__ void load_tiles(typename tc_traits<P>::storage* stage,
                                           const typename tc_traits<P>::storage* __restrict__ a,
                                           const typename tc_traits<P>::storage* __restrict__ b, std::int64_t m,
                                           std::int64_t n, std::int64_t k, std::int64_t row0, std::int64_t col0,
                                           std::int64_t k0) {
  using storage = typename L::storage;
  constexpr int v = tc_traits<P>::vector, block_m = L::block_m, block_n = L::block_n;
  storage* sa = stage;
  storage* sb = stage + L::a_elements;
  if constexpr (Vector) {
    constexpr int a_chunks_per_row = block_k / v, b_chunks_per_row = block_n / v;
#pragma unroll
    for (int chunk = threadIdx.x; chunk < block_m * a_chunks_per_row; chunk += smem_threads) {
      const int r = chunk / a_chunks_per_row, l = (chunk % a_chunks_per_row) * v;
      const bool inside = row0 + r < m && k0 + l < k;
      cp_async_16(sa + r * L::lda + l, inside ? a + (row0 + r) * k + k0 + l : a, inside ? 16 : 0);
    }
#pragma unroll
    for (int chunk = threadIdx.x; chunk < block_k * b_chunks_per_row; chunk += smem_threads) {
      const int l = chunk / b_chunks_per_row, col = (chunk % b_chunks_per_row) * v;
      const bool inside = k0 + l < k && col0 + col < n;
      cp_async_16(sb + l * L::ldb + col, inside ? b + (k0 + l) * n + col0 + col : b, inside ? 16 : 0);
    }
  } else {
    for (int e = threadIdx.x; e < block_m * block_k; e += smem_threads) {
      const int r = e / block_k, l = e % block_k;
      sa[r * L::lda + l] = row0 + r < m && k0 + l < k ? a[(row0 + r) * k + k0 + l] : storage(0);
    }
    for (int e = threadIdx.x; e < block_k * block_n; e += smem_threads) {
      const int l = e / block_n, col = e % block_n;
      sb[l * L::ldb + col] = k0 + l < k && col0 + col < n ? b[(k0 + l) * n + col0 + col] : storage(0);
    }
  }
}

// Block (bx, by) computes C(by * 128.., bx * 128..); warp w owns rows (w / 4) * 64 and columns (w % 4) * 32
// of it. Pipeline over k-tiles kt: tile kt sits in stage kt % S; before multiplying tile kt the block waits
// for its group (wait_group S - 2: the S - 2 newer groups may still fly) and synchronises, which also
// proves every warp is done with stage (kt - 1) % S, into which tile kt + S - 1 is then fetched.
template <gemm_precision P>
using wmma_layout = smem_layout<P, wmma_block_m, wmma_block_n, tc_traits<P>::stages>;

template <gemm_precision P, bool Vector>
__global__ void __launch_bounds__(smem_threads, 2)
    wmma_smem_kernel(const typename tc_traits<P>::storage* __restrict__ a,
                     const typename tc_traits<P>::storage* __restrict__ b, float* __restrict__ c, std::int64_t m,
                     std::int64_t n, std::int64_t k, bool vector_c) {
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)  // TF32 and bf16 wmma fragments
  using L = wmma_layout<P>;
  using storage = typename L::storage;
  constexpr int kf = tc_traits<P>::frag_k, stages = L::stages;
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  storage* smem = reinterpret_cast<storage*>(smem_bytes);

  const int warp = threadIdx.x / 32;
  const int wm = warp / smem_warps_n, wn = warp % smem_warps_n;
  const std::int64_t row0 = std::int64_t(blockIdx.y) * L::block_m, col0 = std::int64_t(blockIdx.x) * L::block_n;
  const int tiles = static_cast<int>((k + block_k - 1) / block_k);  // k < 2^36: checked in plan()

  frag_c<P> acc[frags_m][frags_n];
#pragma unroll
  for (int i = 0; i < frags_m; ++i)
#pragma unroll
    for (int j = 0; j < frags_n; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

#pragma unroll
  for (int s = 0; s < stages - 1; ++s) {
    if (s < tiles) load_tiles<P, L, Vector>(smem + s * L::stage_elements, a, b, m, n, k, row0, col0, s * block_k);
    cp_async_commit();  // one group per tile, empty past the last, so the wait count stays uniform
  }
  for (int kt = 0; kt < tiles; ++kt) {
    cp_async_wait<stages - 2>();
    __syncthreads();
    const int next = kt + stages - 1;
    if (next < tiles)
      load_tiles<P, L, Vector>(smem + (next % stages) * L::stage_elements, a, b, m, n, k, row0, col0,
                               std::int64_t(next) * block_k);
    cp_async_commit();

    const storage* sa = smem + (kt % stages) * L::stage_elements + wm * warp_m * L::lda;
    const storage* sb = smem + (kt % stages) * L::stage_elements + L::a_elements + wn * warp_n;
#pragma unroll
    for (int kk = 0; kk < block_k; kk += kf) {
      // The B fragments stay in registers for the whole k-step (each feeds frags_m mma); the A fragments
      // are loaded one at a time (each feeds frags_n mma), which keeps TF32's 128-register budget unspilled.
      frag_b<P> fb[frags_n];
#pragma unroll
      for (int j = 0; j < frags_n; ++j) load_fragment<P>(fb[j], sb + kk * L::ldb + j * 16, L::ldb);
#pragma unroll
      for (int i = 0; i < frags_m; ++i) {
        frag_a<P> fa;
        load_fragment<P>(fa, sa + i * 16 * L::lda + kk, L::lda);
#pragma unroll
        for (int j = 0; j < frags_n; ++j) wmma::mma_sync(acc[i][j], fa, fb[j], acc[i][j]);
      }
    }
  }
  cp_async_wait<0>();  // only empty groups remain; drained before the stages become staging tiles
  __syncthreads();

  float* staging = reinterpret_cast<float*>(smem_bytes) + warp * 256;
#pragma unroll
  for (int i = 0; i < frags_m; ++i)
#pragma unroll
    for (int j = 0; j < frags_n; ++j)
      store_tile<P>(acc[i][j], c, staging, m, n, row0 + wm * warp_m + i * 16, col0 + wn * warp_n + j * 16, vector_c);
#else
  KSTUDY_UNREACHABLE_ON_THIS_TARGET();
#endif
}

// ---------------------------------------------------------------------------------------------------------
// Rung 3 (bf16 only): the same loader and pipeline, but the multiply in PTX: 128 x 256 x 32 block tiles,
// 8 warps of 64 x 64, each k16-step 4 ldmatrix.x4 for A and 4 ldmatrix.x4.trans for B feeding 32
// mma.sync.m16n8k16 (every A fragment used 8 times, every B fragment 4 times; wmma's 16 x 16 fragments
// allowed 2 and 4). Fragment layouts (PTX ISA, m16n8k16 bf16), g = lane / 4, t = lane % 4:
//   A regs a0..a3: (g, 2t..2t+1), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..) of the 16 x 16 A tile;
//   B regs b0, b1: (k 2t..2t+1, n g), (k 2t + 8.., n g) of the 16 x 8 B tile;
//   C regs c0..c3: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
// ldmatrix.x4: lanes 8j..8j+7 give the row addresses of 8 x 8 matrix j, register j of lane l receives
// matrix j's row l / 4, elements 2 (l % 4)..+1 (.trans: its column l / 4, rows 2 (l % 4)..+1). Lane l
// pointing at row (l % 16), column 8 (l / 16) of a 16 x 16 tile therefore loads A's a0..a3 directly, and
// with .trans on a k16 x n16 tile of row-major B the b0, b1 of its two n8 halves.

constexpr int mma_block_m = 128, mma_block_n = 256, mma_stages = 4;
constexpr int mma_warp_m = mma_block_m / smem_warps_m, mma_warp_n = mma_block_n / smem_warps_n;  // 64 x 64
constexpr int mma_tiles_m = mma_warp_m / 16, mma_tiles_n = mma_warp_n / 8;                       // 4 x 8
using mma_layout = smem_layout<gemm_precision::bf16, mma_block_m, mma_block_n, mma_stages>;

// d = a b + d, bf16 inputs, f32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  KSTUDY_UNREACHABLE_ON_THIS_TARGET();
#endif
}

template <bool Vector>
__global__ void __launch_bounds__(smem_threads, 1)
    mma_bf16_kernel(const std::uint16_t* __restrict__ a, const std::uint16_t* __restrict__ b, float* __restrict__ c,
                    std::int64_t m, std::int64_t n, std::int64_t k, bool even_n) {
  using L = mma_layout;
  constexpr int stages = L::stages;
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  std::uint16_t* smem = reinterpret_cast<std::uint16_t*>(smem_bytes);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / smem_warps_n, wn = warp % smem_warps_n;
  const std::int64_t row0 = std::int64_t(blockIdx.y) * L::block_m, col0 = std::int64_t(blockIdx.x) * L::block_n;
  const int tiles = static_cast<int>((k + block_k - 1) / block_k);  // k < 2^36: checked in plan()

  float acc[mma_tiles_m][mma_tiles_n][4];
#pragma unroll
  for (int i = 0; i < mma_tiles_m; ++i)
#pragma unroll
    for (int j = 0; j < mma_tiles_n; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // This lane's ldmatrix row within a 16 x 16 tile: row lane % 16, column 8 (lane / 16).
  const int ld_row = lane % 16, ld_col = (lane / 16) * 8;

#pragma unroll
  for (int s = 0; s < stages - 1; ++s) {
    if (s < tiles)
      load_tiles<gemm_precision::bf16, L, Vector>(smem + s * L::stage_elements, a, b, m, n, k, row0, col0, s * block_k);
    cp_async_commit();
  }
  for (int kt = 0; kt < tiles; ++kt) {
    cp_async_wait<stages - 2>();
    __syncthreads();
    const int next = kt + stages - 1;
    if (next < tiles)
      load_tiles<gemm_precision::bf16, L, Vector>(smem + (next % stages) * L::stage_elements, a, b, m, n, k, row0, col0,
                                                  std::int64_t(next) * block_k);
    cp_async_commit();

    const std::uint16_t* sa = smem + (kt % stages) * L::stage_elements + (wm * mma_warp_m + ld_row) * L::lda + ld_col;
    const std::uint16_t* sb =
        smem + (kt % stages) * L::stage_elements + L::a_elements + ld_row * L::ldb + wn * mma_warp_n + ld_col;
#pragma unroll
    for (int kk = 0; kk < block_k; kk += 16) {
      unsigned fb[mma_tiles_n / 2][4];  // per n16 pair: b0, b1 of n8 tile 2p, then of 2p + 1
#pragma unroll
      for (int p = 0; p < mma_tiles_n / 2; ++p) ldmatrix_x4_trans(fb[p], sb + kk * L::ldb + p * 16);
#pragma unroll
      for (int i = 0; i < mma_tiles_m; ++i) {
        unsigned fa[4];
        ldmatrix_x4(fa, sa + i * 16 * L::lda + kk);
#pragma unroll
        for (int j = 0; j < mma_tiles_n; ++j)
          mma_bf16_16816(acc[i][j], fa, fb[j / 2][2 * (j % 2)], fb[j / 2][2 * (j % 2) + 1]);
      }
    }
  }
  cp_async_wait<0>();  // only empty groups remain; nothing may be in flight when the block exits

  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < mma_tiles_m; ++i)
#pragma unroll
    for (int j = 0; j < mma_tiles_n; ++j) {
      const std::int64_t row = row0 + wm * mma_warp_m + i * 16 + g, col = col0 + wn * mma_warp_n + j * 8 + 2 * t;
      store_pair(c, m, n, row, col, acc[i][j][0], acc[i][j][1], even_n);
      store_pair(c, m, n, row + 8, col, acc[i][j][2], acc[i][j][3], even_n);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Rungs gemm_tf32_mma (3) and gemm_bf16_mma_autotuned (4): one mma.sync kernel template over a set of
// configurations (block tile, warp grid, stages, blocks per SM), each timed in prepare() on the prepared
// problem, the fastest kept. Same cp.async pipeline and guarded scalar fallback as rungs 2 and 3; block_k 32.
// Blocks run on a 1-D grid in grouped order (group_m block rows are walked column by column), so blocks
// resident together share A's rows and B's columns in L2; group_m = 1 is rung 3's row-by-row order.
//
// Shared-memory layout (padded rows; conflict-free for the fragment loads, checked by static_asserts):
//  - ldmatrix reads 8 rows of 16 bytes per phase: conflict-free when the row stride is an odd multiple of
//    16 bytes (the 8 rows then cover the 8 distinct 16-byte bank groups of 128 bytes). A (both precisions)
//    and bf16 B: rows of 32 + 4 floats (144 bytes), 32 + 8 bf16 (80 bytes), n + 8 bf16 (16 mod 128 bytes).
//  - tf32 B is read by 32-bit loads (ldmatrix.trans transposes 16-bit elements, not 32-bit ones): lane
//    (g, t) reads B(k = t, n = g), so banks (t ldb + g) mod 32 are distinct when ldb = 8 (mod 32) words.
//
// TF32 fragments (PTX ISA, mma.m16n8k8 .tf32), g = lane / 4, t = lane % 4:
//   A a0..a3: (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4) of the 16 x 8 A tile;
//   B b0, b1: (k t, n g), (k t + 4, n g) of the 8 x 8 B tile; C as m16n8k16: (g, 2t..2t+1), (g + 8, 2t..).
// ldmatrix.x4 (b16) on 32-bit data: an 8 x 8 b16 matrix is 8 rows x 4 floats and lane l receives row l / 4,
// float l % 4, i.e. (g, t). Lanes 0-7, 8-15, 16-23, 24-31 address rows 0-7 / 8-15 at float 0, then rows 0-7
// / 8-15 at float 4: row lane % 16, float 4 (lane / 16), the same byte offsets as the bf16 A fragment.
// Each element is rounded to TF32 (cvt.rna, round to nearest away from zero: <= 2^-11 relative) as it
// leaves shared memory, as rungs 1 and 2 do with __float_to_tf32.

template <gemm_precision P, int BlockM, int BlockN, int WarpsM, int WarpsN, int Stages, int MinBlocks>
struct mma_config {
  using storage = typename tc_traits<P>::storage;
  static constexpr gemm_precision precision = P;
  static constexpr int block_m = BlockM, block_n = BlockN, warps_n = WarpsN;
  static constexpr int stages = Stages, min_blocks = MinBlocks, threads = WarpsM * WarpsN * 32;
  static constexpr int warp_m = BlockM / WarpsM, warp_n = BlockN / WarpsN;
  static constexpr int tiles_m = warp_m / 16, tiles_n = warp_n / 8;  // m16n8 accumulator tiles per warp
  static constexpr int k_step = P == gemm_precision::tf32 ? 8 : 16;
  // Within the 128-register cap of 2 blocks of 8 warps the loader's loops stay rolled: unrolled, the
  // compiler keeps every chunk's global address live across the k loop and spills (32-80 bytes).
  static constexpr bool lean = MinBlocks * WarpsM * WarpsN >= 16;
  static constexpr int chunk_unroll = lean ? 1 : 4;  // 4: at least the loader's trip counts
  static constexpr int lda = block_k + (P == gemm_precision::tf32 ? 4 : 8);
  static constexpr int ldb = block_n + 8;
  static constexpr int a_elements = block_m * lda;
  static constexpr int stage_elements = a_elements + block_k * ldb;
  static constexpr int bytes = stages * stage_elements * int(sizeof(storage));
  static_assert(warp_m % 16 == 0 && warp_n % 16 == 0, "warp tiles are whole 16 x 16 blocks");
  static_assert(bytes <= 227 * 1024, "shared memory past the per-block limit");
  static_assert((lda * sizeof(storage)) % 32 == 16 && (a_elements * sizeof(storage)) % 16 == 0 &&
                    (stage_elements * sizeof(storage)) % 16 == 0,
                "A rows: 16-byte aligned, an odd number of 16-byte chunks (conflict-free ldmatrix)");
  static_assert(P == gemm_precision::tf32 ? ldb % 32 == 8 : (ldb * sizeof(storage)) % 32 == 16,
                "B rows: conflict-free 32-bit loads (tf32) or ldmatrix.trans (bf16)");
};

// One pipeline stage: A tile (block_m x block_k at row0, k0) and B tile (block_k x block_n at k0, col0);
// as load_tiles, for C::threads threads.
template <class C, bool Vector>
__device__ __forceinline__ void load_stage(typename C::storage* stage, const typename C::storage* __restrict__ a,
                                           const typename C::storage* __restrict__ b, std::int64_t m, std::int64_t n,
                                           std::int64_t k, std::int64_t row0, std::int64_t col0, std::int64_t k0) {
  using storage = typename C::storage;
  constexpr int v = tc_traits<C::precision>::vector;
  storage* sa = stage;
  storage* sb = stage + C::a_elements;
  if constexpr (Vector) {
    constexpr int a_chunks_per_row = block_k / v, b_chunks_per_row = C::block_n / v;
#pragma unroll(C::chunk_unroll)
    for (int chunk = threadIdx.x; chunk < C::block_m * a_chunks_per_row; chunk += C::threads) {
      const int r = chunk / a_chunks_per_row, l = (chunk % a_chunks_per_row) * v;
      const bool inside = row0 + r < m && k0 + l < k;
      cp_async_16(sa + r * C::lda + l, inside ? a + (row0 + r) * k + k0 + l : a, inside ? 16 : 0);
    }
#pragma unroll(C::chunk_unroll)
    for (int chunk = threadIdx.x; chunk < block_k * b_chunks_per_row; chunk += C::threads) {
      const int l = chunk / b_chunks_per_row, col = (chunk % b_chunks_per_row) * v;
      const bool inside = k0 + l < k && col0 + col < n;
      cp_async_16(sb + l * C::ldb + col, inside ? b + (k0 + l) * n + col0 + col : b, inside ? 16 : 0);
    }
  } else {
#pragma unroll(C::chunk_unroll)
    for (int e = threadIdx.x; e < C::block_m * block_k; e += C::threads) {
      const int r = e / block_k, l = e % block_k;
      sa[r * C::lda + l] = row0 + r < m && k0 + l < k ? a[(row0 + r) * k + k0 + l] : storage(0);
    }
#pragma unroll(C::chunk_unroll)
    for (int e = threadIdx.x; e < block_k * C::block_n; e += C::threads) {
      const int l = e / C::block_n, col = e % C::block_n;
      sb[l * C::ldb + col] = k0 + l < k && col0 + col < n ? b[(k0 + l) * n + col0 + col] : storage(0);
    }
  }
}

__device__ __forceinline__ unsigned to_tf32(float x) {
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#else
  KSTUDY_UNREACHABLE_ON_THIS_TARGET();
  return 0u;
#endif
}
// d = a b + d, tf32 inputs (fp32 bit patterns rounded to tf32), f32 accumulators.
__device__ __forceinline__ void mma_tf32_1688(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  KSTUDY_UNREACHABLE_ON_THIS_TARGET();
#endif
}

// Block blockIdx.x of grid_m x grid_n block tiles in grouped order; warp w owns rows (w / warps_n) warp_m
// and columns (w % warps_n) warp_n of the block tile. The pipeline is rung 2's (see wmma_smem_kernel).
template <class C, bool Vector>
__global__ void __launch_bounds__(C::threads, C::min_blocks)
    mma_tuned_kernel(const typename C::storage* __restrict__ a, const typename C::storage* __restrict__ b,
                     float* __restrict__ c, std::int64_t m, std::int64_t n, std::int64_t k, int grid_m, int grid_n,
                     int group_m, bool even_n) {
  using storage = typename C::storage;
  constexpr int stages = C::stages, tiles_m = C::tiles_m, tiles_n = C::tiles_n;
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  storage* smem = reinterpret_cast<storage*>(smem_bytes);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / C::warps_n, wn = warp % C::warps_n;
  const int per_group = group_m * grid_n, first_m = int(blockIdx.x) / per_group * group_m;
  const int group_rows = min(grid_m - first_m, group_m), in_group = int(blockIdx.x) % per_group;
  const std::int64_t row0 = std::int64_t(first_m + in_group % group_rows) * C::block_m;
  const std::int64_t col0 = std::int64_t(in_group / group_rows) * C::block_n;
  const int tiles = static_cast<int>((k + block_k - 1) / block_k);  // k < 2^36: checked in plan()

  float acc[tiles_m][tiles_n][4];
#pragma unroll
  for (int i = 0; i < tiles_m; ++i)
#pragma unroll
    for (int j = 0; j < tiles_n; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // This lane's ldmatrix row address within a 16-row tile: row lane % 16, byte 16 (lane / 16).
  constexpr int per_16_bytes = 16 / int(sizeof(storage));
  const int ld_row = lane % 16, ld_col = (lane / 16) * per_16_bytes;
  const int g = lane / 4, t = lane % 4;

#pragma unroll
  for (int s = 0; s < stages - 1; ++s) {
    if (s < tiles) load_stage<C, Vector>(smem + s * C::stage_elements, a, b, m, n, k, row0, col0, s * block_k);
    cp_async_commit();  // one group per tile, empty past the last, so the wait count stays uniform
  }
  for (int kt = 0; kt < tiles; ++kt) {
    cp_async_wait<stages - 2>();
    __syncthreads();
    const int next = kt + stages - 1;
    if (next < tiles)
      load_stage<C, Vector>(smem + (next % stages) * C::stage_elements, a, b, m, n, k, row0, col0,
                            std::int64_t(next) * block_k);
    cp_async_commit();

    const storage* stage = smem + (kt % stages) * C::stage_elements;
    const storage* sa = stage + (wm * C::warp_m + ld_row) * C::lda + ld_col;
#pragma unroll
    for (int kk = 0; kk < block_k; kk += C::k_step) {
      if constexpr (C::precision == gemm_precision::bf16) {
        const storage* sb = stage + C::a_elements + ld_row * C::ldb + wn * C::warp_n + ld_col;
        unsigned fb[tiles_n / 2][4];  // per n16 pair: b0, b1 of n8 tile 2p, then of 2p + 1
#pragma unroll
        for (int p = 0; p < tiles_n / 2; ++p) ldmatrix_x4_trans(fb[p], sb + kk * C::ldb + p * 16);
#pragma unroll
        for (int i = 0; i < tiles_m; ++i) {
          unsigned fa[4];
          ldmatrix_x4(fa, sa + i * 16 * C::lda + kk);
#pragma unroll
          for (int j = 0; j < tiles_n; ++j)
            mma_bf16_16816(acc[i][j], fa, fb[j / 2][2 * (j % 2)], fb[j / 2][2 * (j % 2) + 1]);
        }
      } else {
        const float* sb = stage + C::a_elements + (kk + t) * C::ldb + wn * C::warp_n + g;
        unsigned fb[tiles_n][2];
#pragma unroll
        for (int j = 0; j < tiles_n; ++j) {
          fb[j][0] = to_tf32(sb[j * 8]);
          fb[j][1] = to_tf32(sb[4 * C::ldb + j * 8]);
        }
#pragma unroll
        for (int i = 0; i < tiles_m; ++i) {
          unsigned fa[4];
          ldmatrix_x4(fa, sa + i * 16 * C::lda + kk);
#pragma unroll
          for (int e = 0; e < 4; ++e) fa[e] = to_tf32(__uint_as_float(fa[e]));
#pragma unroll
          for (int j = 0; j < tiles_n; ++j) mma_tf32_1688(acc[i][j], fa, fb[j][0], fb[j][1]);
        }
      }
    }
  }
  cp_async_wait<0>();  // only empty groups remain; nothing may be in flight when the block exits

#pragma unroll
  for (int i = 0; i < tiles_m; ++i)
#pragma unroll
    for (int j = 0; j < tiles_n; ++j) {
      const std::int64_t row = row0 + wm * C::warp_m + i * 16 + g, col = col0 + wn * C::warp_n + j * 8 + 2 * t;
      store_pair(c, m, n, row, col, acc[i][j][0], acc[i][j][1], even_n);
      store_pair(c, m, n, row + 8, col, acc[i][j][2], acc[i][j][3], even_n);
    }
}

// ---------------------------------------------------------------------------------------------------------
// The rungs

template <gemm_precision P>
class gemm_wmma_naive final : public gemm_tc_base<P> {
 public:
  void enqueue_run() override {
    if (this->empty()) return;
    wmma_naive_kernel<P><<<this->grid(16, 16 * naive_warps, true), naive_warps * 32, 0, this->m_stream>>>(
        this->a(), this->b(), this->m_c, this->m_m, this->m_n, this->m_k, this->vector_ab(), this->vector_c());
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  double calculated_occupancy() const override { return occupancy_of(wmma_naive_kernel<P>, naive_warps * 32, 0); }
};

// The pipelined kernels (rungs 2 and 3) as a Tiling: the block tile, the dynamic shared memory, the
// kernel for vector (cp.async) or scalar tile loads, and the kernel's store flag.
template <gemm_precision P>
struct wmma_tiling {
  static constexpr int block_m = wmma_block_m, block_n = wmma_block_n, bytes = wmma_layout<P>::bytes;
  template <bool Vector>
  static auto kernel() {
    return wmma_smem_kernel<P, Vector>;
  }
  static bool store_flag(std::int64_t n) { return n % 4 == 0; }  // wmma may store C's full tiles directly
};

struct mma_tiling {
  static constexpr int block_m = mma_block_m, block_n = mma_block_n, bytes = mma_layout::bytes;
  template <bool Vector>
  static auto kernel() {
    return mma_bf16_kernel<Vector>;
  }
  static bool store_flag(std::int64_t n) { return n % 2 == 0; }  // float2 stores of accumulator pairs
};

template <gemm_precision P, class Tiling>
class gemm_pipelined final : public gemm_tc_base<P> {
 public:
  void enqueue_run() override {
    if (this->empty()) return;
    const dim3 blocks = this->grid(Tiling::block_m, Tiling::block_n, false);
    const auto kernel = this->vector_ab() ? Tiling::template kernel<true>() : Tiling::template kernel<false>();
    kernel<<<blocks, smem_threads, Tiling::bytes, this->m_stream>>>(
        this->a(), this->b(), this->m_c, this->m_m, this->m_n, this->m_k, Tiling::store_flag(this->m_n));
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  double calculated_occupancy() const override {
    return occupancy_of(this->vector_ab() ? Tiling::template kernel<true>() : Tiling::template kernel<false>(),
                        smem_threads, Tiling::bytes);
  }

 protected:
  // Past 48 KB a block's dynamic shared memory must be allowed explicitly, per kernel.
  void plan() override {
    // The kernels count k-tiles in an int (a 64-bit count cost TF32 a register spill).
    if (this->m_k >= (std::int64_t(1) << 36))
      throw std::invalid_argument(std::string(operation_name(P)) + ": k past 2^36 is beyond the tiled kernels");
    for (const auto kernel : {Tiling::template kernel<true>(), Tiling::template kernel<false>()})
      KSTUDY_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tiling::bytes));
  }
};

// The mma.sync kernel over candidate configurations: prepare() uploads the problem, then times every
// (configuration, group_m) pair with CUDA events on the variant's stream (1 warm-up + 2 launches each) and
// keeps the fastest for run(); tuned_parameters() reports it. The candidates all compute the same sums in
// the same k order, so the choice changes the speed, not the result.
template <gemm_precision P>
struct mma_candidate {
  using storage = typename tc_traits<P>::storage;
  void (*allow_shared)();
  void (*launch)(const storage*, const storage*, float*, std::int64_t, std::int64_t, std::int64_t, bool vector,
                 int group_m, cudaStream_t);
  double (*occupancy)(bool vector);
  int block_m, block_n, warp_m, warp_n, stages, min_blocks;
};

template <class C>
struct mma_candidate_of {
  using storage = typename C::storage;
  // Past 48 KB a block's dynamic shared memory must be allowed explicitly, per kernel; the carveout hint
  // asks for the largest shared-memory split so that min_blocks blocks fit.
  static void allow_shared() {
    for (const auto kernel : {mma_tuned_kernel<C, true>, mma_tuned_kernel<C, false>}) {
      KSTUDY_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::bytes));
      KSTUDY_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    }
  }
  static void launch(const storage* a, const storage* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k,
                     bool vector, int group_m, cudaStream_t stream) {
    const std::int64_t grid_m = (m + C::block_m - 1) / C::block_m, grid_n = (n + C::block_n - 1) / C::block_n;
    if (grid_m * grid_n > max_grid_x)
      throw std::invalid_argument(std::string(operation_name(C::precision)) + ": too large a matrix for one grid");
    const auto kernel = vector ? mma_tuned_kernel<C, true> : mma_tuned_kernel<C, false>;
    kernel<<<static_cast<unsigned>(grid_m * grid_n), C::threads, C::bytes, stream>>>(
        a, b, c, m, n, k, static_cast<int>(grid_m), static_cast<int>(grid_n), group_m, n % 2 == 0);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  static double occupancy(bool vector) {
    return occupancy_of(vector ? mma_tuned_kernel<C, true> : mma_tuned_kernel<C, false>, C::threads, C::bytes);
  }
  static mma_candidate<C::precision> make() {
    return {allow_shared, launch, occupancy, C::block_m, C::block_n, C::warp_m, C::warp_n, C::stages, C::min_blocks};
  }
};

constexpr int raster_groups[] = {1, 8};  // block rows walked together (1: row by row)

// FirstCandidateRung: the earlier rung whose configuration the first of Configs is, run in row-by-row order (0: none);
// tuned_parameters() says so when that candidate wins.
template <gemm_precision P, int FirstCandidateRung, class... Configs>
class gemm_mma_tuned final : public gemm_tc_base<P> {
 public:
  void prepare(const problem_data& problem, const run_options& options) override {
    gemm_tc_base<P>::prepare(problem, options);  // allocates, plan(), uploads
    m_timed = 0;
    if (this->empty() || m_candidates.size() * std::size(raster_groups) == 1) return;
    event_pair events;
    float best_ms = 0.0f;
    for (std::size_t i = 0; i < m_candidates.size(); ++i)
      for (const int group_m : raster_groups) {
        launch(m_candidates[i], group_m);  // warm-up
        KSTUDY_CUDA_CHECK(cudaEventRecord(events.start(), this->m_stream));
        launch(m_candidates[i], group_m);
        launch(m_candidates[i], group_m);
        KSTUDY_CUDA_CHECK(cudaEventRecord(events.stop(), this->m_stream));
        KSTUDY_CUDA_CHECK(cudaEventSynchronize(events.stop()));
        float ms = 0.0f;
        KSTUDY_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start(), events.stop()));
        ++m_timed;
        if ((i == 0 && group_m == raster_groups[0]) || ms < best_ms) {
          best_ms = ms;
          m_chosen = i;
          m_group_m = group_m;
        }
      }
  }
  void enqueue_run() override {
    if (this->empty()) return;
    launch(m_candidates[m_chosen], m_group_m);
  }
  double calculated_occupancy() const override { return m_candidates[m_chosen].occupancy(this->vector_ab()); }
  // The chosen configuration, then how it was chosen: the (configuration, block order) pairs timed, and the
  // earlier rung whose configuration won (0: one of the tuner's own).
  std::vector<std::pair<std::string, std::int64_t>> tuned_parameters() const override {
    const auto& c = m_candidates[m_chosen];
    const bool first = m_chosen == 0 && m_group_m == raster_groups[0];
    return {{"block_m", c.block_m},
            {"block_n", c.block_n},
            {"block_k", block_k},
            {"warp_m", c.warp_m},
            {"warp_n", c.warp_n},
            {"stages", c.stages},
            {"blocks_per_sm", c.min_blocks},
            {"raster_group_m", m_group_m},
            {"candidates", m_timed},
            {"same_as_rung", first ? FirstCandidateRung : 0}};
  }

 protected:
  void plan() override {
    // The kernels count k-tiles in an int.
    if (this->m_k >= (std::int64_t(1) << 36))
      throw std::invalid_argument(std::string(operation_name(P)) + ": k past 2^36 is beyond the tiled kernels");
    for (const auto& c : m_candidates) c.allow_shared();
  }

 private:
  void launch(const mma_candidate<P>& c, int group_m) const {
    c.launch(this->a(), this->b(), this->m_c, this->m_m, this->m_n, this->m_k, this->vector_ab(), group_m,
             this->m_stream);
  }

  const std::vector<mma_candidate<P>> m_candidates{mma_candidate_of<Configs>::make()...};
  std::size_t m_chosen = 0;
  int m_group_m = 1;
  std::int64_t m_timed = 0;  // (configuration, block order) pairs timed in the last prepare()
};

// Candidates: mma_config<P, block_m, block_n, warps_m, warps_n, stages, blocks per SM (__launch_bounds__)>.
// 2 blocks per SM at 256 threads cap registers at 128 (64 x 32 warp tiles: 64 accumulators); 64 x 64 warp
// tiles (128 accumulators) run one 8-warp block or two 4-warp blocks per SM. Shared memory per block in
// the comments (2 blocks must fit in the SM's 228 KB).
using gemm_tf32_mma_variant =
    gemm_mma_tuned<gemm_precision::tf32, /*FirstCandidateRung=*/0,  // rung 2 is WMMA: no earlier mma configuration
                   mma_config<gemm_precision::tf32, 128, 128, 2, 4, 3, 2>,   // 64 x 32 warps, 105 KB
                   mma_config<gemm_precision::tf32, 128, 128, 2, 2, 3, 2>,   // 64 x 64 warps, 4 warps, 105 KB
                   mma_config<gemm_precision::tf32, 128, 256, 2, 4, 3, 1>,   // 64 x 64 warps, 153 KB
                   mma_config<gemm_precision::tf32, 256, 128, 4, 2, 3, 1>>;  // 64 x 64 warps, 159 KB
using gemm_bf16_mma_autotuned_variant =
    gemm_mma_tuned<gemm_precision::bf16, /*FirstCandidateRung=*/3,  // rung 3's block tile, warps, stages and order
                   mma_config<gemm_precision::bf16, 128, 256, 2, 4, 4, 1>,   // rung 3's tiles, 106 KB
                   mma_config<gemm_precision::bf16, 128, 256, 2, 4, 3, 1>,   // 80 KB
                   mma_config<gemm_precision::bf16, 128, 128, 2, 4, 4, 2>,   // 64 x 32 warps, 74 KB
                   mma_config<gemm_precision::bf16, 128, 128, 2, 2, 4, 2>,   // 64 x 64 warps, 4 warps, 74 KB
                   mma_config<gemm_precision::bf16, 256, 128, 4, 2, 4, 1>,   // 114 KB
                   mma_config<gemm_precision::bf16, 256, 128, 4, 2, 3, 1>>;  // 86 KB

// How a cuBLAS rung calls the library. `plain`: cublasGemmEx_64 with the handle's default workspace, the rung as
// first written. `as_torch`: as PyTorch's at::cuda::blas::gemm calls it (issue 43 found torch.matmul up to 1.17x
// faster than `plain` on the same card, and `plain` 13-87 us a call slower than the same process's roof probe,
// which calls cublasGemmEx): the 32-bit entry point wherever the extents fit (the _64 one otherwise),
// CUBLAS_GEMM_DEFAULT_TENSOR_OP, and a workspace of its own set on the handle after its stream (cublasSetStream
// resets the handle to the library's default pool; PyTorch gives every handle 32 MiB on Hopper, from
// CUBLAS_WORKSPACE_CONFIG's default :4096:8). Both are registered, so one archive says which configuration is
// faster, and by how much, before either becomes the vendor's verdict.
enum class cublas_call { plain, as_torch };
constexpr std::size_t torch_workspace_bytes = std::size_t(32) << 20;

template <gemm_precision P, table_layout Layout, cublas_call Call = cublas_call::plain>
class gemm_cublas final : public gemm_tc_base<P> {
 public:
  ~gemm_cublas() override {
    if (m_handle != nullptr) cublasDestroy(m_handle);
  }
  void enqueue_run() override {
    if (this->empty()) return;
    const std::int64_t m = this->m_m, n = this->m_n, k = this->m_k;
    if (this->m_row_major)  // column-major C^T (n x m) = B^T (n x k, ld n) A^T (k x m, ld k)
      gemm(n, m, k, this->m_b, n, this->m_a, k, n);
    else  // column-major C (m x n, ld m) = A (m x k, ld m) B (k x n, ld k)
      gemm(m, n, k, this->m_a, m, this->m_b, k, m);
  }

 protected:
  table_layout layout() const override { return Layout; }
  void plan() override {
    if (m_handle == nullptr) KSTUDY_CUBLAS_CHECK(cublasCreate(&m_handle));
    KSTUDY_CUBLAS_CHECK(cublasSetStream(m_handle, this->m_stream));
    KSTUDY_CUBLAS_CHECK(cublasSetPointerMode(m_handle, CUBLAS_POINTER_MODE_HOST));
    if constexpr (Call == cublas_call::as_torch) {
      // prepare() freed the previous point's arrays, this one's included, before plan().
      m_workspace = this->template device_array<unsigned char>(torch_workspace_bytes);
      KSTUDY_CUBLAS_CHECK(cublasSetWorkspace(m_handle, m_workspace, torch_workspace_bytes));
    }
  }

 private:
  // C (rows x cols, ld ldc) = X (rows x k, ld ldx) Y (k x cols, ld ldy), column-major, float32 C.
  void gemm(std::int64_t rows, std::int64_t cols, std::int64_t k, const void* x, std::int64_t ldx, const void* y,
            std::int64_t ldy, std::int64_t ldc) {
    const float alpha = 1.0f, beta = 0.0f;
    constexpr cudaDataType_t input_type = P == gemm_precision::bf16   ? CUDA_R_16BF
                                          : P == gemm_precision::fp16 ? CUDA_R_16F
                                                                      : CUDA_R_32F;
    constexpr cublasComputeType_t compute = stores_16_bit(P) ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    constexpr std::int64_t int_max = 2147483647;
    const bool fits = rows <= int_max && cols <= int_max && k <= int_max && ldx <= int_max && ldy <= int_max;
    if (Call == cublas_call::as_torch && fits) {
      KSTUDY_CUBLAS_CHECK(cublasGemmEx(m_handle, CUBLAS_OP_N, CUBLAS_OP_N, int(rows), int(cols), int(k), &alpha, x,
                                       input_type, int(ldx), y, input_type, int(ldy), &beta, this->m_c, CUDA_R_32F,
                                       int(ldc), compute, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
      return;
    }
    KSTUDY_CUBLAS_CHECK(cublasGemmEx_64(m_handle, CUBLAS_OP_N, CUBLAS_OP_N, rows, cols, k, &alpha, x, input_type, ldx,
                                        y, input_type, ldy, &beta, this->m_c, CUDA_R_32F, ldc, compute,
                                        CUBLAS_GEMM_DEFAULT));
  }

  cublasHandle_t m_handle = nullptr;
  unsigned char* m_workspace = nullptr;  // as_torch only; one of the variant's arrays, freed with them
};

// ---------------------------------------------------------------------------------------------------------
// Registration

// Declared with their fields in gemm_tensor_cuda_info.cpp, which every build compiles.
template <gemm_precision P>
void bind_precision() {
  const std::string op = operation_name(P);
  variant_binding<gemm_wmma_naive<P>>{op + "_wmma_naive@cuda"};
  variant_binding<gemm_pipelined<P, wmma_tiling<P>>>{op + "_wmma_smem@cuda"};
  if constexpr (P == gemm_precision::bf16) variant_binding<gemm_pipelined<P, mma_tiling>>{op + "_mma_ldmatrix@cuda"};
  if constexpr (P == gemm_precision::tf32)
    variant_binding<gemm_tf32_mma_variant>{op + "_mma@cuda"};
  else
    variant_binding<gemm_bf16_mma_autotuned_variant>{op + "_mma_autotuned@cuda"};
  variant_binding<gemm_cublas<P, table_layout::row_major>>{op + "_cublas_row_major@cuda"};
  variant_binding<gemm_cublas<P, table_layout::feature_major>>{op + "_cublas_feature_major@cuda"};
  variant_binding<gemm_cublas<P, table_layout::row_major, cublas_call::as_torch>>{op + "_cublas_as_torch@cuda"};
}

[[maybe_unused]] const int registered = [] {
  bind_precision<gemm_precision::tf32>();
  bind_precision<gemm_precision::bf16>();
  // gemm_fp16: the vendor rungs only here (its ladder is the Hopper one, gemm_wgmma_cuda.cu).
  variant_binding<gemm_cublas<gemm_precision::fp16, table_layout::row_major>>{"gemm_fp16_cublas_row_major@cuda"};
  variant_binding<gemm_cublas<gemm_precision::fp16, table_layout::feature_major>>{
      "gemm_fp16_cublas_feature_major@cuda"};
  variant_binding<gemm_cublas<gemm_precision::fp16, table_layout::row_major, cublas_call::as_torch>>{
      "gemm_fp16_cublas_as_torch@cuda"};
  return 0;
}();

}  // namespace
}  // namespace kstudy::gemm
