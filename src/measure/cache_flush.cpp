#include "kstudy/cache_flush.hpp"

#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "kstudy/timers.hpp"

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy {

namespace {

// The last-level cache's size when sysfs does not say (containers without /sys, other kernels).
constexpr std::int64_t fallback_last_level_cache_bytes = std::int64_t(32) << 20;

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "266240K", "32M", "1024" -> bytes; 0 when unreadable.
std::int64_t parse_cache_size(const std::string& text) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || value <= 0) return 0;
  switch (*end) {
    case 'K':
      return std::int64_t(value) << 10;
    case 'M':
      return std::int64_t(value) << 20;
    case 'G':
      return std::int64_t(value) << 30;
    default:
      return std::int64_t(value);
  }
}

#ifdef KOKKOS_ENABLE_CUDA
void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess)
    throw std::runtime_error(std::string("flushing the L2: ") + what + ": " + cudaGetErrorString(rc));
}
#endif

}  // namespace

std::int64_t host_last_level_cache_bytes() {
  // An override for machines whose sysfs misreports the cache (some containers), and for cheap tests.
  if (const char* text = std::getenv("KSTUDY_LAST_LEVEL_CACHE_BYTES"); text && *text) {
    const auto bytes = parse_cache_size(text);
    if (bytes <= 0)
      throw std::invalid_argument("kstudy: KSTUDY_LAST_LEVEL_CACHE_BYTES='" + std::string(text) +
                                  "' is not a size in bytes (or with K, M, G)");
    return bytes;
  }
  // The data or unified cache of the highest level cpu0 has.
  std::int64_t bytes = 0;
  int best_level = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const auto level_text = read_line(dir + "level");
    if (level_text.empty()) continue;
    if (read_line(dir + "type") == "Instruction") continue;
    const int level = std::atoi(level_text.c_str());
    const auto size = parse_cache_size(read_line(dir + "size"));
    if (level >= best_level && size > 0) {
      best_level = level;
      bytes = size;
    }
  }
  return bytes > 0 ? bytes : fallback_last_level_cache_bytes;
}

std::int64_t device_l2_cache_bytes() {
#ifdef KOKKOS_ENABLE_CUDA
  int bytes = 0;
  check_cuda(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, Kokkos::Cuda().cuda_device()),
             "cudaDeviceGetAttribute(L2 cache size)");
  return bytes;
#else
  return 0;
#endif
}

cache_flusher::cache_flusher() = default;

cache_flusher::~cache_flusher() {
  delete[] m_host_buffer;
#ifdef KOKKOS_ENABLE_CUDA
  if (m_device_buffer) cudaFree(m_device_buffer);
#endif
}

cache_flush cache_flusher::flush(bool host, bool device, [[maybe_unused]] void* stream) {
  ++m_flushes;
  cache_flush done;
  wall_timer timer;
  timer.start();
  // A different byte each time: no level of the memory system can tell the write is a repeat.
  const unsigned char value = static_cast<unsigned char>(m_flushes);
  if (host) {
    if (m_host_buffer == nullptr) {
      m_host_bytes = 2 * host_last_level_cache_bytes();
      m_host_buffer = new unsigned char[static_cast<std::size_t>(m_host_bytes)];
    }
    unsigned char* buffer = m_host_buffer;
    // Every host thread writes a part: the cores the host variants run on hold the inputs in their own
    // caches as well as in the shared one.
    Kokkos::parallel_for("kstudy_cache_flush_host",
                         Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, m_host_bytes),
                         [=](std::int64_t i) { buffer[i] = value; });
    Kokkos::DefaultHostExecutionSpace().fence();
    done.bytes += m_host_bytes;
  }
#ifdef KOKKOS_ENABLE_CUDA
  if (device) {
    if (m_device_buffer == nullptr) {
      m_device_bytes = 2 * device_l2_cache_bytes();
      check_cuda(cudaMalloc(&m_device_buffer, static_cast<std::size_t>(m_device_bytes)), "cudaMalloc");
    }
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    check_cuda(cudaMemsetAsync(m_device_buffer, value, static_cast<std::size_t>(m_device_bytes), cuda_stream),
               "cudaMemsetAsync");
    check_cuda(cudaStreamSynchronize(cuda_stream), "cudaStreamSynchronize");
    done.bytes += m_device_bytes;
  }
#else
  (void)device;
#endif
  done.seconds = timer.seconds();
  return done;
}

}  // namespace kstudy
