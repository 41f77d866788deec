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

enum class gemm_roof_precision {
  fp32,  // cublasGemmEx float32 in and out, CUBLAS_COMPUTE_32F, pedantic math (no TF32): SGEMM
  tf32,  // float32 in and out, CUBLAS_COMPUTE_32F_FAST_TF32
  bf16,  // bfloat16 A and B, float32 C, CUBLAS_COMPUTE_32F
  fp16,  // IEEE binary16 A and B, float32 C, CUBLAS_COMPUTE_32F
};
// Every precision with a cuBLAS roof, in the order the roofs are measured.
constexpr gemm_roof_precision gemm_roof_precisions[] = {gemm_roof_precision::fp32, gemm_roof_precision::tf32,
                                                        gemm_roof_precision::bf16, gemm_roof_precision::fp16};
// cublas_fp32_gemm, cublas_tf32_gemm, cublas_bf16_gemm, cublas_fp16_gemm
const char* gemm_roof_name(gemm_roof_precision precision);

// The tensor-core peak probes (sm_90a builds on a compute capability 9.0 GPU): one block of 2 warpgroups per
// SM, each issuing wgmma.mma_async m64n256k16 (BF16, FP16) or m64n256k8 (TF32) back to back on operands
// resident in shared memory. Queues one launch on the legacy default stream and returns its flops; returns 0, queuing
// nothing, where no sm_90a code runs (another GPU, or a build without it), so that the roof is left out rather than
// wrong. Each is a roof together with cuBLAS at the same input type: tensor_roof_name is the best of the two.
enum class tensor_peak_precision { bf16, fp16, tf32 };
constexpr tensor_peak_precision tensor_peak_precisions[] = {tensor_peak_precision::bf16, tensor_peak_precision::fp16,
                                                            tensor_peak_precision::tf32};
std::int64_t run_wgmma_peak_probe(tensor_peak_precision precision);
// device_{bf16,fp16,tf32}_wgmma (the probes); device_{bf16,fp16,tf32}_tensor (the roofs).
const char* wgmma_probe_name(tensor_peak_precision precision);
const char* tensor_roof_name(tensor_peak_precision precision);
gemm_roof_precision cublas_roof_of(tensor_peak_precision precision);  // cuBLAS at the same input type

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
