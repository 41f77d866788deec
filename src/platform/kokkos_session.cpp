#include "kstudy/runner/kokkos_session.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy {
namespace {

kokkos_device_settings g_settings;

#ifdef KOKKOS_ENABLE_CUDA
const char* cache_config_name(cudaFuncCache config) {
  switch (config) {
    case cudaFuncCachePreferNone:
      return "prefer_none";
    case cudaFuncCachePreferShared:
      return "prefer_shared";
    case cudaFuncCachePreferL1:
      return "prefer_l1";
    case cudaFuncCachePreferEqual:
      return "prefer_equal";
  }
  return "unknown";
}

void check(cudaError_t code, const char* call) {
  if (code != cudaSuccess)
    throw std::runtime_error(std::string("kstudy: ") + call + " failed after Kokkos' initialisation: " +
                             cudaGetErrorName(code) + ": " + cudaGetErrorString(code));
}
#endif

}  // namespace

std::string kokkos_unavailable_reason() {
#ifdef KOKKOS_ENABLE_CUDA
  int count = 0;
  const cudaError_t code = cudaGetDeviceCount(&count);
  if (code != cudaSuccess)
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(code) + ": " + cudaGetErrorString(code);
  if (count < 1) return "cudaGetDeviceCount found no device";
#endif
  return {};
}

const kokkos_device_settings& device_settings_after_kokkos() { return g_settings; }

void restore_device_defaults_after_kokkos() {
#ifdef KOKKOS_ENABLE_CUDA
  cudaFuncCache config = cudaFuncCachePreferNone;
  check(cudaDeviceGetCacheConfig(&config), "cudaDeviceGetCacheConfig");
  // Kokkos initialises once per process: a later call (already restored) keeps the first record.
  if (g_settings.cache_config_set_by_kokkos.empty()) g_settings.cache_config_set_by_kokkos = cache_config_name(config);
  const char* keep = std::getenv("KSTUDY_KEEP_KOKKOS_DEVICE_SETTINGS");
  if (keep == nullptr || std::string(keep) != "1") {
    check(cudaDeviceSetCacheConfig(cudaFuncCachePreferNone), "cudaDeviceSetCacheConfig");
    check(cudaDeviceGetCacheConfig(&config), "cudaDeviceGetCacheConfig");
  }
  g_settings.cache_config_measured = cache_config_name(config);
#endif
}

}  // namespace kstudy
