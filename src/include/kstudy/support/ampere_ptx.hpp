#pragma once
// The copy instructions the sm_80 rungs share as inline PTX (the attention and tensor-core GEMM ladders):
// 16-byte cp.async from global to shared memory with its groups (sm_80), and ldmatrix of four 8 x 8 b16 tiles,
// plain or transposed (sm_75, so on every target kstudy builds for). Compiled for every target: on one older than
// sm_80 the cp.async wrappers are traps (kstudy/support/cuda_arch.hpp), and the variants that call them declare
// the capability in their gpu_requirement, so the runner never launches them there. The multiplies stay beside
// their kernels, each ladder's own.
#if defined(__CUDACC__)
#include <cstdint>

#include "kstudy/support/cuda_arch.hpp"

namespace kstudy::ampere {

// 16 bytes global -> shared without staging registers; source_bytes 0 reads nothing and zero-fills the 16 bytes
// (tiles past a matrix edge).
__device__ __forceinline__ void cp_async_16(void* shared, const void* global, int source_bytes) {
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(source_bytes)
               : "memory");
#else
  KSTUDY_UNREACHABLE_ON_THIS_TARGET();
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  KSTUDY_UNREACHABLE_ON_THIS_TARGET();
#endif
}
// Returns once at most Pending of this thread's committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
#if KSTUDY_CUDA_ARCH_AT_LEAST(80)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#else
  KSTUDY_UNREACHABLE_ON_THIS_TARGET();
#endif
}

// Four 8 x 8 b16 matrices from shared memory, one register each, in the fragment layout of mma.sync's operands.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* shared) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
// The same, each 8 x 8 matrix transposed (a row-major operand read as column-major).
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* shared) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

}  // namespace kstudy::ampere
#endif  // __CUDACC__
