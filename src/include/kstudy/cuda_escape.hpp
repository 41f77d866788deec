#pragma once
// Tools around the handwritten CUDA escape path (variants/fused_cuda.cu): NVRTC compile cost of its
// kernel source, occupancy of its kernels and launch-overhead probes. Kokkos-free and free of CUDA
// headers; defined only in the CUDA flavour (KSTUDY_HAVE_CUDA_VARIANTS).
#include <cstdint>

#include "kstudy/views/table_shape.hpp"

namespace kstudy::cuda_escape {

struct nvrtc_timing {
  double compile_seconds = 0;  // fresh NVRTC program: create, compile, fetch the cubin
  double load_seconds = 0;     // cuModuleLoadData of that cubin + cuModuleGetFunction of every kernel
};

// Compute capability of the current device as major * 10 + minor (90 on an H100/H200).
int device_compute_capability();

// Compiles the embedded kernel source (variants/detail/fused_cuda_kernels.cuh, the same text nvcc
// compiled ahead of time) for sm_<compute_capability>; returns wall seconds. Throws std::runtime_error
// with the NVRTC log on failure. Needs no device.
double nvrtc_compile_seconds(int compute_capability);
// The same compile, then loads the cubin into the current device's context and looks up every kernel,
// proving the run-time-compiled code is usable; the load is timed separately.
nvrtc_timing nvrtc_compile_and_load(int compute_capability);

// Active warps / the SM's maximum warps for the one-thread-per-row kernel of the layout at this block
// size, from cudaOccupancyMaxActiveBlocksPerMultiprocessor; in [0, 1].
double calculated_occupancy(table_layout layout, int block_size);
// The same for fused_cuda_row_major_tiled, whose shared memory per block depends on the feature count.
double calculated_occupancy_tiled(int block_size, std::int64_t features);

// Launch-overhead probes, queued on a cudaStream_t (nullptr: the legacy default stream); not fenced.
void launch_empty_kernel(void* stream);
// One block that reads and writes a small device scratch buffer (allocated on first use).
void launch_touch_kernel(void* stream);
void synchronize(void* stream);
// The bandwidth roofs' probes, queued on the legacy default stream and not synchronised (the caller times them
// with CUDA events on that stream, as device variants are timed, or synchronises for the host clock).
// Loads in flight per thread: 4 or 8 float4 loads (64 or 128 bytes) before the first use.
// Reads `count` floats of device memory (16-byte aligned) with float4 loads: the read roof.
void read_buffer(const float* data, std::int64_t count, int loads_in_flight);
// Copies `count` floats between device buffers (16-byte aligned) with float4 loads and stores: the copy roof's
// kernel; copy_buffer_memcpy is cudaMemcpyAsync of the same bytes, the vendor's copy.
void copy_buffer(const float* from, float* to, std::int64_t count, int loads_in_flight);
void copy_buffer_memcpy(const float* from, float* to, std::int64_t count);

// Fault injection (KSTUDY_INJECT_FAULT, kstudy/fault_injection.hpp), on a cudaStream_t (nullptr: the
// legacy default stream). Both always throw std::runtime_error with the CUDA error's name and text:
// inject_invalid_launch launches a kernel with more threads per block than any GPU allows (the launch
// fails, the context stays usable); inject_trap runs a kernel that executes __trap() and waits for it
// (a sticky error: the context is lost for the rest of the process).
[[noreturn]] void inject_invalid_launch(void* stream);
[[noreturn]] void inject_trap(void* stream);
// Visible CUDA devices; 0 when there is no driver, only its stub, or no GPU (never throws).
int device_count();
// `kstudy profile`: the one-thread marker kernel that precedes each profiled call (synchronised before and
// after), and cudaProfilerStart/Stop, between which ncu --profile-from-start off profiles.
void launch_profile_marker();
void profiler_start();
void profiler_stop();

namespace detail {
// Throws std::runtime_error naming the call, file, line and cudaGetErrorString(code) unless code is 0.
void check_cuda(int code, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace kstudy::cuda_escape

// Checks a CUDA runtime call (cudaError_t): throws std::runtime_error on failure.
#define KSTUDY_CUDA_CHECK(call) \
  ::kstudy::cuda_escape::detail::check_cuda(static_cast<int>(call), #call, __FILE__, __LINE__)
