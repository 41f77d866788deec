// Kernels of the handwritten CUDA escape path (fused_cuda_*). Plain CUDA C++ with no includes: nvcc
// compiles this file ahead of time through fused_cuda.cu, and NVRTC compiles the very same text at run
// time (CMake embeds it as kstudy_fused_cuda_kernels_source), so it must not need any system header.
//
//   z[r,f] = clamp((x[r,f] - mean[f]) * inv_std[f], -clip, clip)   (NaN passes through)
//   score[r] = sum_f z[r,f] * weight[f],  flag[r] = score[r] > threshold,  *flagged += flagged rows
//
// Every kernel takes the same argument struct, runs grid-stride loops (the host sizes the grid to one
// resident wave) and adds its flagged rows with one atomicAdd per warp. 64-bit indices throughout.
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
  unsigned long long* flagged;  // zeroed by the host before the launch
  long long rows;
  long long features;
  long long pitch;  // elements between rows; only the padded kernel reads it
  float clip;
  float threshold;
};

// Tile plan of fused_cuda_row_major_tiled, shared by the kernel and the host (launch geometry and
// dynamic shared memory come from the same function).
#define KSTUDY_TILE_SMEM_FLOATS 12288  // 48 KiB: the dynamic shared-memory size every device grants
#define KSTUDY_TILE_LOADS 16           // loads each thread keeps in flight while copying a tile

enum kstudy_tile_mode {
  kstudy_tile_thread_per_row = 0,  // features < 32: odd-pitch tile, one thread per row
  kstudy_tile_warp_per_row = 1,    // wider rows: unpadded tile, a warp reduces each row
  kstudy_global_warp_per_row = 2,  // a row does not fit the tile: a warp per row straight from global memory
};

struct kstudy_tile_plan {
  int mode;
  int tile_rows;    // rows per tile
  int tile_pitch;   // shared-memory floats between tile rows
  int smem_bytes;   // dynamic shared memory per block
};

__host__ __device__ inline kstudy_tile_plan kstudy_plan_tile(long long features, int block) {
  kstudy_tile_plan p;
  const long long budget = (long long)block * KSTUDY_TILE_LOADS;
  if (features < 32) {
    // An odd pitch puts the 32 rows a warp reads at one feature step in 32 different banks.
    const long long pitch = features | 1;
    const long long params = 4 * features;  // float4 {mean, inv_std, weight, 0} per feature
    long long rows = budget / features;
    const long long fit = (KSTUDY_TILE_SMEM_FLOATS - params) / pitch;
    if (rows > fit) rows = fit;
    p.mode = kstudy_tile_thread_per_row;
    p.tile_rows = (int)rows;
    p.tile_pitch = (int)pitch;
    p.smem_bytes = (int)((params + rows * pitch) * 4);
    return p;
  }
  long long rows = (budget < KSTUDY_TILE_SMEM_FLOATS ? budget : KSTUDY_TILE_SMEM_FLOATS) / features;
  if (rows < 1) {
    p.mode = kstudy_global_warp_per_row;
    p.tile_rows = 0;
    p.tile_pitch = 0;
    p.smem_bytes = 0;
    return p;
  }
  p.mode = kstudy_tile_warp_per_row;
  p.tile_rows = (int)rows;
  p.tile_pitch = (int)features;  // lanes read consecutive features: conflict-free without padding
  p.smem_bytes = (int)(rows * features * 4);
  return p;
}

__device__ __forceinline__ float kstudy_term(float v, float mean, float inv_std, float weight, float clip) {
  float z = (v - mean) * inv_std;
  z = z < -clip ? -clip : (z > clip ? clip : z);  // not fminf/fmaxf: those would drop a NaN
  return z * weight;
}

// Warp sum of per-thread flag counts, then one atomic per warp. Every lane of every (full) warp must call it.
__device__ __forceinline__ void kstudy_add_flagged(unsigned long long* flagged, unsigned int count) {
#if __CUDA_ARCH__ >= 800
  count = __reduce_add_sync(0xffffffffu, count);
#else
  for (int offset = 16; offset > 0; offset >>= 1) count += __shfl_xor_sync(0xffffffffu, count, offset);
#endif
  if ((threadIdx.x & 31) == 0 && count != 0) atomicAdd(flagged, (unsigned long long)count);
}

__device__ __forceinline__ unsigned int kstudy_store_row(const kstudy_fused_args& a, long long r, float sum) {
  a.score[r] = sum;
  const unsigned int flagged = sum > a.threshold ? 1u : 0u;  // NaN compares false: flag 0
  a.flag[r] = (unsigned char)flagged;
  return flagged;
}

// One thread per row, x(r, f) at r * row_stride + f * feature_stride. Features go eight at a time into
// registers first so each thread has eight independent loads in flight.
__device__ __forceinline__ void kstudy_row_per_thread(const kstudy_fused_args& a, long long row_stride,
                                                      long long feature_stride) {
  const float* __restrict__ mean = a.mean;
  const float* __restrict__ inv_std = a.inv_std;
  const float* __restrict__ weight = a.weight;
  const long long features = a.features;
  const long long step = (long long)gridDim.x * blockDim.x;
  unsigned int count = 0;
  for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < a.rows; r += step) {
    const float* __restrict__ row = a.x + r * row_stride;
    float sum = 0.0f;
    long long f = 0;
    for (; f + 8 <= features; f += 8) {
      float v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = __ldg(row + (f + k) * feature_stride);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        sum += kstudy_term(v[k], __ldg(mean + f + k), __ldg(inv_std + f + k), __ldg(weight + f + k), a.clip);
    }
    for (; f < features; ++f)
      sum += kstudy_term(__ldg(row + f * feature_stride), __ldg(mean + f), __ldg(inv_std + f), __ldg(weight + f), a.clip);
    count += kstudy_store_row(a, r, sum);
  }
  kstudy_add_flagged(a.flagged, count);
}

