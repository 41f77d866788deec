#pragma once
// Compute roofs measured in the same run as the variants (kstudy/ceilings.hpp records them): what this GPU
// sustains in float32 FMAs and in cuBLAS GEMMs at each input precision, so that a compute-bound operation's
// TFLOP/s is quoted as a fraction of a measured ceiling, not of a datasheet. Kokkos-free and free of CUDA
// headers; defined only in the CUDA flavour (KSTUDY_HAVE_CUDA_VARIANTS).
#include <cstdint>
#include <memory>

namespace kstudy::cuda_escape {

// The float32 FMA probe: every SM filled with 8 blocks of 256 threads, each thread running 8 independent
// FMA chains (enough to hide the FMA latency on every scheduler) with operands in registers only. Queues one
// launch on the legacy default stream (not synchronised: timed with CUDA events as device variants are) and
// returns the flops it performs (2 per FMA).
std::int64_t run_fp32_fma_probe();

// The BF16 tensor-core probe (sm_90a builds on a compute capability 9.0 GPU): one block of 2 warpgroups per
// SM, each issuing wgmma.mma_async m64n256k16 back to back on operands resident in shared memory. Queues one
// launch on the legacy default stream and returns its flops; returns 0, queuing nothing, where no sm_90a code
// runs (another GPU, or a build without it), so that the roof is left out rather than wrong.
std::int64_t run_bf16_wgmma_probe();

enum class gemm_roof_precision {
  fp32,  // cublasGemmEx float32 in and out, CUBLAS_COMPUTE_32F, pedantic math (no TF32): SGEMM
  tf32,  // float32 in and out, CUBLAS_COMPUTE_32F_FAST_TF32
  bf16,  // bfloat16 A and B, float32 C, CUBLAS_COMPUTE_32F
};
const char* gemm_roof_name(gemm_roof_precision precision);  // cublas_fp32_gemm, cublas_tf32_gemm, cublas_bf16_gemm

// A square cuBLAS GEMM C = A B of extent n at one precision on device buffers filled with values in
// [-1, 1) (zeros would draw less power and flatter the clock), created once; run() queues one GEMM on the
// legacy default stream (cuBLAS' default), not synchronised.
class cublas_gemm_probe {
 public:
  cublas_gemm_probe(gemm_roof_precision precision, std::int64_t n);
  ~cublas_gemm_probe();
  cublas_gemm_probe(const cublas_gemm_probe&) = delete;
  cublas_gemm_probe& operator=(const cublas_gemm_probe&) = delete;
  void run();
  std::int64_t flops() const;  // 2 n^3

 private:
  struct state;
  std::unique_ptr<state> m_state;
};

}  // namespace kstudy::cuda_escape
