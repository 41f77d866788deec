// kstudy-build: also sm_90a
// Hopper rungs of the 16-bit attention operations (family attention_cuda): the fused kernel on Hopper's own
// instructions, as the gemm_bf16 ladder's wgmma rungs did for GEMM (the mma.sync kernels below them are
// issue-bound: one mma.sync m16n8k16 per 4 KFLOP at 12% occupancy).
//
//  5 attention_{bf16,fp16}[_causal]_wgmma
//    One block of three warpgroups per 128 query rows of a head. A producer warpgroup (registers given back,
//    setmaxnreg.dec 40) loads the block's Q tile once and then K and V tiles of 128 keys by the tensor-memory
//    accelerator (cp.async.bulk.tensor.3d over [heads][tokens][head_dim], 128-byte swizzle, rows past tokens
//    and columns past head_dim zero-filled) into a ring of stages with full / empty mbarriers. Two consumer
//    warpgroups (setmaxnreg.inc 232) own 64 query rows each; per K/V tile:
//      S = Q K^T     wgmma.mma_async m64n128k16, Q and K straight from shared memory (both K-major:
//                    head_dim is contiguous), 64 fp32 accumulators a thread;
//      softmax       online, in registers: the row max over a thread's 32 scores of each of its 2 rows and
//                    two shuffles, exp2 of (s scale log2 e - max), the running sum kept per thread and
//                    reduced once at the end, O rescaled by exp2(old max - new max);
//      O += P V      wgmma.mma_async m64n{64,128}k16 with P as the A operand from registers: the S
//                    accumulator fragment of 16 columns is exactly an A fragment of k 16 (FlashAttention 3's
//                    layout identity), packed to 16 bits; V from shared memory N-major (imm-trans-b 1).
//    The two consumer warpgroups run the same schedule out of phase: while one is in its softmax (no tensor
//    work) the other's wgmma keeps the tensor cores busy. Causal: the block walks only the key tiles up to
//    its last query row, blocks of the last query rows first (they have the most tiles), and masks only the
//    tiles that cross the diagonal or the end of the keys.
//  6 attention_{bf16,fp16}[_causal]_wgmma_pipelined
//    rung 5 with FlashAttention 3's intra-warpgroup pipelining: each warpgroup issues the scores of tile j
//    before P V of tile j - 1 and runs tile j's softmax while the tensor cores do that P V; O is rescaled
//    once P V has retired. P of tile j - 1 stays packed in registers across the step (32 more registers).
//  7 attention_{bf16,fp16}[_causal]_wgmma_pingpong
//    rung 6 with FlashAttention 3's ping-pong: the two consumer warpgroups take turns (named barriers) to
//    issue their wgmma, so one's softmax runs while the other's products occupy the tensor cores, by design
//    rather than by chance.
//  8 attention_{bf16,fp16}[_causal]_wgmma_3wg
//    rung 6 with three consumer warpgroups at head_dim <= 64 (FlashAttention 3's choice there): 192 query
//    rows a block, 512 threads, setmaxnreg 32 / 160 (128 x 512 registers, the whole file), Q loaded as one
//    box of 192 rows, every stage freed by 3 x 128 consumer arrivals. At head_dim 64 a tile's softmax takes
//    as long as its products, so a third warpgroup in flight keeps the tensor cores fed while two are in
//    their softmax; each K/V tile loaded also serves 192 query rows instead of 128. At head_dim 65-128 the
//    rung runs rung 6's two-consumer kernel: O's 64 and S's 64 accumulators and P's 32 registers do not fit
//    160 (ptxas: ~290 bytes of spills and the wgmma serialised for lack of registers), and Q's 48 KB leave
//    room for two stages only. Causal: a warpgroup masks the tiles that cross its own first query row, so
//    the diagonal of a 192-row block (which may end mid-tile) and key tiles wholly above a warpgroup's rows
//    (all -inf: weights 0, the running max and O unchanged) need no special case.
//
// head_dim: compiled for 64 and 128 (any head_dim <= 128: columns past it are zeros that TMA fills and
// nobody stores). TMA needs rows 16 bytes apart: where head_dim is not a multiple of 8, Q, K and V are
// first copied into row-padded buffers on the variant's stream, inside the timed run.
//
// sm_90a only (variants/CMakeLists.txt adds -gencode=arch=compute_90a,code=sm_90a to this file): prepare()
// refuses with variant_unavailable where the loaded image is not sm_90a, so another GPU reports skipped.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention.hpp"
#include "attention/attention_cuda_base.cuh"
#include "kstudy/cuda_escape.hpp"
#include "kstudy/support/cuda_buffers.hpp"
#include "kstudy/support/cuda_variant.hpp"
#include "kstudy/support/hopper_host.hpp"
#include "kstudy/support/hopper_ptx.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/variant_unavailable.hpp"

