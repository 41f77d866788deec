#pragma once
// Device code that only some targets have, in a .cu file compiled for every target kstudy builds for (sm_75
// to sm_120). The host pass and the device passes for a target that has the feature compile the code; an
// older target's pass compiles what stands in its place, a trap, and the variant declares the capability in
// its gpu_requirement (kstudy/variant.hpp), so that the runner never launches the trap:
//
//   __device__ void mma_bf16(...) {
//   #if KSTUDY_CUDA_ARCH_AT_LEAST(80)
//     asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 ...");
//   #else
//     KSTUDY_UNREACHABLE_ON_THIS_TARGET();
//   #endif
//   }
//
// __CUDA_ARCH__ is the target of the pass (750 for sm_75), undefined in the host pass. No CUDA header needed.

#if defined(__CUDA_ARCH__)
#define KSTUDY_CUDA_ARCH_AT_LEAST(capability) (__CUDA_ARCH__ >= (capability)*10)
#else
#define KSTUDY_CUDA_ARCH_AT_LEAST(capability) 1
#endif

// What a guarded device function compiles to on a target without the feature: a trap, should a variant ever
// launch it against its declared requirement.
#define KSTUDY_UNREACHABLE_ON_THIS_TARGET() __trap()
