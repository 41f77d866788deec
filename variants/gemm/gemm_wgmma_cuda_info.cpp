// The declarations of gemm_wgmma_cuda.cu's variants, compiled in every build
// (kstudy/support/cuda_registration.hpp): a build without CUDA or without sm_90a knows them as not in this build.
#include <string>
#include <utility>

#include "gemm/gemm.hpp"
#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::gemm {
namespace {

void declare_cuda(gemm_precision precision, const std::string& name, const std::string& description, int rung,
                  int kernels_launched) {
  auto info = cuda_variant(variant_info_for(precision, name, "gemm_tensor_cuda", description, table_layout::row_major));
  info.rung = rung;
  info.kernels_launched = kernels_launched;
  info.needs = {90, /*arch_specific=*/true, "wgmma, TMA, setmaxnreg"};
  variant_declaration{std::move(info)};
}

// Rungs 5 to 8 of a 16-bit operation (gemm_bf16, gemm_fp16: the same kernels, `instruction` naming the
// multiply's input type where it is not BF16's).
void declare_16_bit_rungs(gemm_precision precision, const std::string& instruction) {
  const std::string op = operation_name(precision);
  declare_cuda(precision, op + "_wgmma_tma",
               "Hopper wgmma.mma_async m64n256k16" + instruction +
                   " from shared-memory descriptors (A K-major, B N-major), 128 x 256 x 64 block tiles, 2 warpgroups "
                   "of 64 x 256; tiles by TMA (cp.async.bulk.tensor, 128-byte swizzle) into 4 stages with full / "
                   "empty mbarriers, thread 0 also issuing the copies; sm_90a",
               5, /*kernels_launched=*/1);  // wgmma_kernel (+ row-padding copies where k or n % 8 != 0)
  declare_cuda(precision, op + "_wgmma_ws",
               "rung 5 with warp specialisation: a producer warpgroup issues the TMA copies (setmaxnreg.dec 40), "
               "two consumer warpgroups multiply (setmaxnreg.inc 232) and keep one wgmma group in flight, "
               "releasing each stage when its group retires; sm_90a",
               6, /*kernels_launched=*/1);  // wgmma_kernel
  declare_cuda(precision, op + "_wgmma_cluster",
               "rung 6 in clusters of 2 blocks along m sharing B's tile: each block loads its own A box and half "
               "of B's boxes, multicast by TMA to both blocks (half the L2-to-SM traffic for B); a stage is "
               "refilled once the consumers of both blocks have released it (remote mbarrier arrivals); sm_90a",
               7, /*kernels_launched=*/1);  // wgmma_kernel
  declare_cuda(precision, op + "_wgmma_persistent",
               "rung 7 with a persistent grid (as many 2-block clusters as fit at once, each looping over tiles "
               "in the grouped order): the stages run on across tiles, so the producer loads the next tile "
               "while the consumers store the current one; sm_90a",
               8, /*kernels_launched=*/1);  // wgmma_kernel
}

[[maybe_unused]] const int declared = [] {
  declare_16_bit_rungs(gemm_precision::bf16, "");
  // gemm_fp16: BF16's rungs with the binary16 instruction, numbered as BF16's so that the two Hopper ladders line
  // up (FP16 has no mma.sync rungs 1-4; cuBLAS is its rung 0).
  declare_16_bit_rungs(gemm_precision::fp16, " f16");
  declare_cuda(gemm_precision::tf32, "gemm_tf32_wgmma_ws",
               "the BF16 ladder's warp-specialised wgmma kernel in TF32: wgmma.mma_async m64n256k8 tf32 "
               "with both operands K-major (TF32 has no transposed form), so B is first transposed into "
               "B^T on the stream (32 x 32 shared-memory tiles, inside the timed run); 128 x 256 x 32 "
               "tiles by TMA, 4 stages, a producer and two consumer warpgroups; inputs read as TF32 "
               "(truncated, the hardware's rounding); sm_90a",
               4, /*kernels_launched=*/2);  // transpose_b_kernel, wgmma_kernel
  return 0;
}();

}  // namespace
}  // namespace kstudy::gemm