#if !defined(KSTUDY_HAVE_SM90A)
// A build for another arch binds none of this file's variants (the registration at the end needs sm_90a), so its
// host helpers go unreferenced by design: nvcc's "declared but never referenced" (#177) would otherwise warn an
// sm_80 or sm_120 user about each of them.
#pragma nv_diag_suppress 177
#endif

namespace kstudy::attention {
namespace {

constexpr int wa_keys = 128;                 // keys per K / V tile
constexpr int wa_box_cols = 64;              // 64 16-bit elements: one 128-byte swizzle span
constexpr int wa_box_bytes = wa_keys * 128;  // a K or V box of 128 rows x 64 columns

// D: the compiled head_dim (64 or 128), D / 64 boxes a tile; Consumers: the consumer warpgroups, 64 query rows
// each (the Q box is the block's rows x 64 columns). Stages of K + V tiles beside Q: 4 at 64 (144 KB with two
// consumers, 152 KB with three), 3 at 128 (225 KB of the 227 KB a block may have): the pipelined schedules
// hold a stage one tile longer. Registers (setmaxnreg): the producer's and the consumers' budgets fill the
// register file of one block a multiprocessor, 168 x 384 threads with two consumers, 128 x 512 with three.
template <int D, int Consumers>
struct wa_config {
  static constexpr int consumers = Consumers;
  static constexpr int rows = 64 * Consumers;
  static constexpr int threads = 128 * (1 + Consumers);
  static constexpr int boxes = D / wa_box_cols;
  static constexpr int q_box_bytes = rows * 128;
  static constexpr int q_bytes = boxes * q_box_bytes;
  static constexpr int tile_bytes = boxes * wa_box_bytes;
  static constexpr int stages = D == 64 ? 4 : 3;
  static constexpr int shared_bytes = q_bytes + 2 * stages * tile_bytes + 1024;  // + slack to align to 1,024
  static constexpr int producer_registers = Consumers == 2 ? 40 : 32;
  static constexpr int consumer_registers = Consumers == 2 ? 232 : 160;
  static_assert(Consumers == 2 || Consumers == 3, "two or three consumer warpgroups");
  static_assert(shared_bytes + 256 <= 227 * 1024, "beyond a block's shared memory on sm_90");
  static_assert((producer_registers + Consumers * consumer_registers) * 128 <= 65536, "beyond the register file");
};

// ---------------------------------------------------------------------------------------------------------
// Hopper instructions this kernel alone uses: a 3-D TMA tile load and the m64n128 (S) and m64n{64,128} (O)
// wgmma forms, the latter with A from registers.

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
using namespace kstudy::hopper;

__device__ __forceinline__ void tma_load_3d(std::uint32_t dst, const CUtensorMap* map, int x, int y, int z,
                                            std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(bar)
      : "memory");
}

#define KSTUDY_WA_F8(i)                                                                                       \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define KSTUDY_WA_F32 KSTUDY_WA_F8(0), KSTUDY_WA_F8(8), KSTUDY_WA_F8(16), KSTUDY_WA_F8(24)
#define KSTUDY_WA_F64 KSTUDY_WA_F32, KSTUDY_WA_F8(32), KSTUDY_WA_F8(40), KSTUDY_WA_F8(48), KSTUDY_WA_F8(56)
#define KSTUDY_WA_D32                                                                                         \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31"
#define KSTUDY_WA_D64                                                                       \
  KSTUDY_WA_D32                                                                             \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, " \
  "%49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

// The instruction's type suffix for a 16-bit storage precision.
template <attention_precision P>
struct wa_types;
template <>
struct wa_types<attention_precision::bf16> {
  static constexpr bool is_f16 = false;
};
template <>
struct wa_types<attention_precision::fp16> {
  static constexpr bool is_f16 = true;
};

// S (64 x 128, fp32) = / += A (64 x 16, K-major) B^T (B: 128 x 16, K-major), both from shared memory.
#define KSTUDY_WA_SCORES(TYPES)                                              \
  asm volatile(                                                              \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                           \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32" TYPES " {" KSTUDY_WA_D64 \
      "}, %64, %65, "                                                        \
      "p, 1, 1, 0, 0;\n}\n"                                                  \
      : KSTUDY_WA_F64                                                        \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate))
template <attention_precision P>
__device__ __forceinline__ void wgmma_scores(float (&d)[64], std::uint64_t desc_a, std::uint64_t desc_b,
                                             int accumulate) {
  if constexpr (wa_types<P>::is_f16)
    KSTUDY_WA_SCORES(".f16.f16");
  else
    KSTUDY_WA_SCORES(".bf16.bf16");
}

// O (64 x D, fp32) += A (64 x 16 from registers: 4 registers of two 16-bit values) B (16 x D, N-major):
// SHAPE_TYPES the shape and types, OUT and OUTS the accumulators' operand list and constraints, A the
// operand numbers of A's four registers and B's descriptor.
#define KSTUDY_WA_VALUES(SHAPE_TYPES, OUT, OUTS, A)                                           \
  asm volatile("wgmma.mma_async.sync.aligned." SHAPE_TYPES " {" OUT "}, " A ", 1, 1, 1, 1;\n" \
               : OUTS                                                                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b))
