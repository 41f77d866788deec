// Kernels of the handwritten CUDA escape path (fused_cuda_*). Plain CUDA C++ with no includes: nvcc
// compiles this file ahead of time through fused_cuda.cu, and NVRTC compiles the very same text at run
// time (CMake embeds it as kstudy_fused_cuda_kernels_source), so it must not need any system header.
//
//   z[r,f] = clamp((x[r,f] - mean[f]) * inv_std[f], -clip, clip)   (NaN passes through)
//   score[r] = sum_f z[r,f] * weight[f],  flag[r] = score[r] > threshold,  *flagged += flagged rows
//
// Every kernel takes the same argument struct, runs grid-stride loops (the host sizes the grid to one
// resident wave), adds its flagged rows with one atomicAdd per warp, and its last block writes the
// launch's count to mapped host memory. Rows and element indices are 64-bit (a table may hold more than
// 2^31 floats); loop counters over features are int (features < 2^31), which keeps ptxas' register budget
// for the loads in flight.
// __launch_bounds__(1024): the block size is chosen at run time, up to 1024 threads.
#ifndef KSTUDY_FUSED_CUDA_KERNELS_CUH
#define KSTUDY_FUSED_CUDA_KERNELS_CUH

struct kstudy_fused_args {
  const float* x;
  const float* mean;
  const float* inv_std;
  const float* weight;
  float* score;
  unsigned char* flag;
  unsigned long long* flagged;       // device: the running count of this launch (zero between launches)
  unsigned int* finished_blocks;     // device: blocks done (zero between launches)
  unsigned long long* flagged_host;  // mapped pinned host memory: the launch's count, written by its last block
  long long rows;
  long long features;
  long long pitch;  // elements between rows; only the padded kernel reads it
  float clip;
  float threshold;
  int rows_per_thread;  // 4 for the feature-major quad kernel, else 1 (the host picks the kernel)
};

// Tile plan of fused_cuda_row_major_tiled, shared by the kernel and the host (launch geometry and
// dynamic shared memory come from the same function).
//
// The tile is moved in chunks of W floats: float4 (W = 4) when rows are whole float4s and x is 16-byte
// aligned, single floats otherwise. Each row is reduced by a group of G lanes (G a power of two), G
// chosen so a lane takes at most KSTUDY_TILE_LOADS floats of a row: one thread per row for narrow rows.
// The tile's row pitch (in chunks) is padded so the groups of one shared-memory wavefront (32 lanes for
// floats, 8 for float4) hit distinct banks: pitch = G (mod 2G).
#define KSTUDY_TILE_SMEM_FLOATS 12288  // 48 KiB: the dynamic shared-memory size every device grants
#define KSTUDY_TILE_LOADS 16           // floats each thread keeps in flight while copying a tile

enum kstudy_tile_mode {
  kstudy_tile_shared = 0,  // tile in shared memory, G lanes per row
  kstudy_global_rows = 1,  // a row does not fit the tile: warps reduce rows straight from global memory
};

struct kstudy_tile_plan {
  int mode;
  int width;       // floats per chunk: 4 or 1
  int group;       // lanes per row
  int tile_rows;   // rows per tile
  int tile_pitch;  // chunks between tile rows in shared memory
  int smem_bytes;  // dynamic shared memory per block: mean, inv_std, weight, then the tile
};

__host__ __device__ inline kstudy_tile_plan kstudy_plan_tile(long long features, int block, bool x_aligned16) {
  kstudy_tile_plan p;
  p.width = (x_aligned16 && features % 4 == 0) ? 4 : 1;
  const long long chunks = features / p.width;                // per row
  const long long lane_chunks = KSTUDY_TILE_LOADS / p.width;  // per lane, per row and per copy
  int group = 1;
  while (group < 32 && group * lane_chunks < chunks) group *= 2;
  p.group = group;
  const int wavefront_lanes = 32 / p.width;
  long long pitch = chunks;
  if (group < wavefront_lanes)
    while (pitch % (2 * group) != group) ++pitch;
  p.tile_pitch = (int)pitch;
  long long rows = (long long)block * lane_chunks / chunks;
  const long long free_floats = KSTUDY_TILE_SMEM_FLOATS - 3 * features;
  const long long fit = free_floats > 0 ? free_floats / (pitch * p.width) : 0;
  if (rows > fit) rows = fit;
  if (rows < 1) {
    p.mode = kstudy_global_rows;
    p.width = 1;
    p.group = 32;
    p.tile_rows = 0;
    p.tile_pitch = 0;
    p.smem_bytes = 0;
    return p;
  }
  p.mode = kstudy_tile_shared;
  p.tile_rows = (int)rows;
  p.smem_bytes = (int)((3 * features + rows * pitch * p.width) * 4);
  return p;
}