// Sum of one row by a whole warp: lane l takes features l, l + 32, ... (consecutive lanes read consecutive
// addresses), eight loads in flight per lane, then a butterfly so every lane holds the same total.
__device__ __forceinline__ float kstudy_warp_row_sum(const kstudy_fused_args& a, const float* row, int lane) {
  const long long features = a.features;
  float partial = 0.0f;
  for (long long f0 = 0; f0 < features; f0 += 256) {
    float v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const long long f = f0 + lane + 32 * k;
      v[k] = f < features ? row[f] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const long long f = f0 + lane + 32 * k;
      if (f < features) partial += kstudy_term(v[k], __ldg(a.mean + f), __ldg(a.inv_std + f), __ldg(a.weight + f), a.clip);
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) partial += __shfl_xor_sync(0xffffffffu, partial, offset);
  return partial;
}

extern "C" __global__ void __launch_bounds__(1024) fused_cuda_row_major(kstudy_fused_args a) {
  kstudy_row_per_thread(a, a.features, 1);  // the seed's kernel: a warp's loads stride by the row width
}

extern "C" __global__ void __launch_bounds__(1024) fused_cuda_feature_major(kstudy_fused_args a) {
  kstudy_row_per_thread(a, 1, a.rows);  // a warp reads 32 adjacent rows of one feature: coalesced
}

extern "C" __global__ void __launch_bounds__(1024) fused_cuda_padded(kstudy_fused_args a) {
  kstudy_row_per_thread(a, a.pitch, 1);
}

// Row-major, coalesced. A block copies a contiguous tile of whole rows (contiguous in a row-major table)
// into shared memory with flat loads -- consecutive threads, consecutive addresses; each thread issues all
// its KSTUDY_TILE_LOADS loads before storing any -- then reduces the rows from shared memory: one thread
// per row for narrow rows, a warp per row for wide ones. Rows too wide for a tile are reduced by a warp
// each straight from global memory (already coalesced at that width).
extern "C" __global__ void __launch_bounds__(1024) fused_cuda_row_major_tiled(kstudy_fused_args a) {
  extern __shared__ float4 kstudy_smem[];
  const kstudy_tile_plan plan = kstudy_plan_tile(a.features, (int)blockDim.x);
  const int tid = (int)threadIdx.x, block = (int)blockDim.x, lane = tid & 31, warp = tid >> 5, warps = block >> 5;
  const int features = (int)a.features;  // < KSTUDY_TILE_SMEM_FLOATS on the tile paths
  unsigned int count = 0;

  if (plan.mode == kstudy_global_warp_per_row) {
    const long long step = (long long)gridDim.x * warps;
    for (long long r = (long long)blockIdx.x * warps + warp; r < a.rows; r += step) {
      const float sum = kstudy_warp_row_sum(a, a.x + r * a.features, lane);
      if (lane == 0) count += kstudy_store_row(a, r, sum);
    }
    kstudy_add_flagged(a.flagged, count);
    return;
  }

  const bool narrow = plan.mode == kstudy_tile_thread_per_row;
  float4* params = kstudy_smem;  // narrow rows only: the feature vectors, read as broadcasts
  float* tile = reinterpret_cast<float*>(kstudy_smem + (narrow ? features : 0));
  if (narrow)
    for (int f = tid; f < features; f += block) params[f] = make_float4(a.mean[f], a.inv_std[f], a.weight[f], 0.0f);

  // Where this thread's k-th element lands: element e = tid + k * block of the tile is (row q, feature m),
  // stored at q * pitch + m. Tracked incrementally so the copy loop has no integer division.
  const int q0 = tid / features, m0 = tid - q0 * features;
  const int dq = block / features, dm = block - dq * features;
  const int pitch = plan.tile_pitch;

  const long long tiles = (a.rows + plan.tile_rows - 1) / plan.tile_rows;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const long long r0 = t * plan.tile_rows;
    const int n_rows = (int)(a.rows - r0 < plan.tile_rows ? a.rows - r0 : plan.tile_rows);
    const int n = n_rows * features;  // <= block * KSTUDY_TILE_LOADS
    const float* __restrict__ source = a.x + r0 * a.features;

    float v[KSTUDY_TILE_LOADS];
#pragma unroll
    for (int k = 0; k < KSTUDY_TILE_LOADS; ++k) {
      const int e = tid + k * block;
      v[k] = e < n ? __ldg(source + e) : 0.0f;
    }
    int q = q0, m = m0;
#pragma unroll
    for (int k = 0; k < KSTUDY_TILE_LOADS; ++k) {
      if (tid + k * block < n) tile[q * pitch + m] = v[k];
      q += dq;
      m += dm;
      if (m >= features) {
        m -= features;
        ++q;
      }
    }
    __syncthreads();

    if (narrow) {
      for (int i = tid; i < n_rows; i += block) {
        const float* row = tile + i * pitch;
        float sum = 0.0f;
#pragma unroll 4
        for (int f = 0; f < features; ++f) {
          const float4 p = params[f];
          sum += kstudy_term(row[f], p.x, p.y, p.z, a.clip);
        }
        count += kstudy_store_row(a, r0 + i, sum);
      }
    } else {
      for (int i = warp; i < n_rows; i += warps) {
        const float sum = kstudy_warp_row_sum(a, tile + i * pitch, lane);
        if (lane == 0) count += kstudy_store_row(a, r0 + i, sum);
      }
    }
    __syncthreads();  // the next tile overwrites this one
  }
  kstudy_add_flagged(a.flagged, count);
}

#endif  // KSTUDY_FUSED_CUDA_KERNELS_CUH