template <attention_precision P, int D>
__device__ __forceinline__ void wgmma_values(float (&d)[D / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b) {
  if constexpr (D == 64) {
    if constexpr (wa_types<P>::is_f16)
      KSTUDY_WA_VALUES("m64n64k16.f32.f16.f16", KSTUDY_WA_D32, KSTUDY_WA_F32, "{%32, %33, %34, %35}, %36");
    else
      KSTUDY_WA_VALUES("m64n64k16.f32.bf16.bf16", KSTUDY_WA_D32, KSTUDY_WA_F32, "{%32, %33, %34, %35}, %36");
  } else {
    if constexpr (wa_types<P>::is_f16)
      KSTUDY_WA_VALUES("m64n128k16.f32.f16.f16", KSTUDY_WA_D64, KSTUDY_WA_F64, "{%64, %65, %66, %67}, %68");
    else
      KSTUDY_WA_VALUES("m64n128k16.f32.bf16.bf16", KSTUDY_WA_D64, KSTUDY_WA_F64, "{%64, %65, %66, %67}, %68");
  }
}
#undef KSTUDY_WA_SCORES
#undef KSTUDY_WA_VALUES
#undef KSTUDY_WA_F8
#undef KSTUDY_WA_F32
#undef KSTUDY_WA_F64
#undef KSTUDY_WA_D32
#undef KSTUDY_WA_D64

// Two floats as a pair of 16-bit values, lo in the low half (the lower column of an A fragment register).
template <attention_precision P>
__device__ __forceinline__ std::uint32_t pack_pair(float lo, float hi) {
  if constexpr (wa_types<P>::is_f16) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  }
}
template <attention_precision P>
__device__ __forceinline__ std::uint16_t to_bits(float x) {
  if constexpr (wa_types<P>::is_f16)
    return __half_as_ushort(__float2half_rn(x));
  else
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
#endif

// How a consumer warpgroup orders its work: rung 5, 6 and 7.
enum class schedule { serial, pipelined, ping_pong };

// The softmax state of a thread's two rows: maxima in the log2 domain (scores times scale log2 e), and the
// thread's partial sums of exp2(score - max), reduced over the row's four lanes once at the end.
struct row_state {
  float max0, max1, sum0, sum1;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Keys past the end, and with the causal mask keys past the query, score -inf. Slice i of the S fragment
// holds columns key0 + 8 i + col + {0, 1} of the thread's rows query0 (sc[4 i], sc[4 i + 1]) and query1.
template <bool Causal>
__device__ __forceinline__ void mask_scores(float (&sc)[64], int key0, int col, int tokens, int query0, int query1) {
#pragma unroll
  for (int i = 0; i < 16; ++i)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int key = key0 + 8 * i + col + e;
      if (key >= tokens || (Causal && key > query0)) sc[4 * i + e] = -INFINITY;
      if (key >= tokens || (Causal && key > query1)) sc[4 * i + 2 + e] = -INFINITY;
    }
}

// 2^x by the special-function unit alone (MUFU.EX2, ~2 ulp): exp2f's non-ftz form adds a range check and two
// multiplies per call to produce subnormal results, which the gate's 2^-96 absolute term already allows to be 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// One tile of the online softmax: the new row maxima (scale > 0, so the max of the scores scales), the
// scores replaced by exp2(s scale log2 e - max), the sums updated; returns each row's correction
// exp2(old max - new max) for O. Every row has a key in its first tile (key 0), so the maxima are finite.
__device__ __forceinline__ float2 softmax_step(float (&sc)[64], row_state& rows, float scale_log2) {
  float tile0 = -INFINITY, tile1 = -INFINITY;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    tile0 = fmaxf(tile0, fmaxf(sc[4 * i], sc[4 * i + 1]));
    tile1 = fmaxf(tile1, fmaxf(sc[4 * i + 2], sc[4 * i + 3]));
  }
#pragma unroll
  for (int offset = 1; offset < 4; offset *= 2) {
    tile0 = fmaxf(tile0, __shfl_xor_sync(0xffffffffu, tile0, offset));
    tile1 = fmaxf(tile1, __shfl_xor_sync(0xffffffffu, tile1, offset));
  }
  const float new0 = fmaxf(rows.max0, tile0 * scale_log2), new1 = fmaxf(rows.max1, tile1 * scale_log2);
  const float2 correction = make_float2(fast_exp2(rows.max0 - new0), fast_exp2(rows.max1 - new1));
  rows.max0 = new0;
  rows.max1 = new1;
  float add0 = 0.0f, add1 = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    sc[4 * i] = fast_exp2(fmaf(sc[4 * i], scale_log2, -new0));
    sc[4 * i + 1] = fast_exp2(fmaf(sc[4 * i + 1], scale_log2, -new0));
    sc[4 * i + 2] = fast_exp2(fmaf(sc[4 * i + 2], scale_log2, -new1));
    sc[4 * i + 3] = fast_exp2(fmaf(sc[4 * i + 3], scale_log2, -new1));
    add0 += sc[4 * i] + sc[4 * i + 1];
    add1 += sc[4 * i + 2] + sc[4 * i + 3];
  }
  rows.sum0 = rows.sum0 * correction.x + add0;
  rows.sum1 = rows.sum1 * correction.y + add1;
  return correction;
}

