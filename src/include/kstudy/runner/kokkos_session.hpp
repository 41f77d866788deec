#pragma once
// Kokkos for the length of a scope, with the device left as a process without Kokkos would find it.
//
// Kokkos 3.4's CUDA initialisation sets the device-wide cache preference to "prefer shared"
// (Kokkos_Cuda_Instance.cpp, cudaDeviceSetCacheConfig). Every kernel launched afterwards without a preference
// of its own (the handwritten CUDA variants, the roof probes, CUB and cuBLAS) then runs with a smaller L1:
// measured on the H200, 3-9% slower in a Kokkos 3.4 process than in a Kokkos 4.6 one, which sets no such
// device-wide preference. Kokkos sets its own kernels' preference per kernel (cudaFuncSetCacheConfig, 3.4;
// a carveout attribute, 4.x), so restoring the device's default changes none of Kokkos' kernels: only the
// kernels Kokkos never configured stop inheriting its setting. Every entry point that initialises Kokkos
// (kstudy, kstudy_bench, the replication and profile children, the test main) does it through this class,
// and the archive's environment records what Kokkos had set and what the measurements ran under.
#include <Kokkos_Core.hpp>

#include <string>

namespace kstudy {

// Device-wide settings around Kokkos' initialisation, by name (cache preference: prefer_none, prefer_shared,
// prefer_l1, prefer_equal). Empty on a build without CUDA and before a kokkos_session started.
struct kokkos_device_settings {
  std::string cache_config_set_by_kokkos;  // what Kokkos' initialisation left
  std::string cache_config_measured;       // what kstudy's measurements run under
};
const kokkos_device_settings& device_settings_after_kokkos();

// After Kokkos initialised: puts the device's cache preference back to cudaFuncCachePreferNone, the default,
// and records both. KSTUDY_KEEP_KOKKOS_DEVICE_SETTINGS=1 keeps what Kokkos set (to measure its effect). No-op
// without CUDA. Throws std::runtime_error when a CUDA call fails.
void restore_device_defaults_after_kokkos();

// Whether Kokkos can start in this process: empty when it can (a build without CUDA, or one that sees a GPU),
// else why not, from the CUDA runtime (e.g. "cudaGetDeviceCount: cudaErrorStubLibrary: CUDA driver is a stub
// library"). A CUDA build's Kokkos::initialize throws, uncaught, on a machine without a usable GPU, so every
// entry point that measures asks this first. The check itself cannot abort: cudaGetDeviceCount reports a
// missing or stub driver (cudaErrorInsufficientDriver, cudaErrorStubLibrary) and no device
// (cudaErrorNoDevice) as return codes, and it creates no CUDA context.
std::string kokkos_unavailable_reason();

// Exit status of a measuring command refused because Kokkos cannot start here (EX_UNAVAILABLE); nothing
// was written.
constexpr int exit_no_gpu = 69;

class kokkos_session {
 public:
  kokkos_session(int& argc, char* argv[]) : m_guard(argc, argv) { restore_device_defaults_after_kokkos(); }
  kokkos_session(const kokkos_session&) = delete;
  kokkos_session& operator=(const kokkos_session&) = delete;

 private:
  Kokkos::ScopeGuard m_guard;
};

}  // namespace kstudy
