#pragma once
// Shared plumbing of every operation's Kokkos variants, built-in or a plug-in's (installed as
// kstudy/support/kokkos_support.hpp): backend names, per-space registration, launch policies and grid sizing.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kstudy/variant.hpp"
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy {

template <class ExecutionSpace>
constexpr bool is_host_space_v =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecutionSpace::memory_space>::accessible;

template <class ExecutionSpace>
std::string backend_name() {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same_v<ExecutionSpace, Kokkos::Cuda>) return "cuda";
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  if constexpr (std::is_same_v<ExecutionSpace, Kokkos::OpenMP>) return "openmp";
#endif
#ifdef KOKKOS_ENABLE_SERIAL
  if constexpr (std::is_same_v<ExecutionSpace, Kokkos::Serial>) return "serial";
#endif
  return ExecutionSpace::name();
}

namespace detail {
// What for_each_enabled_space passes: callers name the space as typename decltype(tag)::type.
template <class T>
struct type_tag {
  using type = T;
};
}  // namespace detail

// Calls f(tag) for every execution space this Kokkos build enables, where decltype(tag)::type is the space.
template <class F>
int for_each_enabled_space(F&& f) {
#ifdef KOKKOS_ENABLE_SERIAL
  f(detail::type_tag<Kokkos::Serial>{});
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  f(detail::type_tag<Kokkos::OpenMP>{});
#endif
#ifdef KOKKOS_ENABLE_CUDA
  f(detail::type_tag<Kokkos::Cuda>{});
#endif
  return 0;
}

// Registers Variant (a Kokkos variant whose execution_space names its space, e.g. a kokkos_queued_variant<Space>)
// with the backend and device flag filled in.
template <class Variant>
void register_kokkos_variant(variant_info info) {
  using space = typename Variant::execution_space;
  info.backend = backend_name<space>();
  info.on_device = !is_host_space_v<space>;
  variant_registration<Variant>{std::move(info)};
}

// An execution-space instance: with own_stream on CUDA, on a private non-blocking stream (so several
// instances overlap, and CUDA events on it time this instance's work alone), else the space's default
// instance. Owns that stream. Variants calling libraries that use the default stream (Kokkos Kernels with
// cuBLAS) keep the default instance. Declare it before any copy of space(): copies must be gone before the
// stream is destroyed.
template <class ExecutionSpace>
class space_instance {
 public:
  explicit space_instance(bool own_stream) {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same_v<ExecutionSpace, Kokkos::Cuda>) {
      if (own_stream) {
        if (cudaStreamCreateWithFlags(&m_own_stream, cudaStreamNonBlocking) != cudaSuccess)
          throw std::runtime_error("cudaStreamCreateWithFlags failed");
        m_space = Kokkos::Cuda(m_own_stream);
      }
    }
#endif
    (void)own_stream;
  }
  ~space_instance() {
#ifdef KOKKOS_ENABLE_CUDA
    if (m_own_stream != nullptr) {
      drain();
      m_space = ExecutionSpace{};  // Kokkos' last reference to the stream goes before the stream does
      cudaStreamDestroy(m_own_stream);
    }
#endif
  }
  // Waits for the private stream's work; an owner calls it in its destructor, before its buffers go. A failing
  // fence (the CUDA context was lost) must not escape a destructor and terminate.
  void drain() const {
#ifdef KOKKOS_ENABLE_CUDA
    if (m_own_stream == nullptr) return;
    try {
      m_space.fence();
    } catch (const std::exception&) {
    }
#endif
  }
  space_instance(const space_instance&) = delete;
  space_instance& operator=(const space_instance&) = delete;
  const ExecutionSpace& space() const { return m_space; }

 private:
  ExecutionSpace m_space{};
#ifdef KOKKOS_ENABLE_CUDA
  cudaStream_t m_own_stream = nullptr;
#endif
};

