// The compute roofs (kstudy/compute_roofs.hpp): a float32 FMA probe kernel and cuBLAS GEMMs at each input
// precision. Part of kstudy_cuda_tools (the framework's CUDA tools), not a variant.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <utility>

#include "kstudy/support/cublas_check.hpp"
#include "kstudy/compute_roofs.hpp"
#include "kstudy/cuda_escape.hpp"

namespace kstudy::cuda_escape {
namespace {

constexpr int fma_chains = 8;
constexpr int fma_iterations = 1 << 15;
constexpr int fma_block = 256;
constexpr int fma_blocks_per_sm = 8;

// Each chain is a <- a * b + c with b just below 1, so values stay finite; the result is written only when
// it equals an impossible value, which the compiler cannot prove, so no FMA is dead code.
__global__ void __launch_bounds__(fma_block) fp32_fma_probe_kernel(float* sink, float b, float c) {
  float a[fma_chains];
#pragma unroll
  for (int i = 0; i < fma_chains; ++i) a[i] = float(threadIdx.x + i) * 1e-3f;
  for (int it = 0; it < fma_iterations; ++it) {
#pragma unroll
    for (int i = 0; i < fma_chains; ++i) a[i] = fmaf(a[i], b, c);
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < fma_chains; ++i) sum += a[i];
  if (sum == -1.0f) sink[0] = sum;
}

// Into whichever of f (float32), h (bfloat16) and g (binary16) is not null.
__global__ void fill_kernel(float* f, __nv_bfloat16* h, __half* g, std::int64_t count, std::uint32_t salt) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    std::uint32_t x = std::uint32_t(i) * 2654435761u ^ salt;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    const float v = float(x >> 8) * (1.0f / 8388608.0f) - 1.0f;  // [-1, 1)
    if (f != nullptr) f[i] = v;
    if (h != nullptr) h[i] = __float2bfloat16(v);
    if (g != nullptr) g[i] = __float2half_rn(v);
  }
}

int multiprocessors() {
  int device = 0, sms = 0;
  KSTUDY_CUDA_CHECK(cudaGetDevice(&device));
  KSTUDY_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

}  // namespace

std::int64_t run_fp32_fma_probe() {
  static float* sink = nullptr;
  if (sink == nullptr) KSTUDY_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  const int blocks = multiprocessors() * fma_blocks_per_sm;
  fp32_fma_probe_kernel<<<blocks, fma_block>>>(sink, 0.999999f, 1e-7f);
  KSTUDY_CUDA_CHECK(cudaGetLastError());
  return std::int64_t(2) * fma_chains * fma_iterations * fma_block * blocks;
}

const char* gemm_roof_name(gemm_roof_precision precision) {
  // By the enumerator's value (fp32, tf32, bf16, fp16).
  static constexpr const char* names[] = {"cublas_fp32_gemm", "cublas_tf32_gemm", "cublas_bf16_gemm",
                                          "cublas_fp16_gemm"};
  static_assert(std::size(names) == std::size(gemm_roof_precisions), "a name for every cuBLAS roof");
  return names[static_cast<int>(precision)];
}

struct cublas_gemm_probe::state {
  gemm_roof_precision precision = gemm_roof_precision::fp32;
  std::int64_t n = 0;
  cublasHandle_t handle = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  float* c = nullptr;
  ~state() {
    if (handle != nullptr) cublasDestroy(handle);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
};

cublas_gemm_probe::cublas_gemm_probe(gemm_roof_precision precision, std::int64_t n)
    : m_state(std::make_unique<state>()) {
  auto& s = *m_state;
  s.precision = precision;
  s.n = n;
  const std::int64_t count = n * n;
  const bool bf16 = precision == gemm_roof_precision::bf16, fp16 = precision == gemm_roof_precision::fp16;
  const std::size_t input_bytes = std::size_t(count) * (bf16 || fp16 ? sizeof(std::uint16_t) : sizeof(float));
  KSTUDY_CUDA_CHECK(cudaMalloc(&s.a, input_bytes));
  KSTUDY_CUDA_CHECK(cudaMalloc(&s.b, input_bytes));
  KSTUDY_CUDA_CHECK(cudaMalloc(&s.c, std::size_t(count) * sizeof(float)));
  const int blocks = multiprocessors() * 8;
  for (auto [pointer, salt] : {std::pair<void*, std::uint32_t>{s.a, 0x1234u}, {s.b, 0x9876u}}) {
    fill_kernel<<<blocks, 256>>>(bf16 || fp16 ? nullptr : static_cast<float*>(pointer),
                                 bf16 ? static_cast<__nv_bfloat16*>(pointer) : nullptr,
                                 fp16 ? static_cast<__half*>(pointer) : nullptr, count, salt);
    KSTUDY_CUDA_CHECK(cudaGetLastError());
  }
  KSTUDY_CUDA_CHECK(cudaDeviceSynchronize());
  KSTUDY_CUBLAS_CHECK(cublasCreate(&s.handle));
  // Pedantic math for the float32 roof: cuBLAS may not substitute TF32 for an SGEMM.
  KSTUDY_CUBLAS_CHECK(
      cublasSetMathMode(s.handle, precision == gemm_roof_precision::fp32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));
}

cublas_gemm_probe::~cublas_gemm_probe() = default;

void cublas_gemm_probe::run() {
  auto& s = *m_state;
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t input = s.precision == gemm_roof_precision::bf16   ? CUDA_R_16BF
                               : s.precision == gemm_roof_precision::fp16 ? CUDA_R_16F
                                                                          : CUDA_R_32F;
  const cublasComputeType_t compute =
      s.precision == gemm_roof_precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const int n = static_cast<int>(s.n);
  KSTUDY_CUBLAS_CHECK(cublasGemmEx(s.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, s.a, input, n, s.b, input, n,
                                   &beta, s.c, CUDA_R_32F, n, compute, CUBLAS_GEMM_DEFAULT));
}

std::int64_t cublas_gemm_probe::flops() const { return 2 * m_state->n * m_state->n * m_state->n; }

}  // namespace kstudy::cuda_escape
