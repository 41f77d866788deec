// kstudy-build: also sm_90a
// Hopper rungs of gemm_bf16 (family gemm_tensor_cuda, after gemm_tensor_cuda.cu's mma.sync rungs 1-4):
// the multiply on Hopper's own instructions, which cuBLAS uses and mma.sync cannot reach (lab II: rung 4 at
// 0.35x cuBLAS, issuing mma.sync at 12% occupancy). gemm_fp16 runs rungs 5 to 8 unchanged but for the
// instruction (m64n256k16.f32.f16.f16) and the tensor maps' element type: binary16 has bfloat16's size and
// the same wgmma operand rules (16-bit, imm-trans-b allowed), so tiles, swizzle and descriptors are BF16's.
//
//  5 gemm_bf16_wgmma_tma  block tile 128 x 256 x 64, two warpgroups of 64 x 256 each issuing
//                         wgmma.mma_async m64n256k16 (A and B straight from shared memory through matrix
//                         descriptors, 128 fp32 accumulators a thread); the tiles arrive by the tensor-memory
//                         accelerator (cp.async.bulk.tensor.2d, 128-byte swizzle, edges zero-filled by TMA)
//                         into 4 shared-memory stages, each with a "full" mbarrier the copy engine completes
//                         (expect_tx bytes) and an "empty" one the 256 consumer threads arrive on. Thread 0 also
//                         issues the copies: the loads of tile kt + 4 wait until every thread has finished
//                         tile kt.
//  6 gemm_bf16_wgmma_ws   rung 5 with warp specialisation: a third (producer) warpgroup issues the copies,
//                         its registers given back (setmaxnreg.dec 40) so that the two consumer warpgroups
//                         hold 232 each (setmaxnreg.inc); consumers keep one wgmma group in flight
//                         (wait_group 1) and release a stage as soon as the group that read it retires.
//  7 gemm_bf16_wgmma_cluster  rung 6 in clusters of 2 blocks along m (cudaLaunchKernelEx, cluster dims 2 x 1 x 1),
//                         which share B's tile: each block loads its own A box and 2 of B's 4 boxes, multicast
//                         by TMA into both blocks (.multicast::cluster), so B crosses from L2 once per pair. A
//                         stage is refilled once the consumers of both blocks are done with it: one lane of each
//                         consumer warp arrives on each block's "empty" barrier (mapa + a remote arrive). The
//                         m tiles are padded to whole pairs: a block below C loads zeros and stores nothing.
//  8 gemm_bf16_wgmma_persistent  rung 7 on a persistent grid (as many clusters as fit at once,
//                         cudaOccupancyMaxActiveClusters), each looping over the grouped order's tiles; the stage
//                         counters run on across tiles, so the producer loads the next tile's first stages while
//                         the consumers store the current one.
//
// Operands: row-major A (m x k) is K-major: each 128-byte row of a 64-wide k tile is one swizzle span, 8
// rows a 1,024-byte atom (descriptor SBO 1,024; a k16 step is +32 bytes inside the span). Row-major B
// (k x n) is N-major (wgmma's imm-trans-b = 1, allowed for 16-bit types): TMA boxes of 64 columns x 64 k
// rows, 8 KB each, 4 per stage; the descriptor's LBO (8,192 bytes) steps from one 64-column box to the next,
// SBO (1,024) from one 8-row group of k to the next (CUTLASS's canonical MN-major SW128 layout), a k16 step
// is +2,048 bytes. TMA needs 16-byte row strides: where k (A) or n (B) is not a multiple of 8, that matrix is
// first copied into a row-padded buffer on the variant's stream (cudaMemcpy2DAsync, inside the timed run),
// whose padding the tensor map never reads (its extent is the real k or n; past it, TMA fills zeros).
//
// sm_90a only (-gencode=arch=compute_90a,code=sm_90a, added to this file by variants/CMakeLists.txt; the
// same file also compiles for the target's plain sm_90, where these kernels are empty): prepare() runs a
// probe kernel and refuses, with a message, where the loaded image is not sm_90a (another GPU, or the
// driver choosing the sm_90 image) by throwing variant_unavailable: the runner records the variant as
// skipped there and the tests skip it, so a wrong image is never timed and another GPU never fails.
#include <cuda.h>  // CUtensorMap and its enums (the encoder is reached through the runtime, not libcuda)
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gemm/gemm.hpp"
#include "gemm/gemm_tensor_common.cuh"
#include "kstudy/cuda_escape.hpp"
#include "kstudy/support/cuda_buffers.hpp"
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