// The queueing plumbing of a Kokkos variant on one execution-space instance: its work queues on m_space,
// wait() fences it, stream() is its CUDA stream, and enqueue_run() queues launch() (then fences on a host
// space, where run() must end with the work). On a device every launch only queues on the instance's own
// stream, so an event recorded after enqueue_run() ends with the work and instances overlap. A deriving
// class declares its buffers after this base's members and drains m_instance in its own destructor, so
// queued work ends before those buffers are freed.
template <class ExecutionSpace>
class kokkos_queued_variant : public queued_variant {
 public:
  using execution_space = ExecutionSpace;
  static constexpr bool on_host = is_host_space_v<ExecutionSpace>;

  // own_stream: see space_instance.
  explicit kokkos_queued_variant(bool own_stream) : m_instance(own_stream), m_space(m_instance.space()) {}
  kokkos_queued_variant(const kokkos_queued_variant&) = delete;
  kokkos_queued_variant& operator=(const kokkos_queued_variant&) = delete;

  bool queues_asynchronously() const override { return !on_host; }
  void enqueue_run() override {  // run() is this and wait()
    launch();
    if constexpr (on_host) m_space.fence();
  }
  void wait() override { m_space.fence(); }
  void* stream() const override {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same_v<ExecutionSpace, Kokkos::Cuda>) return static_cast<void*>(m_space.cuda_stream());
#endif
    return nullptr;
  }

  // Queues one resident run on m_space. Public: nvcc refuses extended lambdas in private or protected
  // member functions.
  virtual void launch() = 0;

 protected:
  space_instance<ExecutionSpace> m_instance;  // before m_space: the stream outlives every copy
  ExecutionSpace m_space;
};

// The policy with Kokkos' light-weight hint: on CUDA the kernel's functor then travels as a launch
// parameter. Without it Kokkos 3.4 sends functors over 512 bytes through constant memory, which queues
// a host-to-device copy before every launch and waits for the previous launch using that memory.
template <class Policy>
auto light_weight(const Policy& policy) {
  return Kokkos::Experimental::require(policy, Kokkos::Experimental::WorkItemProperty::HintLightWeight);
}

// Teams of team_size threads that the space runs at once (one resident wave on a GPU), at least 1.
template <class ExecutionSpace>
std::int64_t resident_teams(const ExecutionSpace& space, int team_size) {
  const std::int64_t teams = std::int64_t(space.concurrency()) / team_size;
  return teams > 0 ? teams : 1;
}

// Teams of team_size threads sure to be resident at once when the kernel's launch bounds guarantee
// threads_per_sm resident threads on every multiprocessor (LaunchBounds<1024, 1>: at most 64 registers,
// so 1,024 of 2,048 slots; LaunchBounds<256, 5>: 1,280). Sizing a kernel's grid by concurrency() alone
// gave a register-limited kernel two waves (fused_kokkos at 1M x 16: 1,024 teams of 256 threads where
// 4 x 132 fit at 55 registers), and the second ran as a tail.
template <class ExecutionSpace>
std::int64_t guaranteed_resident_teams(const ExecutionSpace& space, int team_size, int threads_per_sm) {
  if constexpr (is_host_space_v<ExecutionSpace>) {
    return resident_teams(space, team_size);
  } else {
    int slots_per_sm = 2048;
#ifdef KOKKOS_ENABLE_CUDA
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&slots_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device) != cudaSuccess)
      slots_per_sm = 2048;
#endif
    const std::int64_t sms = std::max<std::int64_t>(1, std::int64_t(space.concurrency()) / slots_per_sm);
    return std::max<std::int64_t>(1, sms * std::max(1, threads_per_sm / team_size));
  }
}

// Teams for `work` blocks of work given `resident` teams at once: as many waves of work as needed,
// spread evenly, so every team strides over the same number of blocks (262,144 rows on 660 teams of 256
// threads left some threads two rows and others one; 512 teams give every thread two).
inline std::int64_t balanced_teams(std::int64_t work, std::int64_t resident) {
  if (work <= resident) return work > 0 ? work : 1;
  const std::int64_t waves = (work + resident - 1) / resident;
  return (work + waves - 1) / waves;
}
}  // namespace kstudy
