#pragma once
// Tools around handwritten CUDA: NVRTC compile cost of an operation's kernel source, launch-overhead and
// bandwidth probes, fault injection, the CUDA error check. Kokkos-free and free of CUDA headers; defined only
// in the CUDA flavour (KSTUDY_HAVE_CUDA_VARIANTS).
#include <cstdint>
#include <vector>

namespace kstudy::cuda_escape {

struct nvrtc_timing {
  double compile_seconds = 0;  // fresh NVRTC program: create, compile, fetch the cubin
  double load_seconds = 0;     // cuModuleLoadData of that cubin + cuModuleGetFunction of every kernel
};

// Compute capability of the current device as major * 10 + minor (90 on an H100/H200).
int device_compute_capability();

// A kernel source an operation embeds for NVRTC (typically the very text nvcc compiled ahead of time), and
// the kernels (extern "C" or mangled names as NVRTC sees them) that must be found in it once loaded.
struct runtime_source {
  const char* name = nullptr;  // file name in NVRTC's messages
  const char* text = nullptr;  // must need no system header
  std::vector<const char*> kernels;
};

// Compiles the source for sm_<compute_capability>; returns wall seconds. Throws std::invalid_argument for a
// compute capability below 10, std::runtime_error with the NVRTC log on failure. Needs no device.
double nvrtc_compile_seconds(const runtime_source& source, int compute_capability);
// The same compile, then loads the cubin into the current device's context and looks up every kernel,
// proving the run-time-compiled code is usable; the load is timed separately.
nvrtc_timing nvrtc_compile_and_load(const runtime_source& source, int compute_capability);

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
