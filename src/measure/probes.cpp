#include "kstudy/probes.hpp"

#include <Kokkos_Core.hpp>

#include <sys/resource.h>

#include <cstddef>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/timers.hpp"
#include "kstudy/views/layout_conversion.hpp"
#include "detail/wall_times.hpp"

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
#include "kstudy/cuda_escape.hpp"
#endif

namespace kstudy::probes {

std::int64_t device_memory_free() {
#ifdef KOKKOS_ENABLE_CUDA
  std::size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 0;
  return static_cast<std::int64_t>(free_bytes);
#else
  return INT64_MAX;
#endif
}

std::int64_t host_memory_available() {
  std::int64_t available = std::numeric_limits<std::int64_t>::max();
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") {
      available = kib * 1024;
      break;
    }
  }
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      limit.rlim_cur < static_cast<rlim_t>(available))
    available = static_cast<std::int64_t>(limit.rlim_cur);
  return available;
}

bool device_context_lost(std::string& why) {
#ifdef KOKKOS_ENABLE_CUDA
  // A non-sticky error is reported once and then cleared; a sticky one keeps failing every call, so a
  // device-wide synchronisation after clearing tells the two apart.
  (void)cudaGetLastError();
  const cudaError_t sync = cudaDeviceSynchronize();
  if (sync == cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  why = std::string(cudaGetErrorName(sync)) + ": " + cudaGetErrorString(sync);
  return true;
#else
  (void)why;
  return false;
#endif
}

namespace {
using detail::wall_times;

void launch_one_element(const Kokkos::View<int*>& touch) {
  Kokkos::parallel_for(
      "kstudy::probe::launch", Kokkos::RangePolicy<>(0, 1), KOKKOS_LAMBDA(const int i) { touch(i) += 1; });
}
}  // namespace

std::vector<double> time_transfers(std::int64_t bytes, host_memory kind, bool host_to_device, int warmups, int trials) {
#ifdef KOKKOS_ENABLE_CUDA
  host_buffer host(kind, bytes);
  Kokkos::View<std::byte*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(host.data(), bytes);
  Kokkos::View<std::byte*> d(Kokkos::view_alloc("kstudy::probe::transfer", Kokkos::WithoutInitializing), bytes);
  std::fill(host.data(), host.data() + bytes, std::byte{1});  // first touch outside the timed region
  return wall_times(warmups, trials, [&] {
    if (host_to_device)
      Kokkos::deep_copy(d, h);
    else
      Kokkos::deep_copy(h, d);
    Kokkos::fence();
  });
#else
  (void)bytes, (void)kind, (void)host_to_device, (void)warmups, (void)trials;
  throw std::runtime_error("transfer calibration needs a device backend (cuda flavour)");
#endif
}

const char* to_string(pin_call call) { return call == pin_call::host_alloc ? "cudaHostAlloc" : "cudaHostRegister"; }

pin_call parse_pin_call(const std::string& name) {
  if (name == "host_alloc") return pin_call::host_alloc;
  if (name == "host_register") return pin_call::host_register;
  throw std::invalid_argument("unknown pinning call '" + name + "' (accepted: host_alloc, host_register)");
}

#ifdef KOKKOS_ENABLE_CUDA
namespace {
void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(status));
}
}  // namespace
#endif

std::vector<double> time_pinning(std::int64_t bytes, pin_call call, int warmups, int trials) {
#ifdef KOKKOS_ENABLE_CUDA
  const auto size = static_cast<std::size_t>(bytes);
  std::vector<double> out;
  if (call == pin_call::host_alloc) {
    for (int t = -warmups; t < trials; ++t) {
      void* p = nullptr;
      wall_timer timer;
      timer.start();
      check_cuda(cudaHostAlloc(&p, size, cudaHostAllocDefault), "cudaHostAlloc");
      const double seconds = timer.seconds();
      check_cuda(cudaFreeHost(p), "cudaFreeHost");
      if (t >= 0) out.push_back(seconds);
    }
    return out;
  }
  std::vector<std::byte> buffer(size, std::byte{1});  // pageable and touched: what a caller already holds
  for (int t = -warmups; t < trials; ++t) {
    wall_timer timer;
    timer.start();
    check_cuda(cudaHostRegister(buffer.data(), size, cudaHostRegisterDefault), "cudaHostRegister");
    const double seconds = timer.seconds();
    check_cuda(cudaHostUnregister(buffer.data()), "cudaHostUnregister");
    if (t >= 0) out.push_back(seconds);
  }
  return out;
#else
  (void)bytes, (void)call, (void)warmups, (void)trials;
  throw std::runtime_error("timing page-locking needs a device backend (cuda flavour)");
#endif
}