__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <int D>
__device__ __forceinline__ void rescale(float (&o_acc)[D / 2], float2 correction) {
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    o_acc[4 * i] *= correction.x;
    o_acc[4 * i + 1] *= correction.x;
    o_acc[4 * i + 2] *= correction.y;
    o_acc[4 * i + 3] *= correction.y;
  }
}

// P as the A operand of 8 k16 steps: columns 16 kk .. 16 kk + 15 are S slices 2 kk and 2 kk + 1, whose
// fragment is exactly an A fragment (rows g and g + 8, columns 2 t and 2 t + 1, then 8 columns on).
template <attention_precision P>
__device__ __forceinline__ void pack_probabilities(std::uint32_t (&pa)[wa_keys / 16][4], const float (&sc)[64]) {
#pragma unroll
  for (int kk = 0; kk < wa_keys / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pa[kk][r] = pack_pair<P>(sc[8 * kk + 2 * r], sc[8 * kk + 2 * r + 1]);
}
#endif

// 1 where this kernel image is sm_90a code (the kernel below is empty in any other).
__global__ void sm90a_probe(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = 1;
#else
  *out = 0;
#endif
}

// ---------------------------------------------------------------------------------------------------------
// The kernel

template <attention_precision P, int D, bool Causal, schedule Schedule, int Consumers>
__global__ void __launch_bounds__(wa_config<D, Consumers>::threads, 1)
    attention_wgmma_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                           const __grid_constant__ CUtensorMap v_map, std::uint16_t* __restrict__ o, int tokens,
                           int head_dim, int query_blocks, float scale_log2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using cfg = wa_config<D, Consumers>;
  constexpr int stages = cfg::stages, rows_per_block = cfg::rows;
  extern __shared__ unsigned char shared_raw[];
  __shared__ alignas(8) std::uint64_t q_full, full[stages], empty[stages];
  const std::uint32_t base = (shared_address(shared_raw) + 1023u) & ~1023u;  // swizzle atoms: 1,024 bytes
  const std::uint32_t q_tile = base;
  const auto k_tile = [&](int s) { return base + std::uint32_t(cfg::q_bytes + 2 * s * cfg::tile_bytes); };
  const auto v_tile = [&](int s) { return base + std::uint32_t(cfg::q_bytes + (2 * s + 1) * cfg::tile_bytes); };

  const int head = static_cast<int>(blockIdx.x) / query_blocks;
  int query_block = static_cast<int>(blockIdx.x) % query_blocks;
  if constexpr (Causal) query_block = query_blocks - 1 - query_block;  // the most key tiles first
  const int row0 = query_block * rows_per_block;
  const int key_end = Causal ? min(tokens, row0 + rows_per_block) : tokens;
  const int key_tiles = (key_end + wa_keys - 1) / wa_keys;

  if (threadIdx.x == 0) {
    barrier_init(shared_address(&q_full), 1);
    for (int s = 0; s < stages; ++s) {
      barrier_init(shared_address(&full[s]), 1);
      barrier_init(shared_address(&empty[s]), Consumers * 128);  // every consumer thread frees a stage
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the copy engine
  }
  __syncthreads();

  if (threadIdx.x < 128) {  // the producer warpgroup
    registers_down<cfg::producer_registers>();
    if (threadIdx.x == 0) {
      const std::uint32_t qbar = shared_address(&q_full);
      barrier_expect_bytes(qbar, cfg::q_bytes);
#pragma unroll
      for (int b = 0; b < cfg::boxes; ++b)
        tma_load_3d(q_tile + b * cfg::q_box_bytes, &q_map, b * wa_box_cols, row0, head, qbar);
      for (int j = 0; j < key_tiles; ++j) {
        const int s = j % stages;
        if (j >= stages) barrier_wait(shared_address(&empty[s]), ((j / stages) - 1) & 1);
        const std::uint32_t bar = shared_address(&full[s]);
        barrier_expect_bytes(bar, 2 * cfg::tile_bytes);  // zero-filled elements are counted too
#pragma unroll
        for (int b = 0; b < cfg::boxes; ++b) {
          tma_load_3d(k_tile(s) + b * wa_box_bytes, &k_map, b * wa_box_cols, j * wa_keys, head, bar);
          tma_load_3d(v_tile(s) + b * wa_box_bytes, &v_map, b * wa_box_cols, j * wa_keys, head, bar);
        }
      }
    }
    return;
  }
  registers_up<cfg::consumer_registers>();

  const int consumer = static_cast<int>(threadIdx.x) / 128 - 1;
  const int warp = (static_cast<int>(threadIdx.x) % 128) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  // This thread's two rows (of the fragments' 16 a warp) and its first column of each 8-column slice.
  const int query0 = row0 + consumer * 64 + warp * 16 + lane / 4, query1 = query0 + 8;
  const int col = 2 * (lane % 4);
  const int first_query = row0 + consumer * 64;  // of this warpgroup

  float o_acc[D / 2];  // m64nD fp32 accumulators a thread
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o_acc[i] = 0.0f;
  row_state rows{-INFINITY, -INFINITY, 0.0f, 0.0f};

  barrier_wait(shared_address(&q_full), 0);
  const std::uint32_t q_rows = q_tile + consumer * 64 * 128;
  const auto issue_scores = [&](float(&sc)[64], int s) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {  // a step of 16 columns: +32 bytes inside a 128-byte span, 4 a box
      const std::uint32_t q_step = (kk / 4) * cfg::q_box_bytes + (kk % 4) * 32;
      const std::uint32_t k_step = (kk / 4) * wa_box_bytes + (kk % 4) * 32;
      wgmma_scores<P>(sc, matrix_descriptor(q_rows + q_step, 16, 1024), matrix_descriptor(k_tile(s) + k_step, 16, 1024),
                      kk > 0 ? 1 : 0);
    }
    wgmma_commit();
  };
  const auto issue_values = [&](const std::uint32_t(&pa)[wa_keys / 16][4], int s) {
#pragma unroll
    for (int kk = 0; kk < wa_keys / 16; ++kk)  // 16 keys a step: +16 rows of 128 bytes
      wgmma_values<P, D>(o_acc, pa[kk], matrix_descriptor(v_tile(s) + kk * 16 * 128, wa_box_bytes, 1024));
    wgmma_commit();
  };
  const auto mask = [&](float(&sc)[64], int j) {
    const int key0 = j * wa_keys;
    if (key0 + wa_keys > tokens || (Causal && key0 + wa_keys - 1 > first_query))
      mask_scores<Causal>(sc, key0, col, tokens, query0, query1);
  };
  std::uint32_t pa[wa_keys / 16][4];

  if constexpr (Schedule == schedule::serial) {
    // Rung 5: per tile, S = Q K^T, wait; softmax; O += P V, wait; the stage is free.
    for (int j = 0; j < key_tiles; ++j) {
      const int s = j % stages;
      barrier_wait(shared_address(&full[s]), (j / stages) & 1);
      float sc[64];
      wgmma_fence();
      issue_scores(sc, s);
      wgmma_wait<0>();
      mask(sc, j);
      const float2 correction = softmax_step(sc, rows, scale_log2);
      rescale<D>(o_acc, correction);
      pack_probabilities<P>(pa, sc);  // before the fence: a register written between two wgmma serialises them
      wgmma_fence();
      issue_values(pa, s);
      wgmma_wait<0>();
      barrier_arrive(shared_address(&empty[s]));
    }
  } else {
    // Rung 6: the scores of tile j are issued before P V of tile j - 1, and tile j's softmax runs while the
    // tensor cores do that P V (FlashAttention 3's intra-warpgroup pipelining). O is rescaled by tile j's
    // correction only once P V of j - 1 has retired.
    // Rung 7 adds FlashAttention 3's ping-pong between the two warpgroups: a warpgroup issues its wgmma only in
    // its turn (named barrier 1 + consumer) and hands the turn over once they are issued, so that one
    // warpgroup's softmax runs while the other's products keep the tensor cores busy. Turns: the first tile's
    // scores, one per later tile, the last P V; consumer 1 gives consumer 0 the first turn and keeps its last.
    constexpr bool ping_pong = Schedule == schedule::ping_pong;
    static_assert(!ping_pong || Consumers == 2, "the ping-pong hands turns between two consumer warpgroups");
    const int turns = key_tiles + 1;
    int turn = 0;
    const auto take_turn = [&] {
      if constexpr (ping_pong) named_barrier_sync(1 + consumer, 256);
    };
    const auto give_turn = [&] {
      if constexpr (ping_pong)
        if (!(consumer == 1 && turn == turns - 1)) named_barrier_arrive(2 - consumer, 256);
      ++turn;
    };
    if (ping_pong && consumer == 1) named_barrier_arrive(1, 256);
    {
      barrier_wait(shared_address(&full[0]), 0);
      float sc[64];
      take_turn();
      wgmma_fence();
      issue_scores(sc, 0);
      give_turn();
      wgmma_wait<0>();
      mask(sc, 0);
      softmax_step(sc, rows, scale_log2);  // O is still zero: nothing to rescale
      pack_probabilities<P>(pa, sc);
    }
    for (int j = 1; j < key_tiles; ++j) {
      const int s = j % stages, previous = (j - 1) % stages;
      barrier_wait(shared_address(&full[s]), (j / stages) & 1);
      float sc[64];
      take_turn();
      wgmma_fence();
      issue_scores(sc, s);
      issue_values(pa, previous);
      give_turn();
      wgmma_wait<1>();  // groups retire in order: the scores are ready, P V may still run
      mask(sc, j);
      const float2 correction = softmax_step(sc, rows, scale_log2);
      wgmma_wait<0>();
      barrier_arrive(shared_address(&empty[previous]));
      rescale<D>(o_acc, correction);
      pack_probabilities<P>(pa, sc);
    }
    take_turn();
    wgmma_fence();
    issue_values(pa, (key_tiles - 1) % stages);
    give_turn();
    wgmma_wait<0>();
    barrier_arrive(shared_address(&empty[(key_tiles - 1) % stages]));
  }
  float sum0 = rows.sum0, sum1 = rows.sum1;

  // O = acc / sum: the row sums are the four lanes' partial sums; rows below tokens, columns below head_dim.
#pragma unroll
  for (int offset = 1; offset < 4; offset *= 2) {
    sum0 += __shfl_xor_sync(0xffffffffu, sum0, offset);
    sum1 += __shfl_xor_sync(0xffffffffu, sum1, offset);
  }
  const float inverse0 = 1.0f / sum0, inverse1 = 1.0f / sum1;
  const bool pairs = head_dim % 2 == 0;
  const std::int64_t head_base = std::int64_t(head) * tokens;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int query = r == 0 ? query0 : query1;
    if (query >= tokens) continue;
    const float inverse = r == 0 ? inverse0 : inverse1;
    std::uint16_t* orow = o + (head_base + query) * head_dim;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int c = 8 * i + col;
      if (c >= head_dim) continue;
      const float lo = o_acc[4 * i + 2 * r] * inverse, hi = o_acc[4 * i + 2 * r + 1] * inverse;
      if (pairs) {
        *reinterpret_cast<std::uint32_t*>(orow + c) = pack_pair<P>(lo, hi);
      } else {
        orow[c] = to_bits<P>(lo);
        if (c + 1 < head_dim) orow[c + 1] = to_bits<P>(hi);
      }
    }
  }
