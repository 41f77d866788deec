// The declarations of gemm_tensor_cuda.cu's variants, compiled in every build
// (kstudy/support/cuda_registration.hpp): a CPU build knows them as not in this build.
#include <string>
#include <utility>

#include "gemm/gemm.hpp"
#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::gemm {
namespace {

void declare_cuda(gemm_precision precision, const std::string& name, const std::string& family,
                  const std::string& description, table_layout layout, int rung, gpu_requirement needs = {}) {
  auto info = cuda_variant(variant_info_for(precision, name, family, description, layout),
                           family == "cublas" ? implementation::vendor_library : implementation::handwritten_cuda);
  info.rung = rung;
  info.needs = std::move(needs);
  // One kernel (named beside each declaration), or one cuBLAS call: its kernel count is cuBLAS's choice, one
  // at these shapes.
  info.kernels_launched = 1;
  variant_declaration{std::move(info)};
}

// The vendor rungs: one cublasGemmEx_64 call in each layout, and the row-major call as PyTorch makes it.
void declare_cublas(gemm_precision precision) {
  const std::string op = operation_name(precision);
  const char* vendor =
      precision == gemm_precision::bf16   ? "cublasGemmEx_64, CUDA_R_16BF A and B, CUDA_R_32F C, CUBLAS_COMPUTE_32F"
      : precision == gemm_precision::fp16 ? "cublasGemmEx_64, CUDA_R_16F A and B, CUDA_R_32F C, CUBLAS_COMPUTE_32F"
                                          : "cublasGemmEx_64, CUDA_R_32F A, B and C, CUBLAS_COMPUTE_32F_FAST_TF32";
  declare_cuda(precision, op + "_cublas_row_major", "cublas",
               std::string(vendor) + " (row-major as column-major C^T = B^T A^T)", table_layout::row_major, 0);
  declare_cuda(precision, op + "_cublas_feature_major", "cublas", vendor, table_layout::feature_major, 0);
  declare_cuda(precision, op + "_cublas_as_torch", "cublas",
               "the row-major call configured as PyTorch's at::cuda::blas::gemm: cublasGemmEx (32-bit extents, the "
               "_64 entry point only past them), CUBLAS_GEMM_DEFAULT_TENSOR_OP, a 32 MiB workspace set on the handle "
               "after its stream; " +
                   std::string(vendor).substr(std::string(vendor).find(", ") + 2),
               table_layout::row_major, 0);
}

void declare_precision(gemm_precision precision, const char* naive_description, const char* smem_description) {
  const std::string op = operation_name(precision);
  // Every handwritten rung multiplies on sm_80's tensor-core formats (cuBLAS picks what the GPU has).
  const std::string format = precision == gemm_precision::tf32 ? "TF32" : "bf16";
  const gpu_requirement wmma{80, false, format + " wmma"};
  const gpu_requirement wmma_and_copies{80, false, format + " wmma, cp.async"};
  const gpu_requirement mma{80, false, "mma.sync on " + format + ", cp.async"};
  declare_cuda(precision, op + "_wmma_naive", "gemm_tensor_cuda", naive_description, table_layout::row_major, 1,
               wmma);  // wmma_naive_kernel
  declare_cuda(precision, op + "_wmma_smem", "gemm_tensor_cuda", smem_description, table_layout::row_major, 2,
               wmma_and_copies);  // wmma_smem_kernel
  if (precision == gemm_precision::bf16)
    declare_cuda(precision, op + "_mma_ldmatrix", "gemm_tensor_cuda",
                 "rung 2's loader and 4-stage cp.async pipeline, the multiply in PTX: 128 x 256 x 32 block "
                 "tiles, 8 warps of 64 x 64, ldmatrix.x4 (.trans for B) feeding mma.sync m16n8k16 (each A "
                 "fragment used 8 times, each B fragment 4), guarded float2 stores of C from registers",
                 table_layout::row_major, 3, mma);  // mma_bf16_kernel
  if (precision == gemm_precision::tf32)
    declare_cuda(precision, op + "_mma", "gemm_tensor_cuda",
                 "rung 2's loader and cp.async pipeline, the multiply in PTX mma.sync m16n8k8 tf32: A "
                 "fragments by ldmatrix.x4 on 32-bit data, B by conflict-free 32-bit loads (rows padded to "
                 "8 mod 32 words), both rounded with cvt.rna.tf32; fastest of 4 tilings (128 x 128, "
                 "128 x 256, 256 x 128; 64 x 32 or 64 x 64 warps; 3 stages) x 2 block orders, timed in "
                 "prepare()",
                 table_layout::row_major, 3, mma);  // mma_tuned_kernel
  else
    declare_cuda(precision, op + "_mma_autotuned", "gemm_tensor_cuda",
                 "rung 3's kernel over 6 configurations (128 x 256, 128 x 128 with 2 blocks per SM, "
                 "256 x 128; 64 x 32 or 64 x 64 warps; 3 or 4 stages) x 2 block orders (row by row, or "
                 "8 block rows walked together for L2 reuse), the fastest timed in prepare()",
                 table_layout::row_major, 4, mma);  // mma_tuned_kernel
  declare_cublas(precision);
}

[[maybe_unused]] const int declared = [] {
  declare_precision(
      gemm_precision::tf32,
      "one warp per 16 x 16 C tile, wmma m16n16k8 TF32 fragments loaded straight from global memory (inputs "
      "rounded with __float_to_tf32), 4 warps a block along n",
      "128 x 128 x 32 block tiles in padded shared memory, double-buffered with 16-byte cp.async; 8 warps of "
      "64 x 32, 4 x 2 accumulator fragments reusing each loaded fragment");
  declare_precision(
      gemm_precision::bf16,
      "one warp per 16 x 16 C tile, wmma m16n16k16 BF16 fragments loaded straight from global memory, 4 warps a "
      "block along n",
      "128 x 128 x 32 block tiles in padded shared memory, 4-stage 16-byte cp.async pipeline; 8 warps of 64 x 32, "
      "4 x 2 accumulator fragments reusing each loaded fragment");
  // gemm_fp16: cuBLAS and the Hopper rungs (gemm_wgmma_cuda_info.cpp) only; the WMMA / mma.sync ladder is BF16's.
  declare_cublas(gemm_precision::fp16);
  return 0;
}();

}  // namespace
}  // namespace kstudy::gemm