std::vector<std::string> launch_probe_names() {
  std::vector<std::string> names = {"kokkos_for_1_sync", "kokkos_for_1000_queued"};
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  names.push_back("cuda_empty_sync");
  names.push_back("cuda_empty_1000_queued");
#endif
  return names;
}

std::vector<double> time_launch_probe(const std::string& name, int warmups, int trials) {
  Kokkos::View<int*> touch("kstudy::probe::touch", 1);
  Kokkos::DefaultExecutionSpace space;
  if (name == "kokkos_for_1_sync")
    return wall_times(warmups, trials, [&] {
      launch_one_element(touch);
      space.fence();
    });
  if (name == "kokkos_for_1000_queued") {
    auto t = wall_times(warmups, trials, [&] {
      for (int i = 0; i < 1000; ++i) launch_one_element(touch);
      space.fence();
    });
    for (auto& s : t) s /= 1000.0;
    return t;
  }
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  if (name == "cuda_empty_sync")
    return wall_times(warmups, trials, [&] {
      cuda_escape::launch_empty_kernel(nullptr);
      cuda_escape::synchronize(nullptr);
    });
  if (name == "cuda_empty_1000_queued") {
    auto t = wall_times(warmups, trials, [&] {
      for (int i = 0; i < 1000; ++i) cuda_escape::launch_empty_kernel(nullptr);
      cuda_escape::synchronize(nullptr);
    });
    for (auto& s : t) s /= 1000.0;
    return t;
  }
#endif
  throw std::invalid_argument("unknown launch probe '" + name + "'");
}

// Distinct, exactly representable values (below 2^24), so a wrong index cannot pass the check and the
// conversion is not timed on uniform data.
template <class Space, class Table>
void fill_distinct(const Space& space, const Table& table) {
  const std::int64_t features = table.extent(1);
  Kokkos::parallel_for(
      "kstudy::probe::fill_distinct", Kokkos::RangePolicy<Space>(space, 0, table.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t r) {
        for (std::int64_t f = 0; f < features; ++f) table(r, f) = static_cast<float>((r * 31 + f) % 16777213);
      });
  space.fence();
}

template <class Space, class A, class B>
std::int64_t count_mismatches(const Space& space, const A& a, const B& b) {
  const std::int64_t features = a.extent(1);
  std::int64_t wrong = 0;
  Kokkos::parallel_reduce(
      "kstudy::probe::check_conversion", Kokkos::RangePolicy<Space>(space, 0, a.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t r, std::int64_t& n) {
        for (std::int64_t f = 0; f < features; ++f) n += !(a(r, f) == b(r, f));
      },
      wrong);
  return wrong;
}

std::vector<double> time_layout_conversion(std::int64_t rows, std::int64_t features, int warmups, int trials) {
  Kokkos::View<float**, Kokkos::LayoutRight> source(
      Kokkos::view_alloc("kstudy::probe::row_major", Kokkos::WithoutInitializing), rows, features);
  Kokkos::View<float**, Kokkos::LayoutLeft> destination(
      Kokkos::view_alloc("kstudy::probe::feature_major", Kokkos::WithoutInitializing), rows, features);
  Kokkos::DefaultExecutionSpace space;
  fill_distinct(space, source);
  Kokkos::deep_copy(space, destination, std::numeric_limits<float>::quiet_NaN());
  auto seconds = wall_times(warmups, trials, [&] { convert_to_feature_major(space, source, destination); });
  // The timing counts only if the conversion is right: every element compared (a NaN left by the poison
  // compares unequal too).
  const std::int64_t wrong = count_mismatches(space, source, destination);
  if (wrong != 0)
    throw std::runtime_error("layout conversion " + std::to_string(rows) + "x" + std::to_string(features) + ": " +
                             std::to_string(wrong) + " elements differ from the row-major source; no timing kept");
  return seconds;
}

}  // namespace kstudy::probes