#else
  (void)q_map, (void)k_map, (void)v_map, (void)o, (void)tokens, (void)head_dim, (void)query_blocks, (void)scale_log2;
#endif
}

// ---------------------------------------------------------------------------------------------------------
// Host side

// A 3-D tensor map over [heads][tokens][head_dim] 16-bit elements whose rows lie `pitch` elements apart, read in
// boxes of 64 columns x box_rows rows of one head with the 128-byte swizzle the wgmma descriptors expect.
CUtensorMap tensor_map(const std::uint16_t* data, std::int64_t heads, std::int64_t tokens, std::int64_t head_dim,
                       std::int64_t pitch, int box_rows, CUtensorMapDataType type) {
  CUtensorMap map{};
  const cuuint64_t extent[3] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(tokens),
                                static_cast<cuuint64_t>(heads)};
  const cuuint64_t stride[2] = {static_cast<cuuint64_t>(pitch) * 2, static_cast<cuuint64_t>(pitch * tokens) * 2};
  const cuuint32_t box[3] = {wa_box_cols, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t element_stride[3] = {1, 1, 1};
  const CUresult result =
      kstudy::hopper::tensor_map_encoder()(&map, type, 3, const_cast<std::uint16_t*>(data), extent, stride, box,
                                           element_stride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    throw std::runtime_error("attention wgmma: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(result) +
                             ") for " + std::to_string(heads) + " x " + std::to_string(tokens) + " x " +
                             std::to_string(head_dim));
  return map;
}

// Consumers64: the consumer warpgroups at head_dim <= 64 (2: 128 query rows a block, 3: 192); head_dim 128
// always runs two (three would need O's 64 and S's 64 accumulators and P's 32 registers in 160).
template <attention_precision P, attention_mask M, schedule Schedule, int Consumers64 = 2>
class attention_wgmma final : public attention_cuda_base<P, M> {
  using base = attention_cuda_base<P, M>;
  static constexpr bool causal = M == attention_mask::causal;
  template <int D>
  using config = wa_config<D, D == 64 ? Consumers64 : 2>;

 public:
  void enqueue_run() override {
    const std::int64_t h = this->m_heads, t = this->m_tokens, d = this->m_head_dim;
    if (m_q_padded != nullptr) {  // rows m_pitch elements apart for TMA; the padding is never read
      const std::uint16_t* sources[3] = {this->m_q, this->m_k, this->m_v};
      std::uint16_t* targets[3] = {m_q_padded, m_k_padded, m_v_padded};
      for (int i = 0; i < 3; ++i)
        KSTUDY_CUDA_CHECK(cudaMemcpy2DAsync(targets[i], m_pitch * 2, sources[i], d * 2, d * 2, h * t,
                                            cudaMemcpyDeviceToDevice, this->m_stream));
    }
    m_launch(m_q_map, m_k_map, m_v_map, this->m_o, static_cast<int>(t), static_cast<int>(d), m_query_blocks,
             m_scale_log2, m_grid, this->m_stream);
  }
  double calculated_occupancy() const override { return this->m_head_dim <= 64 ? occupancy<64>() : occupancy<128>(); }
  std::vector<std::pair<std::string, std::int64_t>> tuned_parameters() const override {
    const bool narrow = this->m_head_dim <= 64;
    return {{"block_queries", narrow ? config<64>::rows : config<128>::rows},
            {"consumer_warpgroups", narrow ? config<64>::consumers : config<128>::consumers},
            {"block_keys", wa_keys},
            {"compiled_head_dim", narrow ? 64 : 128},
            {"stages", narrow ? config<64>::stages : config<128>::stages},
            {"schedule", static_cast<std::int64_t>(Schedule)},  // 0 serial, 1 pipelined, 2 ping-pong
            {"padded_copies", m_q_padded != nullptr ? 3 : 0}};
  }

 protected:
  void check_shape(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim) const override {
    base::check_shape(heads, tokens, head_dim);
    const std::string op = operation_name(P, M);
    if (head_dim > 128)
      throw std::invalid_argument(op + " wgmma: head_dim " + std::to_string(head_dim) + " is over 128");
    if (tokens > INT_MAX / 2 || heads > INT_MAX)
      throw std::invalid_argument(op + " wgmma: tokens and heads must be below 2^30 (TMA coordinates)");
    constexpr int smallest_rows = 128;  // the most blocks: every configuration has at least 128 rows a block
    static_assert(config<64>::rows >= smallest_rows && config<128>::rows >= smallest_rows, "rows a block");
    if (heads > INT_MAX / ((tokens + smallest_rows - 1) / smallest_rows))
      throw std::invalid_argument(op + " wgmma: too many blocks for one grid");
  }
  void plan() override {
    if (!kstudy::hopper::sm90a_image_runs(sm90a_probe))
      throw variant_unavailable(
          "no sm_90a code runs on this GPU (wgmma needs compute capability 9.0 and a build with "
          "-gencode=arch=compute_90a,code=sm_90a)");
    const std::int64_t h = this->m_heads, t = this->m_tokens, d = this->m_head_dim;
    if (d <= 64)
      choose<64>();
    else
      choose<128>();
    m_query_blocks = static_cast<int>((t + m_rows - 1) / m_rows);
    m_grid = static_cast<unsigned>(h * m_query_blocks);
    m_scale_log2 = this->m_scale * 1.4426950408889634f;
    m_pitch = (d + 7) / 8 * 8;
    release();
    const std::uint16_t *q = this->m_q, *k = this->m_k, *v = this->m_v;
    if (m_pitch != d) {
      kstudy::device_alloc(m_q_padded, h * t * m_pitch);
      kstudy::device_alloc(m_k_padded, h * t * m_pitch);
      kstudy::device_alloc(m_v_padded, h * t * m_pitch);
      q = m_q_padded;
      k = m_k_padded;
      v = m_v_padded;
    }
    constexpr CUtensorMapDataType type =
        P == attention_precision::fp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    m_q_map = tensor_map(q, h, t, d, m_pitch, m_rows, type);
    m_k_map = tensor_map(k, h, t, d, m_pitch, wa_keys, type);
    m_v_map = tensor_map(v, h, t, d, m_pitch, wa_keys, type);
  }
  void release() override {
    kstudy::device_free(m_q_padded);
    kstudy::device_free(m_k_padded);
    kstudy::device_free(m_v_padded);
  }

 private:
  using launcher = void (*)(const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, std::uint16_t*, int, int, int,
                            float, unsigned, cudaStream_t);
  template <int D>
  static void launch(const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v, std::uint16_t* o, int tokens,
                     int head_dim, int query_blocks, float scale_log2, unsigned grid, cudaStream_t stream) {
    attention_wgmma_kernel<P, D, causal, Schedule, config<D>::consumers>
        <<<grid, config<D>::threads, config<D>::shared_bytes, stream>>>(q, k, v, o, tokens, head_dim, query_blocks,
                                                                        scale_log2);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  template <int D>
  void choose() {
    KSTUDY_CUDA_CHECK(cudaFuncSetAttribute(attention_wgmma_kernel<P, D, causal, Schedule, config<D>::consumers>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, config<D>::shared_bytes));
    m_launch = &launch<D>;
    m_rows = config<D>::rows;
  }
  template <int D>
  double occupancy() const {
    int blocks = 0;
    KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, attention_wgmma_kernel<P, D, causal, Schedule, config<D>::consumers>, config<D>::threads,
        config<D>::shared_bytes));
    return double(blocks * config<D>::threads) /
           double(kstudy::device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor));
  }

  launcher m_launch = nullptr;
  CUtensorMap m_q_map{}, m_k_map{}, m_v_map{};
  std::uint16_t *m_q_padded = nullptr, *m_k_padded = nullptr, *m_v_padded = nullptr;
  std::int64_t m_pitch = 0;
  int m_rows = 128;  // query rows a block
  int m_query_blocks = 1;
  unsigned m_grid = 1;
  float m_scale_log2 = 1.0f;
};