// clamp with NaN passing through: v < -c ? -c : (v > c ? c : v). Not fminf/fmaxf, which drop a NaN; on
// sm_80+ the NaN-propagating min/max do it in two instructions.
__device__ __forceinline__ float kstudy_clamp(float v, float clip) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(v), "f"(-clip));
  asm("min.NaN.f32 %0, %0, %1;" : "+f"(r) : "f"(clip));
  return r;
#else
  return v < -clip ? -clip : (v > clip ? clip : v);
#endif
}

__device__ __forceinline__ float kstudy_term(float v, float mean, float inv_std, float weight, float clip) {
  return kstudy_clamp((v - mean) * inv_std, clip) * weight;
}

// acc + the terms of one chunk, in feature order.
__device__ __forceinline__ float kstudy_add_terms(float acc, float x, float m, float s, float w, float clip) {
  return acc + kstudy_term(x, m, s, w, clip);
}
__device__ __forceinline__ float kstudy_add_terms(float acc, float4 x, float4 m, float4 s, float4 w, float clip) {
  acc += kstudy_term(x.x, m.x, s.x, w.x, clip);
  acc += kstudy_term(x.y, m.y, s.y, w.y, clip);
  acc += kstudy_term(x.z, m.z, s.z, w.z, clip);
  return acc + kstudy_term(x.w, m.w, s.w, w.w, clip);
}

template <int W>
struct kstudy_chunk;
template <>
struct kstudy_chunk<1> {
  typedef float type;
  __device__ static float zero() { return 0.0f; }
};
template <>
struct kstudy_chunk<4> {
  typedef float4 type;
  __device__ static float4 zero() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
};

// Warp sum of per-thread flag counts, one atomic per warp; then the block that finishes last moves the
// total into mapped host memory and zeroes the device counters for the next launch. So the count reaches
// the host inside the kernel: no memset before it and no copy after it on the stream.
// Every thread of the block must call it (blocks are whole warps).
__device__ __forceinline__ void kstudy_add_flagged(const kstudy_fused_args& a, unsigned int count) {
#if __CUDA_ARCH__ >= 800
  count = __reduce_add_sync(0xffffffffu, count);
#else
  for (int offset = 16; offset > 0; offset >>= 1) count += __shfl_xor_sync(0xffffffffu, count, offset);
#endif
  if ((threadIdx.x & 31) == 0 && count != 0) atomicAdd(a.flagged, (unsigned long long)count);
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this block's additions are visible before it counts itself finished
    if (atomicAdd(a.finished_blocks, 1u) == gridDim.x - 1) {
      __threadfence();
      *a.flagged_host = atomicExch(a.flagged, 0ull);
      *a.finished_blocks = 0u;
      __threadfence_system();
    }
  }
}

__device__ __forceinline__ unsigned int kstudy_store_row(const kstudy_fused_args& a, long long r, float sum) {
  a.score[r] = sum;
  const unsigned int flagged = sum > a.threshold ? 1u : 0u;  // NaN compares false: flag 0
  a.flag[r] = (unsigned char)flagged;
  return flagged;
}

// The batched loops below load KSTUDY_BATCH features of x into registers, then reduce them. ptxas issues a
// batch's loads ahead of the first use only if every value loaded for the batch fits its register budget;
// when it does not, it sinks loads to their uses and a thread has one or two x loads in flight. With mean,
// inv_std and weight loaded warp-uniformly per thread (3 * KSTUDY_BATCH values) that happened at any budget
// the kernels can afford, so the lanes of a warp share them instead: lane j holds mean[f + j], lane
// KSTUDY_BATCH + j inv_std[f + j], lane 2 * KSTUDY_BATCH + j weight[f + j], one load and one register per
// thread, handed out by shuffles. The loops stay warp-uniform for the shuffles: a warp runs while its first
// row is in range and lanes past the end reread a valid row and discard it.
#define KSTUDY_BATCH 8

