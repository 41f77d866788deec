#pragma once
// Shared plumbing of the Kokkos variants: buffers, transfers, poisoning and per-space registration.
// A variant derives from kokkos_variant<ExecutionSpace, Layout, Value> and implements run().
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
#include "kstudy/views/feature_table.hpp"

namespace kstudy::detail {

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

template <class T>
struct type_tag {
  using type = T;
};

// Calls f(type_tag<Space>{}) for every execution space this Kokkos build enables.
template <class F>
int for_each_enabled_space(F&& f) {
#ifdef KOKKOS_ENABLE_SERIAL
  f(type_tag<Kokkos::Serial>{});
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  f(type_tag<Kokkos::OpenMP>{});
#endif
#ifdef KOKKOS_ENABLE_CUDA
  f(type_tag<Kokkos::Cuda>{});
#endif
  return 0;
}

// Registers Variant (a kokkos_variant<Space, ...>) with the backend and device flag filled in.
template <class Variant>
void register_kokkos_variant(variant_info info) {
  using space = typename Variant::execution_space;
  info.backend = backend_name<space>();
  info.on_device = !is_host_space_v<space>;
  variant_registration<Variant>{std::move(info)};
}

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

// Clamp whose NaN passes through (a NaN feature makes the row's score NaN), as the reference does.
// On sm_80+ the NaN-propagating max/min do it in two instructions, as in the CUDA kernels; the
// compare-and-select form takes four, and the row-major tile kernel is issue-bound.
template <class Value>
KOKKOS_FORCEINLINE_FUNCTION Value clamp_nan_through(Value v, Value clip) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<Value, float>) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(v), "f"(-clip));
    asm("min.NaN.f32 %0, %0, %1;" : "+f"(r) : "f"(clip));
    return r;
  }
#endif
  return v < -clip ? -clip : (v > clip ? clip : v);
}

template <class ExecutionSpace, class Layout, class Value = float>
class kokkos_variant : public scoring_variant {
 public:
  using execution_space = ExecutionSpace;
  using memory_space = typename ExecutionSpace::memory_space;
  using value_type = Value;
  using table_type = feature_table<Layout, memory_space, Value>;

  // own_stream: queue on a private stream instead of the space's default one, so several instances
  // can overlap (pipelined one-shot). Variants calling libraries that use the default stream (Kokkos
  // Kernels with cuBLAS) keep the default instance.
  explicit kokkos_variant(bool own_stream = false) {
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
  ~kokkos_variant() override {
#ifdef KOKKOS_ENABLE_CUDA
    if (m_own_stream != nullptr) {
      // A failing fence (the CUDA context was lost) must not escape a destructor and terminate.
      try {
        m_space.fence();
      } catch (const std::exception&) {
      }
      m_space = ExecutionSpace{};
      cudaStreamDestroy(m_own_stream);
    }
#endif
  }
  kokkos_variant(const kokkos_variant&) = delete;
  kokkos_variant& operator=(const kokkos_variant&) = delete;

  void prepare(const scoring_problem& problem, const run_options& options) override {
    problem.validate();
    if (problem.shape.layout != layout_of<Layout>())
      throw std::invalid_argument("variant expects a " + std::string(to_string(layout_of<Layout>())) + " table, got " +
                                  std::string(to_string(problem.shape.layout)));
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    m_shape = problem.shape;
    m_options = options;
    m_clip = static_cast<Value>(problem.clip);
    m_threshold = static_cast<Value>(problem.threshold);
    m_x = make_table<Layout, memory_space, Value>("kstudy::x", m_shape);
    m_vectors = upload_feature_vectors<memory_space>(problem);
    m_score = Kokkos::View<Value*, memory_space>(Kokkos::view_alloc("kstudy::score", Kokkos::WithoutInitializing), m_shape.rows);
    m_flag = Kokkos::View<std::uint8_t*, memory_space>(Kokkos::view_alloc("kstudy::flag", Kokkos::WithoutInitializing),
                                                       m_shape.rows);
    m_count_host = count_host_view("kstudy::flagged_count");
    allocate_workspace();
    upload(problem.x);
  }

  void upload(const float* host_x) override {
    static_assert(std::is_same_v<Value, float>, "host tables are float32; add a converting upload for other types");
    auto host = host_table_view<Layout>(host_x, m_shape);
    Kokkos::deep_copy(m_space, contiguous_span(m_x, m_shape), host);
    m_space.fence();
  }

  void download(float* host_score, std::uint8_t* host_flag) override {
    using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
    Kokkos::View<float*, Kokkos::HostSpace, unmanaged> score(host_score, m_shape.rows);
    Kokkos::View<std::uint8_t*, Kokkos::HostSpace, unmanaged> flag(host_flag, m_shape.rows);
    Kokkos::deep_copy(m_space, score, m_score);
    Kokkos::deep_copy(m_space, flag, m_flag);
    m_space.fence();
  }

  std::int64_t flagged_count() const override { return m_flagged; }

  void poison() override {
    Kokkos::deep_copy(m_space, m_score, std::numeric_limits<Value>::quiet_NaN());
    Kokkos::deep_copy(m_space, m_flag, std::uint8_t(0xAB));
    m_space.fence();
    m_flagged = -1;
  }

  // Queued transfers for the pipelined strategy (see scoring_variant); the kernels are queued by the
  // derived variant's enqueue_run(), reducing its count into m_count_host.
  void enqueue_upload(const float* host_x) override {
    if (!this->queues_asynchronously()) return upload(host_x);
    auto host = host_table_view<Layout>(host_x, m_shape);
    Kokkos::deep_copy(m_space, contiguous_span(m_x, m_shape), host);
  }
  void enqueue_download(float* host_score, std::uint8_t* host_flag) override {
    if (!this->queues_asynchronously()) return download(host_score, host_flag);
    using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
    Kokkos::View<float*, Kokkos::HostSpace, unmanaged> score(host_score, m_shape.rows);
    Kokkos::View<std::uint8_t*, Kokkos::HostSpace, unmanaged> flag(host_flag, m_shape.rows);
    Kokkos::deep_copy(m_space, score, m_score);
    Kokkos::deep_copy(m_space, flag, m_flag);
  }
#ifdef KOKKOS_ENABLE_CUDA
  // Kokkos' deep_copy has no strided host-to-device copy; the CUDA runtime's 2D copy on the instance's
  // stream does it in one DMA, where the pipeline would otherwise gather the chunk with host threads.
  bool can_upload_columns() const override {
    return std::is_same_v<ExecutionSpace, Kokkos::Cuda> && std::is_same_v<Layout, Kokkos::LayoutLeft>;
  }
  void enqueue_upload_columns(const float* first, std::int64_t source_rows) override {
    if (!can_upload_columns()) return scoring_variant::enqueue_upload_columns(first, source_rows);
    const auto width = static_cast<std::size_t>(m_shape.rows) * sizeof(Value);
    const auto status = cudaMemcpy2DAsync(m_x.data(), static_cast<std::size_t>(m_x.stride(1)) * sizeof(Value), first,
                                          static_cast<std::size_t>(source_rows) * sizeof(float), width,
                                          static_cast<std::size_t>(m_shape.features), cudaMemcpyHostToDevice,
                                          static_cast<cudaStream_t>(stream()));
    if (status != cudaSuccess)
      throw std::runtime_error(std::string("cudaMemcpy2DAsync: ") + cudaGetErrorString(status));
  }
#endif
  void wait() override {
    m_space.fence();
    if (!this->enqueues_run()) return;  // enqueue_run() was run(), which set m_flagged
    m_flagged = m_count_host();
  }

  void* stream() const override {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same_v<ExecutionSpace, Kokkos::Cuda>) return static_cast<void*>(m_space.cuda_stream());
#endif
    return nullptr;
  }