// ---------------------------------------------------------------------------------------------------------
// Registration (builds that compiled this file for sm_90a: KSTUDY_HAVE_SM90A, set by cmake/kstudy_cuda_targets.cmake);
// the fields are declared in attention_wgmma_cuda_info.cpp, compiled in every build.
#if defined(KSTUDY_HAVE_SM90A)
template <attention_precision P, attention_mask M>
void bind_rungs() {
  const std::string name = operation_name(P, M);
  variant_binding<attention_wgmma<P, M, schedule::serial>>{name + "_wgmma@cuda"};
  variant_binding<attention_wgmma<P, M, schedule::pipelined>>{name + "_wgmma_pipelined@cuda"};
  variant_binding<attention_wgmma<P, M, schedule::ping_pong>>{name + "_wgmma_pingpong@cuda"};
  variant_binding<attention_wgmma<P, M, schedule::pipelined, 3>>{name + "_wgmma_3wg@cuda"};
}
[[maybe_unused]] const int registered = [] {
  bind_rungs<attention_precision::bf16, attention_mask::none>();
  bind_rungs<attention_precision::fp16, attention_mask::none>();
  bind_rungs<attention_precision::bf16, attention_mask::causal>();
  bind_rungs<attention_precision::fp16, attention_mask::causal>();
  return 0;
}();
#endif

}  // namespace
}  // namespace kstudy::attention