// The lane's value of the batch of features [f, f + n), n <= KSTUDY_BATCH (zero on lanes that hold none).
__device__ __forceinline__ float kstudy_batch_vectors(const kstudy_fused_args& a, int f, int n, int lane) {
  const int j = lane % KSTUDY_BATCH, which = lane / KSTUDY_BATCH;
  if (which >= 3 || j >= n) return 0.0f;
  const float* __restrict__ vector = which == 0 ? a.mean : (which == 1 ? a.inv_std : a.weight);
  return __ldg(vector + f + j);
}

// Feature f + j's mean, inverse standard deviation and weight, shuffled from the lanes that hold them.
struct kstudy_feature {
  float mean, inv_std, weight;
};
__device__ __forceinline__ kstudy_feature kstudy_batch_feature(float vectors, int j) {
  return {__shfl_sync(0xffffffffu, vectors, j), __shfl_sync(0xffffffffu, vectors, KSTUDY_BATCH + j),
          __shfl_sync(0xffffffffu, vectors, 2 * KSTUDY_BATCH + j)};
}

// sum + the terms of features [f, f + n) of one row, its first at p, the next feature_stride floats on.
// Full batches (n = KSTUDY_BATCH) need no guards; the last, partial one loads and adds only its n features.
// Every lane of the warp must call it with the same f and n.
template <bool Full>
__device__ __forceinline__ float kstudy_row_batch(const kstudy_fused_args& a, const float* __restrict__ p,
                                                  long long feature_stride, int f, int n, int lane, float sum) {
  float v[KSTUDY_BATCH];
#pragma unroll
  for (int j = 0; j < KSTUDY_BATCH; ++j) v[j] = (Full || j < n) ? __ldg(p + j * feature_stride) : 0.0f;
  const float vectors = kstudy_batch_vectors(a, f, Full ? KSTUDY_BATCH : n, lane);
#pragma unroll
  for (int j = 0; j < KSTUDY_BATCH; ++j) {
    const kstudy_feature g = kstudy_batch_feature(vectors, j);
    if (Full || j < n) sum += kstudy_term(v[j], g.mean, g.inv_std, g.weight, a.clip);
  }
  return sum;
}

// One thread per row, x(r, f) at r * row_stride + f * feature_stride, KSTUDY_BATCH features in flight.
__device__ __forceinline__ void kstudy_row_per_thread(const kstudy_fused_args& a, long long row_stride,
                                                      long long feature_stride) {
  const int features = (int)a.features, lane = (int)threadIdx.x & 31;
  const long long step = (long long)gridDim.x * blockDim.x;  // a multiple of 32: warps stay whole
  unsigned int count = 0;
  for (long long r0 = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); r0 < a.rows; r0 += step) {
    const long long r = r0 + lane < a.rows ? r0 + lane : a.rows - 1;
    const float* __restrict__ p = a.x + r * row_stride;
    float sum = 0.0f;
    int f = 0;
#pragma unroll 1
    for (; f + KSTUDY_BATCH <= features; f += KSTUDY_BATCH, p += KSTUDY_BATCH * feature_stride)
      sum = kstudy_row_batch<true>(a, p, feature_stride, f, KSTUDY_BATCH, lane, sum);
    if (f < features) sum = kstudy_row_batch<false>(a, p, feature_stride, f, features - f, lane, sum);
    if (r0 + lane < a.rows) count += kstudy_store_row(a, r, sum);
  }
  kstudy_add_flagged(a, count);
}

