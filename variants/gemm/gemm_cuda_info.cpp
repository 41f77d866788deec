// The declarations of gemm_cuda.cu's variants, compiled in every build (kstudy/support/cuda_registration.hpp):
// a CPU build knows them as not in this build.
#include <string>
#include <utility>

#include "gemm/gemm.hpp"
#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::gemm {
namespace {

void declare_cuda(const std::string& name, const std::string& family, const std::string& description, int rung,
                  table_layout layout = table_layout::row_major) {
  auto info = cuda_variant(variant_info_for(gemm_precision::fp32, name, family, description, layout),
                           family == "cublas" ? implementation::vendor_library : implementation::handwritten_cuda);
  info.rung = rung;
  info.kernels_launched = 1;  // one kernel (or one cublasSgemm call)
  variant_declaration{std::move(info)};
}

[[maybe_unused]] const int declared = [] {
  declare_cuda("gemm_naive", "gemm_cuda",
               "one thread per element of C, 32 x 32 blocks, threadIdx.x walking rows: strided A reads and C writes",
               1);
  declare_cuda("gemm_coalesced", "gemm_cuda",
               "as naive with the two index lines swapped: threadIdx.x walks columns (coalesced B reads, C writes)", 2);
  declare_cuda("gemm_smem", "gemm_cuda", "32 x 32 tiles of A and B staged in shared memory, one output per thread", 3);
  declare_cuda("gemm_regtile", "gemm_cuda",
               "128 x 128 block tiles, 8-deep k slices, 256 threads each accumulating an 8 x 8 register tile", 4);
  declare_cuda(
      "gemm_vectorized", "gemm_cuda",
      "as regtile with float4 global loads (A transposed into shared memory), float4 shared reads and C stores "
      "(scalar where k or n is not a multiple of 4)",
      5);
  declare_cuda("gemm_warptile", "gemm_cuda",
               "warp tiles of 32 x 64 (4 x 8 lanes of strided 8 x 8 micro-tiles), A k-contiguous in a padded tile: "
               "conflict-free float4 shared reads",
               6);
  declare_cuda("gemm_double_buffer", "gemm_cuda",
               "as warptile with two shared-memory stages filled by cp.async: slice t + 1 loads during slice t's math",
               7);
  declare_cuda(
      "gemm_autotuned", "gemm_cuda",
      "the double-buffer kernel over 17 (BM, BN, BK, WM, WN, TM, TN, stages, min_blocks, swizzle) configurations "
      "(up to 128 x 256 tiles of 8 x 16 per thread, one block per SM), the fastest on the problem chosen in prepare",
      8);
  declare_cuda("gemm_prefetch", "gemm_cuda",
               "128 x 128 tiles of 8 x 16 outputs a thread (two 4-warp blocks per SM) with register double-buffered "
               "fragments: step l + 1's shared reads issue before step l's FMAs; A transposed in shared memory "
               "(staged through registers), B by cp.async, two stages of BK = 8",
               9);
  declare_cuda("gemm_cublas", "cublas",
               "cublasSgemm_64 on C^T = B^T A^T (row-major as column-major), fp32 math (no TF32)", 0);
  declare_cuda("gemm_cublas_feature_major", "cublas", "cublasSgemm_64 on column-major A, B, C, fp32 math (no TF32)", 0,
               table_layout::feature_major);
  return 0;
}();

}  // namespace
}  // namespace kstudy::gemm