namespace kstudy::gemm {
namespace {

using namespace tensor;

constexpr int wg_block_m = 128, wg_block_n = 256, wg_stages = 4;
constexpr int wg_consumers = 2;  // warpgroups that multiply, 64 rows of C each
constexpr int span_bytes = 128;  // a 128-byte swizzle span: one k tile row of A (and of K-major B)
constexpr int a_stage_bytes = wg_block_m * span_bytes;           // 16 KB
constexpr int b_stage_bytes = wg_block_n * span_bytes;           // 32 KB
constexpr int b_box_cols = 64;                                   // N-major B (16-bit): boxes of 64 columns (128 bytes)
constexpr int stage_bytes = a_stage_bytes + b_stage_bytes;       // what one stage's full barrier expects
constexpr int wg_shared_bytes = wg_stages * stage_bytes + 1024;  // + slack to align stages to 1,024 bytes
constexpr int wg_group_m = 8;                                    // block rows walked together (L2 reuse)
[[maybe_unused]] constexpr int k_steps =
    4;  // instructions per k tile: 16 bf16 / fp16 or 8 tf32 elements, 32 bytes of the span each

// Per precision: the k tile (one 128-byte span), whether B is read K-major (TF32: wgmma has no transposed TF32
// form, so row-major B is first transposed into B^T on the stream) or N-major as it lies (BF16 and FP16,
// imm-trans-b).
template <gemm_precision P>
struct wg_traits;
template <>
struct wg_traits<gemm_precision::bf16> {
  static constexpr int block_k = span_bytes / 2;  // 64
  static constexpr bool b_k_major = false;
  static constexpr CUtensorMapDataType map_type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
};
template <>
struct wg_traits<gemm_precision::fp16> {
  static constexpr int block_k = span_bytes / 2;  // 64
  static constexpr bool b_k_major = false;
  static constexpr CUtensorMapDataType map_type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
};
template <>
struct wg_traits<gemm_precision::tf32> {
  static constexpr int block_k = span_bytes / 4;  // 32
  static constexpr bool b_k_major = true;
  static constexpr CUtensorMapDataType map_type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
};
constexpr int b_box_bytes = wg_traits<gemm_precision::bf16>::block_k * b_box_cols * 2;  // 8 KB
static_assert(a_stage_bytes % 1024 == 0 && b_box_bytes % 1024 == 0 && wg_block_n % b_box_cols == 0);

// ---------------------------------------------------------------------------------------------------------
// The multiply of one k tile (PTX wrappers: kstudy/support/hopper_ptx.hpp)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
using namespace kstudy::hopper;

// The k steps of one k tile: a consumer's 64 A rows start at a_rows, B's tile at b_tile. A (and K-major B):
// rows of one 128-byte span, 8 rows a 1,024-byte atom (SBO), a step +32 bytes inside the span. N-major B: 64-column
// boxes 8 KB apart (LBO), 8 k rows an atom (SBO), a step of 16 k rows +2,048 bytes.
template <gemm_precision P>
__device__ __forceinline__ void multiply_tile(float (&d)[128], std::uint32_t a_rows, std::uint32_t b_tile) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < k_steps; ++kk) {
    const std::uint64_t a = matrix_descriptor(a_rows + kk * 32, 16, 1024);
    if constexpr (P == gemm_precision::tf32)
      wgmma_m64n256k8_tf32(d, a, matrix_descriptor(b_tile + kk * 32, 16, 1024), 1);
    else if constexpr (P == gemm_precision::fp16)
      wgmma_m64n256k16_f16(d, a, matrix_descriptor(b_tile + kk * 16 * span_bytes, b_box_bytes, 1024), 1);
    else
      wgmma_m64n256k16_bf16(d, a, matrix_descriptor(b_tile + kk * 16 * span_bytes, b_box_bytes, 1024), 1);
  }
  wgmma_commit();
}
#endif

// ---------------------------------------------------------------------------------------------------------
// The kernel: Specialized = false is rung 5 (2 warpgroups, thread 0 also loads), true is rung 6 (a producer
// warpgroup and 2 consumers); ClusterM = 2 pairs blocks along m in a cluster that shares B's tiles (rung 7), and
// Persistent loops each cluster over tiles, its stage counters running on from one tile to the next (rung 8).