// Rows too wide for a tile: a warp reduces kstudy_warp_rows rows at once straight from global memory, lane l
// taking features l, l + 32, ... (consecutive lanes, consecutive addresses), so each feature-vector load
// serves several rows; a butterfly then leaves every row's total in every lane.
#define kstudy_warp_rows 4
__device__ __forceinline__ void kstudy_global_warp_rows(const kstudy_fused_args& a) {
  const int lane = (int)threadIdx.x & 31, warps = (int)blockDim.x >> 5;
  const long long features = a.features;
  const long long step = (long long)gridDim.x * warps * kstudy_warp_rows;
  unsigned int count = 0;
  for (long long r0 = ((long long)blockIdx.x * warps + ((int)threadIdx.x >> 5)) * kstudy_warp_rows; r0 < a.rows;
       r0 += step) {
    const float* rows[kstudy_warp_rows];
    float sum[kstudy_warp_rows];
#pragma unroll
    for (int j = 0; j < kstudy_warp_rows; ++j) {
      rows[j] = a.x + (r0 + j < a.rows ? r0 + j : r0) * features;  // past the end: reread row r0, discarded
      sum[j] = 0.0f;
    }
    for (long long f = lane; f < features; f += 32) {
      const float m = __ldg(a.mean + f), s = __ldg(a.inv_std + f), w = __ldg(a.weight + f);
      float v[kstudy_warp_rows];
#pragma unroll
      for (int j = 0; j < kstudy_warp_rows; ++j) v[j] = __ldg(rows[j] + f);
#pragma unroll
      for (int j = 0; j < kstudy_warp_rows; ++j) sum[j] += kstudy_term(v[j], m, s, w, a.clip);
    }
#pragma unroll
    for (int j = 0; j < kstudy_warp_rows; ++j) {
      for (int offset = 16; offset > 0; offset >>= 1) sum[j] += __shfl_xor_sync(0xffffffffu, sum[j], offset);
      if (lane == 0 && r0 + j < a.rows) count += kstudy_store_row(a, r0 + j, sum[j]);
    }
  }
  kstudy_add_flagged(a, count);
}

extern "C" __global__ void __launch_bounds__(1024) fused_cuda_row_major(kstudy_fused_args a) {
  kstudy_row_per_thread(a, a.features, 1);  // the seed's kernel: a warp's loads stride by the row width
}

// Feature-major, four adjacent rows per thread (rows a multiple of 4, so every column starts on 16
// bytes): each load is a float4 of four rows of one feature, KSTUDY_BATCH features in flight per thread, and
// the four scores and flags leave as one 16-byte and one 4-byte store.
template <bool Full>
__device__ __forceinline__ void kstudy_quad_batch(const kstudy_fused_args& a, const float4* __restrict__ p,
                                                  long long column, int f, int n, int lane, float (&sum)[4]) {
  float4 v[KSTUDY_BATCH];
#pragma unroll
  for (int j = 0; j < KSTUDY_BATCH; ++j)
    v[j] = (Full || j < n) ? __ldg(p + j * column) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float vectors = kstudy_batch_vectors(a, f, Full ? KSTUDY_BATCH : n, lane);
#pragma unroll
  for (int j = 0; j < KSTUDY_BATCH; ++j) {
    const kstudy_feature g = kstudy_batch_feature(vectors, j);
    if (Full || j < n) {
      sum[0] += kstudy_term(v[j].x, g.mean, g.inv_std, g.weight, a.clip);
      sum[1] += kstudy_term(v[j].y, g.mean, g.inv_std, g.weight, a.clip);
      sum[2] += kstudy_term(v[j].z, g.mean, g.inv_std, g.weight, a.clip);
      sum[3] += kstudy_term(v[j].w, g.mean, g.inv_std, g.weight, a.clip);
    }
  }
}

