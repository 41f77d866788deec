// kstudy-build: also sm_90a
// The BF16, FP16 and TF32 tensor-core peak probes (kstudy/compute_roofs.hpp): wgmma.mma_async m64n256k16
// (m64n256k8 for TF32) back to back from operands that stay in shared memory, no loads, every SM busy. The roof
// a BF16 (FP16, TF32) GEMM is divided by must be one no real kernel beats: cuBLAS is not (the gemm_bf16 ladder's
// warp-specialised wgmma rung ran at 1.02-1.08x cuBLAS on the H200, data/h200-2026-12-02-s12/hopper_gemm.h5), this loop
// is the same instruction with nothing else to wait for. Compiled for sm_90a only where the build targets sm_90
// (src/CMakeLists.txt); the kernel reports through its output whether the image that ran was sm_90a code.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kstudy/compute_roofs.hpp"
#include "kstudy/cuda_escape.hpp"
#include "kstudy/support/hopper_ptx.hpp"

namespace kstudy::cuda_escape {
namespace {

constexpr int peak_warpgroups = 2;      // per block, one block per SM (128 accumulators a thread)
constexpr int peak_iterations = 4096;   // k16 groups of 4 per warpgroup: ~2 ms on an H200
constexpr int peak_a_bytes = 64 * 128;  // one warpgroup's A tile, 64 rows of 128 bytes (64 16-bit or 32 TF32 k)
// A 64 x 256 16-bit B tile as four 64-column boxes of 8 KB (N-major), or a K-major 32 x 256 TF32 one (256 rows of
// 128 bytes): 32 KB either way.
constexpr int peak_b_bytes = 64 * 512;
constexpr int peak_shared_bytes = peak_warpgroups * peak_a_bytes + peak_b_bytes + 1024;

// out[0] = 1 where this is sm_90a code (and the multiplies ran), 0 elsewhere; out[1] only if the sum of the
// accumulators is impossible, so no wgmma is dead code. Operands: values in [-1, 1) from a hash (zeros would
// draw less power and flatter the clock), as bf16 (truncated), fp16 (rounded to nearest) or float (read as TF32).
template <tensor_peak_precision P>
__global__ void __launch_bounds__(peak_warpgroups * 128, 1) wgmma_peak_kernel(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace kstudy::hopper;
  extern __shared__ unsigned char raw[];
  const std::uint32_t base = (shared_address(raw) + 1023u) & ~1023u;
  unsigned char* tiles = raw + (base - shared_address(raw));
  constexpr int element_bytes = P == tensor_peak_precision::tf32 ? 4 : 2;
  for (int i = static_cast<int>(threadIdx.x); i < (peak_shared_bytes - 1024) / element_bytes; i += blockDim.x) {
    std::uint32_t x = std::uint32_t(i) * 2654435761u ^ blockIdx.x;
    x ^= x >> 15;
    x *= 2246822519u;
    const float v = float(x >> 9) * (1.0f / 4194304.0f) - 1.0f;
    if constexpr (P == tensor_peak_precision::tf32)
      reinterpret_cast<float*>(tiles)[i] = v;
    else if constexpr (P == tensor_peak_precision::fp16)
      reinterpret_cast<std::uint16_t*>(tiles)[i] = __half_as_ushort(__float2half_rn(v));
    else
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
    for (int kk = 0; kk < 4; ++kk) {
      if constexpr (P == tensor_peak_precision::tf32)
        wgmma_m64n256k8_tf32(d, matrix_descriptor(a + kk * 32, 16, 1024), matrix_descriptor(b + kk * 32, 16, 1024), 1);
      else if constexpr (P == tensor_peak_precision::fp16)
        wgmma_m64n256k16_f16(d, matrix_descriptor(a + kk * 32, 16, 1024),
                             matrix_descriptor(b + kk * 16 * 128, 8192, 1024), 1);
      else
        wgmma_m64n256k16_bf16(d, matrix_descriptor(a + kk * 32, 16, 1024),
                              matrix_descriptor(b + kk * 16 * 128, 8192, 1024), 1);
    }
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

// One probe's launch state, set up on its first run: the output flags, the SM count, whether sm_90a ran.
template <tensor_peak_precision P>
std::int64_t run_probe() {
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
        cudaFuncSetAttribute(wgmma_peak_kernel<P>, cudaFuncAttributeMaxDynamicSharedMemorySize, peak_shared_bytes));
    wgmma_peak_kernel<P><<<1, peak_warpgroups * 128, peak_shared_bytes>>>(out);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
    int ran = 0;
    KSTUDY_CUDA_CHECK(cudaMemcpy(&ran, out, sizeof(int), cudaMemcpyDeviceToHost));
    sm90a = ran == 1;
  }
  if (!sm90a) return 0;
  wgmma_peak_kernel<P><<<sms, peak_warpgroups * 128, peak_shared_bytes>>>(out);
  KSTUDY_CUDA_CHECK(cudaGetLastError());
  constexpr std::int64_t k = P == tensor_peak_precision::tf32 ? 8 : 16;  // per instruction
  return std::int64_t(sms) * peak_warpgroups * peak_iterations * 4 * (2 * 64 * 256 * k);
}

// What each probe is called, the roof it makes with cuBLAS, and cuBLAS's precision there.
struct probe_entry {
  tensor_peak_precision precision;
  std::int64_t (*run)();
  const char* probe_name;
  const char* roof_name;
  gemm_roof_precision cublas;
};
constexpr probe_entry probe_entries[] = {{tensor_peak_precision::bf16, run_probe<tensor_peak_precision::bf16>,
                                          "device_bf16_wgmma", "device_bf16_tensor", gemm_roof_precision::bf16},
                                         {tensor_peak_precision::fp16, run_probe<tensor_peak_precision::fp16>,
                                          "device_fp16_wgmma", "device_fp16_tensor", gemm_roof_precision::fp16},
                                         {tensor_peak_precision::tf32, run_probe<tensor_peak_precision::tf32>,
                                          "device_tf32_wgmma", "device_tf32_tensor", gemm_roof_precision::tf32}};

const probe_entry& entry_of(tensor_peak_precision precision) {
  for (const auto& e : probe_entries)
    if (e.precision == precision) return e;
  return probe_entries[0];
}

}  // namespace

std::int64_t run_wgmma_peak_probe(tensor_peak_precision precision) { return entry_of(precision).run(); }
const char* wgmma_probe_name(tensor_peak_precision precision) { return entry_of(precision).probe_name; }
const char* tensor_roof_name(tensor_peak_precision precision) { return entry_of(precision).roof_name; }
gemm_roof_precision cublas_roof_of(tensor_peak_precision precision) { return entry_of(precision).cublas; }

}  // namespace kstudy::cuda_escape