// 1 where this kernel image is sm_90a code (the wgmma kernels below are empty in any other).
__global__ void sm90a_probe(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = 1;
#else
  *out = 0;
#endif
}

template <gemm_precision P, bool Specialized, int ClusterM = 1, bool Persistent = false>
__global__ void __launch_bounds__(Specialized ? 384 : 256, 1)
    wgmma_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                 float* __restrict__ c, int m, int n, int k, bool even_n) {
  // A cluster shares B's N-major boxes, a share each (TF32's K-major B^T is one box).
  static_assert(ClusterM == 1 || (Specialized && !wg_traits<P>::b_k_major &&
                                  (wg_block_n / b_box_cols) % ClusterM == 0 && wg_group_m % ClusterM == 0));
  static_assert(!Persistent || Specialized);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char shared_raw[];
  __shared__ alignas(8) std::uint64_t full[wg_stages], empty[wg_stages];
  const std::uint32_t base = (shared_address(shared_raw) + 1023u) & ~1023u;  // 128-byte swizzle atoms: 1 KB
  const int rank = ClusterM == 1 ? 0 : static_cast<int>(cluster_rank());

  // Grouped order: wg_group_m block rows (wg_group_m / ClusterM cluster rows) walk the block columns together,
  // sharing B's tiles in L2. Cluster tile `id` at block row (cluster row) x ClusterM + rank.
  const int tiles_m = (m + wg_block_m - 1) / wg_block_m, tiles_n = (n + wg_block_n - 1) / wg_block_n;
  const int cluster_rows = (tiles_m + ClusterM - 1) / ClusterM, tiles = cluster_rows * tiles_n;
  constexpr int group = wg_group_m / ClusterM;
  const auto origin = [&](int id) {
    const int per_group = group * tiles_n;
    const int first_m = (id / per_group) * group;
    const int rows = cluster_rows - first_m < group ? cluster_rows - first_m : group;
    const int tile_m = (first_m + (id % per_group) % rows) * ClusterM + rank, tile_n = (id % per_group) / rows;
    return int2{tile_m * wg_block_m, tile_n * wg_block_n};
  };
  // This cluster's first tile and the one after `tile` (none where not persistent).
  const int first_tile = static_cast<int>(blockIdx.x) / ClusterM;
  const auto next_tile = [&](int tile) { return Persistent ? tile + static_cast<int>(gridDim.x) / ClusterM : tiles; };
  constexpr int block_k = wg_traits<P>::block_k;
  const int k_tiles = (k + block_k - 1) / block_k;

  if (threadIdx.x == 0) {
    // A stage is free once every consumer warpgroup reading it is done: all 256 consumer threads of the block, or
    // in a cluster one lane of each consumer warp of every block (each block's copy writes B into all of them).
    for (int s = 0; s < wg_stages; ++s) {
      barrier_init(shared_address(&full[s]), 1);
      barrier_init(shared_address(&empty[s]), ClusterM == 1 ? wg_consumers * 128 : wg_consumers * 4 * ClusterM);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the copy engine
  }
  if constexpr (ClusterM == 1)
    __syncthreads();
  else
    cluster_sync();  // no block's copies or arrivals reach a peer's barriers before their init

  const auto a_stage = [&](int s) { return base + std::uint32_t(s * stage_bytes); };
  const auto b_stage = [&](int s) { return base + std::uint32_t(s * stage_bytes + a_stage_bytes); };
  // k tile kt of the block tile whose first row and column are `at` into stage s: A's 128 x block_k box; B^T's
  // 256 x block_k box (K-major) or B's four block_k x 64 boxes (N-major), in a cluster this block's share of them
  // into every block's stage s, so each block's full barrier still counts a whole stage of bytes.
  const auto load = [&](int s, int kt, int2 at) {
    const std::uint32_t bar = shared_address(&full[s]);
    barrier_expect_bytes(bar, stage_bytes);  // out-of-range elements are zero-filled and counted too
    tma_load_2d(a_stage(s), &a_map, kt * block_k, at.x, bar);
    if constexpr (wg_traits<P>::b_k_major) {
      tma_load_2d(b_stage(s), &b_map, kt * block_k, at.y, bar);
    } else {
      constexpr int share = wg_block_n / b_box_cols / ClusterM;
#pragma unroll
      for (int j = rank * share; j < (rank + 1) * share; ++j) {
        if constexpr (ClusterM == 1)
          tma_load_2d(b_stage(s) + j * b_box_bytes, &b_map, at.y + j * b_box_cols, kt * block_k, bar);
        else
          tma_load_2d_multicast(b_stage(s) + j * b_box_bytes, &b_map, at.y + j * b_box_cols, kt * block_k, bar,
                                (1u << ClusterM) - 1u);
      }
    }
  };
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = (static_cast<int>(threadIdx.x) % 128) / 32;
  const auto release = [&](int s) {
    if constexpr (ClusterM == 1)
      barrier_arrive(shared_address(&empty[s]));
    else if (lane < ClusterM)
      barrier_arrive_cluster(shared_address(&empty[s]), static_cast<unsigned>(lane));
  };
  float d[128];
  // The accumulator fragment of m64nNk16: warp w of the warpgroup holds rows 16 w .. 16 w + 15; lane l holds,
  // for each 8-column slice j, (row l / 4, columns 2 (l % 4) + {0, 1}) in d[4 j], d[4 j + 1] and the same
  // columns 8 rows down in d[4 j + 2], d[4 j + 3].
  const auto store = [&](int2 at, int consumer) {
    const std::int64_t row = at.x + consumer * 64 + warp * 16 + lane / 4;
    const std::int64_t col = at.y + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      store_pair(c, m, n, row, col + 8 * j, d[4 * j], d[4 * j + 1], even_n);
      store_pair(c, m, n, row + 8, col + 8 * j, d[4 * j + 2], d[4 * j + 3], even_n);
    }
  };

  if constexpr (Specialized) {
    // Stage and phase follow `it`, the block's k tiles counted over all its tiles (unsigned: % and / by the stages
    // are a mask and a shift). Each is loaded once and released once (but for a block's very last, which no load
    // waits for), by the same count of arrivals on every block of a cluster, whose blocks walk the same tiles, a
    // padding block too: so each barrier's phases alternate in step on both sides and no wait is left unanswered.
    if (threadIdx.x < 128) {  // the producer warpgroup
      registers_down<40>();
      // Thread 0 issues the copies. Alone (rung 6), its warp's other lanes have exited; in a cluster every thread
      // stays for the final cluster barrier, so thread 0's whole warp walks the loop with it, converged, rather
      // than waiting at that barrier on a path divergent from the copies'.
      if (ClusterM == 1 ? threadIdx.x == 0 : threadIdx.x < 32) {
        unsigned it = 0;
        for (int tile = first_tile; tile < tiles; tile = next_tile(tile)) {
          const int2 at = origin(tile);
          for (int kt = 0; kt < k_tiles; ++kt, ++it) {
            if (it >= wg_stages) barrier_wait(shared_address(&empty[it % wg_stages]), ((it / wg_stages) - 1) & 1);
            if (threadIdx.x == 0) load(it % wg_stages, kt, at);
            if constexpr (ClusterM > 1) __syncwarp();
          }
        }
      }
    } else {
      registers_up<232>();
      const int consumer = static_cast<int>(threadIdx.x) / 128 - 1;
      unsigned it = 0;
      for (int tile = first_tile; tile < tiles; tile = next_tile(tile)) {
        const int2 at = origin(tile);
#pragma unroll
        for (int i = 0; i < 128; ++i) d[i] = 0.0f;
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          barrier_wait(shared_address(&full[it % wg_stages]), (it / wg_stages) & 1);
          multiply_tile<P>(d, a_stage(it % wg_stages) + consumer * 64 * span_bytes, b_stage(it % wg_stages));
          wgmma_wait<1>();  // the group of k tile it - 1 has retired: its stage may be refilled
          if (kt > 0) release((it - 1) % wg_stages);
        }
        wgmma_wait<0>();
        // The tile's last stage, which the producer, already loading the next tile, will refill.
        if (Persistent && k_tiles > 0) release((it - 1) % wg_stages);
        store(at, consumer);
      }
    }
    if constexpr (ClusterM > 1) cluster_sync();  // peers may still arrive on this block's barriers until here
  } else {
    const int consumer = static_cast<int>(threadIdx.x) / 128;
    const int2 at = origin(first_tile);
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    if (threadIdx.x == 0)
      for (int kt = 0; kt < k_tiles && kt < wg_stages; ++kt) load(kt, kt, at);
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % wg_stages;
      barrier_wait(shared_address(&full[s]), (kt / wg_stages) & 1);
      multiply_tile<P>(d, a_stage(s) + consumer * 64 * span_bytes, b_stage(s));
      wgmma_wait<0>();
      release(s);
      if (threadIdx.x == 0 && kt + wg_stages < k_tiles) {
        barrier_wait(shared_address(&empty[s]), (kt / wg_stages) & 1);
        load(s, kt + wg_stages, at);
      }
    }
    store(at, consumer);
  }