 protected:
  // Intermediates of composed variants; called by prepare() after the inputs are allocated.
  virtual void allocate_workspace() {}

  ExecutionSpace m_space{};
  table_shape m_shape{};
  run_options m_options{};
  Value m_clip{}, m_threshold{};
  table_type m_x;
  feature_vectors<memory_space, Value> m_vectors;
  Kokkos::View<Value*, memory_space> m_score;
  Kokkos::View<std::uint8_t*, memory_space> m_flag;
  std::int64_t m_flagged = -1;
  // Where a queued reduction leaves the flagged count. Pinned host memory is device-accessible, so the
  // reduction's last block writes the total straight into it: no count copy queued after the kernel.
#ifdef KOKKOS_ENABLE_CUDA
  using count_host_type = Kokkos::View<std::int64_t, Kokkos::CudaHostPinnedSpace>;
#else
  using count_host_type = Kokkos::View<std::int64_t, Kokkos::HostSpace>;
#endif
  count_host_type m_count_host;
  static count_host_type count_host_view(const char* label) { return count_host_type(std::string(label)); }

 private:
#ifdef KOKKOS_ENABLE_CUDA
  cudaStream_t m_own_stream = nullptr;
#endif
};

// A Kokkos variant whose resident run is queued by launch(), which reduces the flagged count into
// m_count_host (pinned host memory on CUDA, so the reduction needs no host fence): run() fences the
// instance and reads the count; on a device, enqueue_run() only queues (enqueues_run), so an event
// recorded after it ends with the work, and wait() fences and reads the count.
template <class ExecutionSpace, class Layout, class Value = float>
class queued_kokkos_variant : public kokkos_variant<ExecutionSpace, Layout, Value> {
  using base = kokkos_variant<ExecutionSpace, Layout, Value>;

 public:
  using base::base;

  bool enqueues_run() const override { return !is_host_space_v<ExecutionSpace>; }
  void run() override {
    launch();
    this->m_space.fence();
    this->m_flagged = this->m_count_host();
  }
  void enqueue_run() override {
    if constexpr (is_host_space_v<ExecutionSpace>) run();
    else launch();
  }

 protected:
  // Queues every kernel of one resident run on m_space, the count into m_count_host.
  virtual void launch() = 0;
};

}  // namespace kstudy::detail