__device__ __forceinline__ void kstudy_feature_major_quads(const kstudy_fused_args& a) {
  const int features = (int)a.features, lane = (int)threadIdx.x & 31;
  const long long quads = a.rows / 4, column = a.rows / 4;  // column: float4s from one feature to the next
  const long long step = (long long)gridDim.x * blockDim.x;
  unsigned int count = 0;
  for (long long q0 = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); q0 < quads; q0 += step) {
    const long long q = q0 + lane < quads ? q0 + lane : quads - 1;
    const float4* __restrict__ p = reinterpret_cast<const float4*>(a.x) + q;
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int f = 0;
#pragma unroll 1
    for (; f + KSTUDY_BATCH <= features; f += KSTUDY_BATCH, p += KSTUDY_BATCH * column)
      kstudy_quad_batch<true>(a, p, column, f, KSTUDY_BATCH, lane, sum);
    if (f < features) kstudy_quad_batch<false>(a, p, column, f, features - f, lane, sum);
    if (q0 + lane < quads) {
      reinterpret_cast<float4*>(a.score)[q] = make_float4(sum[0], sum[1], sum[2], sum[3]);
      unsigned int flags = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const unsigned int flagged = sum[j] > a.threshold ? 1u : 0u;  // NaN compares false: flag 0
        flags |= flagged << (8 * j);
        count += flagged;
      }
      reinterpret_cast<unsigned int*>(a.flag)[q] = flags;  // little-endian: row 4q + j in byte j
    }
  }
  kstudy_add_flagged(a, count);
}

extern "C" __global__ void __launch_bounds__(1024) fused_cuda_feature_major(kstudy_fused_args a) {
  kstudy_feature_major_quads(a);
}

// Feature-major, one row per thread (rows not a multiple of 4, or too few quads to fill the GPU): a warp
// reads 32 adjacent rows of one feature, coalesced. Its own kernel, built to 32 registers (two 1,024-thread
// blocks per SM) so every thread slot of an SM can hold a warp: inside the quad kernel it was allocated the
// quads' registers, ran at 62% theoretical occupancy and lost to the seed's plain kernel by 1.20x at
// 262,144 x 256, where there is about one row per resident thread.
extern "C" __global__ void __launch_bounds__(1024, 2) fused_cuda_feature_major_rows(kstudy_fused_args a) {
  kstudy_row_per_thread(a, 1, a.rows);
}

// The seed's plain feature-major kernel, the baseline every optimisation must beat: one
// thread per row, a grid of ceil(rows / block) blocks, a loop over the features, nothing else. The flagged
// count is a second, resident-wave kernel over the flags (kstudy_count_flags). Counting inside the plain
// kernel cost more than the kernel on the H200 at 16M x 16 (65,536 blocks): the last-block ticket of the
// other kernels 901 us, one same-address atomic per warp 822 us, one per block (static shared memory
// under the max-L1 carveout) 562 us, against ~300 us without a count.
// The feature counter is an int: with a 64-bit one the four 64-bit x addresses and values of nvcc's
// four-way unrolled loop did not fit the 32 registers ptxas allots, it issued each x load only after the
// previous one's use (one in flight per thread), and the kernel ran 1.6x slower on the H200 than
// plain_minimal_cuda_feature_major. The element index f * a.rows + r stays 64-bit.
extern "C" __global__ void plain_cuda_feature_major(kstudy_fused_args a) {
  const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= a.rows) return;
  const int features = (int)a.features;
  float sum = 0.0f;
  for (int f = 0; f < features; ++f)
    sum += kstudy_term(a.x[f * a.rows + r], a.mean[f], a.inv_std[f], a.weight[f], a.clip);
  kstudy_store_row(a, r, sum);
}

// After plain_cuda_feature_major on the same stream: one resident wave counts the flags and publishes the
// launch's count to mapped host memory through the usual epilogue.
extern "C" __global__ void __launch_bounds__(1024) kstudy_count_flags(kstudy_fused_args a) {
  unsigned int count = 0;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < a.rows; r += step) count += a.flag[r];
  kstudy_add_flagged(a, count);
}

extern "C" __global__ void __launch_bounds__(1024) fused_cuda_padded(kstudy_fused_args a) {
  kstudy_row_per_thread(a, a.pitch, 1);
}