#else
  (void)a_map, (void)b_map, (void)c, (void)m, (void)n, (void)k, (void)even_n;
#endif
}

// ---------------------------------------------------------------------------------------------------------
// Host side

// A 2-D tensor map over a row-major rows x cols matrix of P's stored elements whose rows lie `pitch` elements
// apart, read in boxes of box_cols x box_rows with the 128-byte swizzle wgmma's descriptors expect.
template <gemm_precision P>
CUtensorMap tensor_map(const void* data, std::int64_t rows, std::int64_t cols, std::int64_t pitch, int box_cols,
                       int box_rows) {
  CUtensorMap map{};
  const cuuint64_t extent[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t stride[1] = {static_cast<cuuint64_t>(pitch) * sizeof(typename tc_traits<P>::storage)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_stride[2] = {1, 1};
  const CUresult result =
      hopper::tensor_map_encoder()(&map, wg_traits<P>::map_type, 2, const_cast<void*>(data), extent, stride, box,
                                   element_stride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    throw std::runtime_error(std::string(operation_name(P)) + " wgmma: cuTensorMapEncodeTiled failed (CUresult " +
                             std::to_string(result) + ") for a " + std::to_string(rows) + " x " + std::to_string(cols) +
                             " matrix");
  return map;
}

// Whether the wgmma kernels' image on the current device is sm_90a code (asked once per process).
bool sm90a_image_loaded() {
  static const bool loaded = hopper::sm90a_image_runs(sm90a_probe);
  return loaded;
}

// B (k x n, row-major) into B^T (n x k, rows `pitch` floats apart) for the TF32 rung, whose wgmma reads B K-major
// only: 32 x 32 tiles through shared memory padded by one word (conflict-free columns), 32 x 8 threads.
__global__ void transpose_b_kernel(const float* __restrict__ b, float* __restrict__ bt, int k, int n, int pitch) {
  __shared__ float tile[32][33];
  const int col0 = static_cast<int>(blockIdx.x) * 32, row0 = static_cast<int>(blockIdx.y) * 32;
  for (int r = static_cast<int>(threadIdx.y); r < 32; r += 8) {
    const int row = row0 + r, col = col0 + static_cast<int>(threadIdx.x);
    if (row < k && col < n) tile[r][threadIdx.x] = b[std::int64_t(row) * n + col];
  }
  __syncthreads();
  for (int r = static_cast<int>(threadIdx.y); r < 32; r += 8) {
    const int out_row = col0 + r, out_col = row0 + static_cast<int>(threadIdx.x);  // B^T(out_row, out_col)
    if (out_row < n && out_col < k) bt[std::int64_t(out_row) * pitch + out_col] = tile[threadIdx.x][r];
  }
}

// Tiles of C in clusters of ClusterM block rows: ceil(m / 128 / ClusterM) cluster rows x ceil(n / 256) columns,
// so a cluster's last block may lie wholly below C (it loads and multiplies zeros and stores nothing).
template <int ClusterM>
constexpr std::int64_t cluster_tiles(std::int64_t m, std::int64_t n) {
  const std::int64_t block_rows = (m + wg_block_m - 1) / wg_block_m;
  return (block_rows + ClusterM - 1) / ClusterM * ((n + wg_block_n - 1) / wg_block_n);
}

template <gemm_precision P, bool Specialized, int ClusterM = 1, bool Persistent = false>
class gemm_wgmma final : public gemm_tc_base<P> {
 public:
  using base = gemm_tc_base<P>;
  using storage = typename base::storage;
  ~gemm_wgmma() override {
    device_free(m_a_padded);
    device_free(m_b_padded);
  }
  void enqueue_run() override {
    if (this->empty()) return;
    constexpr std::size_t e = sizeof(storage);
    const std::int64_t m = this->m_m, n = this->m_n, k = this->m_k;
    if (m_a_padded != nullptr)
      KSTUDY_CUDA_CHECK(cudaMemcpy2DAsync(m_a_padded, m_k_pitch * e, this->m_a, k * e, k * e, m,
                                          cudaMemcpyDeviceToDevice, this->m_stream));
    if constexpr (wg_traits<P>::b_k_major) {
      const dim3 blocks(static_cast<unsigned>((n + 31) / 32), static_cast<unsigned>((k + 31) / 32));
      transpose_b_kernel<<<blocks, dim3(32, 8), 0, this->m_stream>>>(this->m_b, m_b_padded, static_cast<int>(k),
                                                                     static_cast<int>(n), static_cast<int>(m_k_pitch));
      KSTUDY_CUDA_CHECK(cudaGetLastError());
    } else if (m_b_padded != nullptr) {
      KSTUDY_CUDA_CHECK(cudaMemcpy2DAsync(m_b_padded, m_n_pitch * e, this->m_b, n * e, n * e, k,
                                          cudaMemcpyDeviceToDevice, this->m_stream));
    }
    const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
    if constexpr (ClusterM == 1) {
      kernel<<<m_blocks, threads, wg_shared_bytes, this->m_stream>>>(m_a_map, m_b_map, this->m_c, mi, ni, ki,
                                                                     n % 2 == 0);
      KSTUDY_CUDA_CHECK(cudaGetLastError());
    } else {
      const hopper::cluster_launch launch(m_blocks, threads, wg_shared_bytes, this->m_stream, ClusterM);
      KSTUDY_CUDA_CHECK(
          cudaLaunchKernelEx(&launch.m_config, kernel, m_a_map, m_b_map, this->m_c, mi, ni, ki, n % 2 == 0));
    }
  }
  double calculated_occupancy() const override { return occupancy_of(kernel, threads, wg_shared_bytes); }
  std::vector<std::pair<std::string, std::int64_t>> tuned_parameters() const override {
    std::vector<std::pair<std::string, std::int64_t>> parameters = {
        {"block_m", wg_block_m},
        {"block_n", wg_block_n},
        {"block_k", wg_traits<P>::block_k},
        {"stages", wg_stages},
        {"raster_group_m", wg_group_m},
        {"padded_copies", (m_a_padded ? 1 : 0) + (m_b_padded && !wg_traits<P>::b_k_major ? 1 : 0)}};
    if (ClusterM > 1) parameters.emplace_back("cluster_m", ClusterM);
    if (Persistent) parameters.emplace_back("grid_blocks", m_blocks);
    return parameters;
  }

 protected:
  void plan() override {
    const std::string op = operation_name(P);
    if (!sm90a_image_loaded())
      throw variant_unavailable(
          "no sm_90a code runs on this GPU (wgmma needs compute capability 9.0 and a build with "
          "-gencode=arch=compute_90a,code=sm_90a)");
    constexpr std::int64_t int_max = 2147483647;
    const std::int64_t m = this->m_m, n = this->m_n, k = this->m_k;
    if (m > int_max || n > int_max || k > int_max)
      throw std::invalid_argument(op + " wgmma rungs: m, n and k must be below 2^31 (TMA coordinates)");
    // A cluster's padding block starts below C, its first row still an int.
    if (ClusterM > 1 && m > int_max - wg_block_m * ClusterM)
      throw std::invalid_argument(op + " wgmma cluster rungs: m must be below 2^31 - " +
                                  std::to_string(wg_block_m * ClusterM));
    const std::int64_t tiles = cluster_tiles<ClusterM>(m, n);
    if (tiles * ClusterM > int_max) throw std::invalid_argument(op + " wgmma rungs: too large a matrix for one grid");
    KSTUDY_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wg_shared_bytes));
    m_blocks = static_cast<unsigned>(tiles * ClusterM);
    if (Persistent) {
      // As many clusters as fit on the device at once (one block an SM: the stages take most of its shared
      // memory), each looping over tiles, and never more than there are tiles.
      int clusters = 0;
      const hopper::cluster_launch launch(ClusterM, threads, wg_shared_bytes, this->m_stream, ClusterM);
      KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &launch.m_config));
      if (clusters < 1)
        throw variant_unavailable("no cluster of " + std::to_string(ClusterM) + " wgmma blocks fits on this GPU");
      if (clusters < tiles) m_blocks = static_cast<unsigned>(clusters * ClusterM);
    }
    // TMA reads rows 16 bytes apart: pad A's rows (k) and N-major B's rows (n) to a 16-byte multiple where they are
    // not; K-major B^T (TF32) is written with the padded pitch by the transpose itself.
    device_free(m_a_padded);
    device_free(m_b_padded);
    if (this->empty()) return;
    if (wg_traits<P>::b_k_major && (k + 31) / 32 > 65535)
      throw std::invalid_argument(op + " wgmma rung: k past 2,097,120 is beyond the B transpose's grid");
    constexpr std::int64_t vector = 16 / sizeof(storage);
    m_k_pitch = (k + vector - 1) / vector * vector;
    m_n_pitch = (n + vector - 1) / vector * vector;
    if (m_k_pitch != k) device_alloc(m_a_padded, m * m_k_pitch);
    if (wg_traits<P>::b_k_major)
      device_alloc(m_b_padded, n * m_k_pitch);
    else if (m_n_pitch != n)
      device_alloc(m_b_padded, k * m_n_pitch);
    constexpr int block_k = wg_traits<P>::block_k;
    m_a_map = tensor_map<P>(m_a_padded ? m_a_padded : this->m_a, m, k, m_k_pitch, block_k, wg_block_m);
    if constexpr (wg_traits<P>::b_k_major)
      m_b_map = tensor_map<P>(m_b_padded, n, k, m_k_pitch, block_k, wg_block_n);
    else
      m_b_map = tensor_map<P>(m_b_padded ? m_b_padded : this->m_b, k, n, m_n_pitch, b_box_cols, block_k);
  }

 private:
  static constexpr int threads = (Specialized ? wg_consumers + 1 : wg_consumers) * 128;  // + the producer
  static constexpr auto kernel = wgmma_kernel<P, Specialized, ClusterM, Persistent>;
  CUtensorMap m_a_map{}, m_b_map{};
  storage *m_a_padded = nullptr, *m_b_padded = nullptr;  // m_b_padded: B^T for TF32
  std::int64_t m_k_pitch = 0, m_n_pitch = 0;
  unsigned m_blocks = 0;
};

