// The BF16 tensor-core peak probe (kstudy/compute_roofs.hpp): wgmma.mma_async m64n256k16 back to back from
// operands that stay in shared memory, no loads, every SM busy. The roof a BF16 GEMM is divided by must be
// one no real kernel beats: cuBLAS is not (the gemm_bf16 ladder's warp-specialised wgmma rung ran at 1.02-1.08x
// cuBLAS on the H200, data/h200-2026-12-02-s12/hopper_gemm.h5), this loop is the same instruction with
// nothing else to wait for. Compiled for sm_90a only where the build targets sm_90 (src/CMakeLists.txt); the
// kernel reports through its output whether the image that ran was sm_90a code.
#include <cuda_runtime.h>

#include <cstdint>

#include "kstudy/compute_roofs.hpp"
#include "kstudy/cuda_escape.hpp"
#include "kstudy/support/hopper_ptx.hpp"

namespace kstudy::cuda_escape {
namespace {

constexpr int peak_warpgroups = 2;      // per block, one block per SM (128 accumulators a thread)
constexpr int peak_iterations = 4096;   // k16 groups of 4 per warpgroup: ~2 ms on an H200
constexpr int peak_a_bytes = 64 * 128;  // one warpgroup's 64 x 64 A tile, 128-byte rows
constexpr int peak_b_bytes = 64 * 512;  // a 64 x 256 B tile as four 64-column boxes of 8 KB
constexpr int peak_shared_bytes = peak_warpgroups * peak_a_bytes + peak_b_bytes + 1024;

// out[0] = 1 where this is sm_90a code (and the multiplies ran), 0 elsewhere; out[1] only if the sum of the
// accumulators is impossible, so no wgmma is dead code. Operands: bf16 values in [-1, 1) from a hash (zeros
// would draw less power and flatter the clock).
__global__ void __launch_bounds__(peak_warpgroups * 128, 1) bf16_wgmma_peak_kernel(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace kstudy::hopper;
  extern __shared__ unsigned char raw[];
  const std::uint32_t base = (shared_address(raw) + 1023u) & ~1023u;
  unsigned char* tiles = raw + (base - shared_address(raw));
  for (int i = static_cast<int>(threadIdx.x); i < (peak_shared_bytes - 1024) / 2; i += blockDim.x) {
    std::uint32_t x = std::uint32_t(i) * 2654435761u ^ blockIdx.x;
    x ^= x >> 15;
    x *= 2246822519u;
    const float v = float(x >> 9) * (1.0f / 4194304.0f) - 1.0f;
    reinterpret_cast<std::uint16_t*>(tiles)[i] = static_cast<std::uint16_t>(__float_as_uint(v) >> 16);
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // ordinary stores, read by the tensor cores
  __syncthreads();
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const std::uint32_t a = base + warpgroup * peak_a_bytes, b = base + peak_warpgroups * peak_a_bytes;
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  for (int it = 0; it < peak_iterations; ++it) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_m64n256k16_bf16(d, matrix_descriptor(a + kk * 32, 16, 1024),
                            matrix_descriptor(b + kk * 16 * 128, 8192, 1024), 1);
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 128; ++i) sum += d[i];
  if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = 1;
  if (sum == -1234.5f) out[1] = 1;
#else
  if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = 0;
#endif
}

}  // namespace

std::int64_t run_bf16_wgmma_probe() {
  static int* out = nullptr;
  static int sms = 0;
  static bool sm90a = false;
  if (out == nullptr) {
    KSTUDY_CUDA_CHECK(cudaMalloc(&out, 2 * sizeof(int)));
    KSTUDY_CUDA_CHECK(cudaMemset(out, 0, 2 * sizeof(int)));
    int device = 0;
    KSTUDY_CUDA_CHECK(cudaGetDevice(&device));
    KSTUDY_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    KSTUDY_CUDA_CHECK(
        cudaFuncSetAttribute(bf16_wgmma_peak_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, peak_shared_bytes));
    bf16_wgmma_peak_kernel<<<1, peak_warpgroups * 128, peak_shared_bytes>>>(out);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
    int ran = 0;
    KSTUDY_CUDA_CHECK(cudaMemcpy(&ran, out, sizeof(int), cudaMemcpyDeviceToHost));
    sm90a = ran == 1;
  }
  if (!sm90a) return 0;
  bf16_wgmma_peak_kernel<<<sms, peak_warpgroups * 128, peak_shared_bytes>>>(out);
  KSTUDY_CUDA_CHECK(cudaGetLastError());
  return std::int64_t(sms) * peak_warpgroups * peak_iterations * 4 * (2 * 64 * 256 * 16);
}

}  // namespace kstudy::cuda_escape
