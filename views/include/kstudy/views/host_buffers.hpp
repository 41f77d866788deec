#pragma once
// Host buffers for transfers: pageable (HostSpace) or page-locked (CudaHostPinnedSpace, CUDA builds).
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kstudy/views/host_memory.hpp"

namespace kstudy {

constexpr bool pinned_memory_available() {
#ifdef KOKKOS_ENABLE_CUDA
  return true;
#else
  return false;
#endif
}

// A byte buffer of either kind; the kind is chosen at run time, so one code path serves both.
class host_buffer {
 public:
  host_buffer() = default;
  host_buffer(host_memory kind, std::int64_t bytes) : m_kind(kind) {
    if (bytes < 0) throw std::invalid_argument("host_buffer: negative size");
    if (kind == host_memory::pinned) {
#ifdef KOKKOS_ENABLE_CUDA
      m_pinned = Kokkos::View<std::byte*, Kokkos::CudaHostPinnedSpace>(
          Kokkos::view_alloc("kstudy::pinned_host_buffer", Kokkos::WithoutInitializing), bytes);
#else
      throw std::invalid_argument("pinned host memory needs the CUDA flavour");
#endif
    } else {
      m_pageable = Kokkos::View<std::byte*, Kokkos::HostSpace>(
          Kokkos::view_alloc("kstudy::pageable_host_buffer", Kokkos::WithoutInitializing), bytes);
    }
  }
  host_memory kind() const { return m_kind; }
  std::byte* data() const {
#ifdef KOKKOS_ENABLE_CUDA
    if (m_kind == host_memory::pinned) return m_pinned.data();
#endif
    return m_pageable.data();
  }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(data());
  }
  std::int64_t bytes() const {
#ifdef KOKKOS_ENABLE_CUDA
    if (m_kind == host_memory::pinned) return static_cast<std::int64_t>(m_pinned.extent(0));
#endif
    return static_cast<std::int64_t>(m_pageable.extent(0));
  }

 private:
  host_memory m_kind = host_memory::pageable;
  Kokkos::View<std::byte*, Kokkos::HostSpace> m_pageable;
#ifdef KOKKOS_ENABLE_CUDA
  Kokkos::View<std::byte*, Kokkos::CudaHostPinnedSpace> m_pinned;
#endif
};

}  // namespace kstudy