// ---------------------------------------------------------------------------------------------------------
// Registration (builds that compiled this file for sm_90a: KSTUDY_HAVE_SM90A, set by cmake/kstudy_cuda_targets.cmake)

// Declared with their fields in gemm_wgmma_cuda_info.cpp, which every build compiles; a build without sm_90a
// knows them as not in this build.
#if defined(KSTUDY_HAVE_SM90A)
[[maybe_unused]] const int registered = [] {
  variant_binding<gemm_wgmma<gemm_precision::bf16, false>>{"gemm_bf16_wgmma_tma@cuda"};
  variant_binding<gemm_wgmma<gemm_precision::bf16, true>>{"gemm_bf16_wgmma_ws@cuda"};
  variant_binding<gemm_wgmma<gemm_precision::bf16, true, 2>>{"gemm_bf16_wgmma_cluster@cuda"};
  variant_binding<gemm_wgmma<gemm_precision::bf16, true, 2, true>>{"gemm_bf16_wgmma_persistent@cuda"};
  variant_binding<gemm_wgmma<gemm_precision::tf32, true>>{"gemm_tf32_wgmma_ws@cuda"};
  variant_binding<gemm_wgmma<gemm_precision::fp16, false>>{"gemm_fp16_wgmma_tma@cuda"};
  variant_binding<gemm_wgmma<gemm_precision::fp16, true>>{"gemm_fp16_wgmma_ws@cuda"};
  variant_binding<gemm_wgmma<gemm_precision::fp16, true, 2>>{"gemm_fp16_wgmma_cluster@cuda"};
  variant_binding<gemm_wgmma<gemm_precision::fp16, true, 2, true>>{"gemm_fp16_wgmma_persistent@cuda"};
  return 0;
}();
#endif

}  // namespace
}  // namespace kstudy::gemm
