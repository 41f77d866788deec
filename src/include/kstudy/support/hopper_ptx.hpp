#pragma once
// Hopper's own instructions as inline PTX, for the code that needs them (the gemm wgmma rungs, the framework's
// tensor-core peak probes): shared-memory addresses, mbarriers, TMA tile loads (multicast to a cluster too),
// cluster ranks and barriers, wgmma matrix descriptors, m64n256k16 BF16 / FP16 and m64n256k8 TF32 multiplies,
// setmaxnreg. Device code for the arch-specific sm_90a target only: everything here exists where
// __CUDA_ARCH_FEAT_SM90_ALL is defined (nvcc -gencode=arch=compute_90a,code=sm_90a) and nowhere else, so a caller
// guards its kernel bodies the same way.
#if defined(__CUDACC__)
#include <cuda.h>  // CUtensorMap

#include <cstdint>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
namespace kstudy::hopper {

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void barrier_init(std::uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void barrier_expect_bytes(std::uint32_t bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void barrier_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Returns once the barrier's phase of the given parity has completed.
__device__ __forceinline__ void barrier_wait(std::uint32_t bar, unsigned parity) {
  std::uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (done == 0);
}
// A box of the tensor map at coordinates (x innermost, y) into shared memory, completing on bar.
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, int x, int y,
                                            std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
// Thread-block clusters (sm_90): the block's rank in its cluster, a barrier across all the cluster's threads
// (release / acquire: what one block wrote to its shared memory, its mbarrier inits included, is visible to the
// others after it; also what keeps a block from exiting while a peer may still write into it), an arrival on
// the mbarrier at the same shared-memory offset in the cluster's block `rank` (itself included), and a tile load
// that the copy engine writes to the same offset in every block of `cta_mask`, completing bytes on the mbarrier
// at bar's offset in each of them.
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned rank = 0;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// The arrival is a release at CTA scope (the instruction's default, as CUTLASS's ClusterBarrier::arrive): what
// it orders is that this thread's reads of a stage (wgmma's, retired by wgmma.wait_group) are over before a
// peer's copy overwrites the stage, and no write of this thread needs to be visible in the peer. A cluster-scope
// release fences every outstanding memory operation of the thread against the whole cluster first.
__device__ __forceinline__ void barrier_arrive_cluster(std::uint32_t bar, unsigned rank) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d_multicast(std::uint32_t dst, const CUtensorMap* map, int x, int y,
                                                      std::uint32_t bar, std::uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(bar), "h"(cta_mask)
      : "memory");
}
// A 128-byte-swizzled shared-memory matrix descriptor: start address, leading and stride byte offsets (all
// in 16-byte units), layout type 1 (SWIZZLE_128B) in bits 62-63; base offset 0 (stages are 1,024-aligned).
__device__ __forceinline__ std::uint64_t matrix_descriptor(std::uint32_t address, std::uint32_t leading,
                                                           std::uint32_t stride) {
  return std::uint64_t((address & 0x3FFFF) >> 4) | (std::uint64_t((leading & 0x3FFFF) >> 4) << 16) |
         (std::uint64_t((stride & 0x3FFFF) >> 4) << 32) | (std::uint64_t(1) << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}
// wgmma.mma_async m64n256 with A and B from shared-memory descriptors into 128 fp32 accumulators a thread:
// SHAPE_TYPES names the shape and types, IMMEDIATES the scale (and, for 16-bit types, transpose) immediates.
#define KSTUDY_HOPPER_F8(i)                                                                                   \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define KSTUDY_HOPPER_D128                                                                          \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, " \
  "%97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, "   \
  "%113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define KSTUDY_HOPPER_WGMMA_M64N256(SHAPE_TYPES, IMMEDIATES)                                                          \
  asm volatile(                                                                                                       \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                                   \
      "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {" KSTUDY_HOPPER_D128 "}, %128, %129, p, " IMMEDIATES ";\n}\n"    \
      : KSTUDY_HOPPER_F8(0), KSTUDY_HOPPER_F8(8), KSTUDY_HOPPER_F8(16), KSTUDY_HOPPER_F8(24), KSTUDY_HOPPER_F8(32),   \
        KSTUDY_HOPPER_F8(40), KSTUDY_HOPPER_F8(48), KSTUDY_HOPPER_F8(56), KSTUDY_HOPPER_F8(64), KSTUDY_HOPPER_F8(72), \
        KSTUDY_HOPPER_F8(80), KSTUDY_HOPPER_F8(88), KSTUDY_HOPPER_F8(96), KSTUDY_HOPPER_F8(104),                      \
        KSTUDY_HOPPER_F8(112), KSTUDY_HOPPER_F8(120)                                                                  \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate))

// D (64 x 256, fp32) += A (64 x 16, K-major) B (16 x 256, N-major: imm-trans-b 1); accumulate = 0 ignores D.
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], std::uint64_t desc_a, std::uint64_t desc_b,
                                                      int accumulate) {
  KSTUDY_HOPPER_WGMMA_M64N256("m64n256k16.f32.bf16.bf16", "1, 1, 0, 1");
}
// The same with IEEE binary16 A and B (products exact in fp32).
__device__ __forceinline__ void wgmma_m64n256k16_f16(float (&d)[128], std::uint64_t desc_a, std::uint64_t desc_b,
                                                     int accumulate) {
  KSTUDY_HOPPER_WGMMA_M64N256("m64n256k16.f32.f16.f16", "1, 1, 0, 1");
}
// D (64 x 256, fp32) += A (64 x 8, K-major) B (8 x 256, K-major: TF32 has no transposed form) with both operands
// read as TF32 (the low 13 mantissa bits ignored); accumulate = 0 ignores D.
__device__ __forceinline__ void wgmma_m64n256k8_tf32(float (&d)[128], std::uint64_t desc_a, std::uint64_t desc_b,
                                                     int accumulate) {
  KSTUDY_HOPPER_WGMMA_M64N256("m64n256k8.f32.tf32.tf32", "1, 1");
}
#undef KSTUDY_HOPPER_WGMMA_M64N256
#undef KSTUDY_HOPPER_F8
#undef KSTUDY_HOPPER_D128
template <int Registers>
__device__ __forceinline__ void registers_down() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers));
}
template <int Registers>
__device__ __forceinline__ void registers_up() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers));
}

}  // namespace kstudy::hopper
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
#endif  // __CUDACC__