// Row-major, coalesced: one tile of whole rows (contiguous in a row-major table) after another. The block
// copies a tile into shared memory with flat loads -- consecutive threads, consecutive float4s (or floats);
// each thread issues all its loads before storing any -- then groups of G lanes reduce the rows from
// shared memory, where the padded pitch keeps the reads free of bank conflicts.
template <int W>
__device__ __forceinline__ void kstudy_tiled(const kstudy_fused_args& a, const kstudy_tile_plan& plan, float* smem) {
  typedef typename kstudy_chunk<W>::type chunk;
  const int tid = (int)threadIdx.x, block = (int)blockDim.x;
  const int features = (int)a.features;  // < KSTUDY_TILE_SMEM_FLOATS on this path
  const int row_chunks = features / W, pitch = plan.tile_pitch, group = plan.group;
  float* mean = smem;
  float* inv_std = smem + features;
  float* weight = smem + 2 * features;
  chunk* tile = reinterpret_cast<chunk*>(smem + 3 * features);  // 16-byte aligned when W = 4
  for (int f = tid; f < features; f += block) {
    mean[f] = a.mean[f];
    inv_std[f] = a.inv_std[f];
    weight[f] = a.weight[f];
  }
  const chunk* mean_c = reinterpret_cast<const chunk*>(mean);
  const chunk* inv_std_c = reinterpret_cast<const chunk*>(inv_std);
  const chunk* weight_c = reinterpret_cast<const chunk*>(weight);

  // Chunk c = tid + k * block of a tile is (row q, column m), stored at q * pitch + m. Tracked
  // incrementally so the copy has no integer division.
  const int q0 = tid / row_chunks, m0 = tid - q0 * row_chunks;
  const int dq = block / row_chunks, dm = block - dq * row_chunks;
  // The reduction: lanes [g * group, (g + 1) * group) of a warp share a row.
  const int lane = tid & 31, member = lane & (group - 1);
  const int rows_per_warp = 32 / group, rows_per_step = (block >> 5) * rows_per_warp;
  const int first_row = (tid >> 5) * rows_per_warp + lane / group;
  unsigned int count = 0;

  const long long tiles = (a.rows + plan.tile_rows - 1) / plan.tile_rows;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const long long r0 = t * plan.tile_rows;
    const int n_rows = (int)(a.rows - r0 < plan.tile_rows ? a.rows - r0 : plan.tile_rows);
    const int n = n_rows * row_chunks;  // <= block * KSTUDY_TILE_LOADS / W
    const chunk* __restrict__ source = reinterpret_cast<const chunk*>(a.x + r0 * a.features);

    chunk v[KSTUDY_TILE_LOADS / W];
#pragma unroll
    for (int k = 0; k < KSTUDY_TILE_LOADS / W; ++k) {
      const int c = tid + k * block;
      v[k] = c < n ? __ldg(source + c) : kstudy_chunk<W>::zero();
    }
    int q = q0, m = m0;
#pragma unroll
    for (int k = 0; k < KSTUDY_TILE_LOADS / W; ++k) {
      if (tid + k * block < n) tile[q * pitch + m] = v[k];
      q += dq;
      m += dm;
      if (m >= row_chunks) {
        m -= row_chunks;
        ++q;
      }
    }
    __syncthreads();  // also publishes the feature vectors on the first tile

    for (int base = 0; base < n_rows; base += rows_per_step) {  // warp-uniform trip count: shuffles below
      const int i = base + first_row;
      float sum = 0.0f;
      if (i < n_rows) {
        const chunk* row = tile + i * pitch;
        for (int c = member; c < row_chunks; c += group)
          sum = kstudy_add_terms(sum, row[c], mean_c[c], inv_std_c[c], weight_c[c], a.clip);
      }
      for (int offset = group >> 1; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      if (i < n_rows && member == 0) count += kstudy_store_row(a, r0 + i, sum);
    }
    __syncthreads();  // the next tile overwrites this one
  }
  kstudy_add_flagged(a, count);
}

extern "C" __global__ void __launch_bounds__(1024) fused_cuda_row_major_tiled(kstudy_fused_args a) {
  extern __shared__ float4 kstudy_smem[];
  const bool aligned = ((unsigned long long)a.x & 15) == 0;
  const kstudy_tile_plan plan = kstudy_plan_tile(a.features, (int)blockDim.x, aligned);
  if (plan.mode == kstudy_global_rows) {
    kstudy_global_warp_rows(a);
  } else if (plan.width == 4) {
    kstudy_tiled<4>(a, plan, reinterpret_cast<float*>(kstudy_smem));
  } else {
    kstudy_tiled<1>(a, plan, reinterpret_cast<float*>(kstudy_smem));
  }
}

#endif  // KSTUDY_FUSED_CUDA_KERNELS_CUH
