#pragma once
// Cold-cache timing: before a timed region, outside it, a buffer of at least twice the cache the region
// reads through is written, so the region's inputs come from memory instead of whatever the previous trial
// left in the cache (at small points much of the input otherwise stays in the GPU's L2 or the CPU's
// last-level cache from one trial to the next).
#include <cstdint>

namespace kstudy {

// Cache sizes of this machine: the CPU's last-level cache (sysfs; KSTUDY_LAST_LEVEL_CACHE_BYTES overrides it,
// 32 MiB where neither says), and in the cuda flavour the L2 of the
// device Kokkos runs on (cudaDeviceProp::l2CacheSize); 0 where there is none.
std::int64_t host_last_level_cache_bytes();
std::int64_t device_l2_cache_bytes();

// What one flush wrote and how long it took.
struct cache_flush {
  std::int64_t bytes = 0;
  double seconds = 0.0;
};

// Owns the eviction buffers (allocated on first use, kept for the flusher's lifetime: a replication's).
class cache_flusher {
 public:
  cache_flusher();
  ~cache_flusher();
  cache_flusher(const cache_flusher&) = delete;
  cache_flusher& operator=(const cache_flusher&) = delete;

  // Writes 2x the host's last-level cache (with every host thread, so each core's private caches are
  // evicted too) when `host`, and 2x the device's L2 on `stream` (a cudaStream_t; null: the default stream)
  // when `device` and the build has CUDA; returns once the writes are complete.
  cache_flush flush(bool host, bool device, void* stream);

  std::int64_t host_bytes() const { return m_host_bytes; }
  std::int64_t device_bytes() const { return m_device_bytes; }
  std::int64_t flushes() const { return m_flushes; }  // calls to flush() so far

 private:
  std::int64_t m_host_bytes = 0;
  std::int64_t m_device_bytes = 0;
  std::int64_t m_flushes = 0;
  unsigned char* m_host_buffer = nullptr;
  void* m_device_buffer = nullptr;
};

}  // namespace kstudy
