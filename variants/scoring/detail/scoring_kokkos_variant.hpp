#pragma once
// The scoring operation's Kokkos variant base: its buffers, transfers and poisoning. A variant derives
// from scoring_kokkos_variant<ExecutionSpace, Layout, Value> and implements run() (or from
// queued_scoring_kokkos_variant, or pipelined_scoring_kokkos_variant on a private stream, and implements
// launch()). Not the framework's kokkos_queued_variant
// (kstudy/support/kokkos_support.hpp), which the other operations' Kokkos variants derive from.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "kstudy/support/kokkos_support.hpp"
#include "scoring/feature_table.hpp"
#include "scoring/scoring_variant.hpp"
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy::detail {

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

// Row r's results as every scoring kernel writes them: its score, its flag (the score above the threshold),
// and the flagged count. The parameters come in the order the kernels first use the views and values, which
// is the order a lambda calling this lays out its captures in.
template <class ScoreView, class FlagView, class Value, class Count>
KOKKOS_FORCEINLINE_FUNCTION void write_row(const ScoreView& score, std::int64_t r, Value sum, Value threshold,
                                           const FlagView& flag, Count& count) {
  score(r) = sum;
  const bool flagged_row = sum > threshold;
  flag(r) = flagged_row;
  count += flagged_row;
}

// What a one-pass scoring kernel reads and writes, copied out of the variant so that a kernel lambda captures
// them by value (a device lambda must not reach the variant's members through `this`, a host pointer).
template <class Layout, class MemorySpace, class Value>
struct scoring_kernel_args {
  feature_table<Layout, MemorySpace, Value> x;
  Kokkos::View<Value*, MemorySpace> mean, inv_std, weight;
  Kokkos::View<Value*, MemorySpace> score;
  Kokkos::View<std::uint8_t*, MemorySpace> flag;
  Value clip, threshold;

  // Feature f's term of row r's score: standardised, clamped (NaN passing through) and weighted.
  KOKKOS_FORCEINLINE_FUNCTION Value term(std::int64_t r, std::int64_t f) const {
    return clamp_nan_through((x(r, f) - mean(f)) * inv_std(f), clip) * weight(f);
  }
  // Row r's score, flag and its part of the flagged count (write_row).
  template <class Count>
  KOKKOS_FORCEINLINE_FUNCTION void write(std::int64_t r, Value sum, Count& count) const {
    write_row(score, r, sum, threshold, flag, count);
  }
};

template <class ExecutionSpace, class Layout, class Value = float>
class scoring_kokkos_variant : public scoring_variant {
 public:
  using execution_space = ExecutionSpace;
  using memory_space = typename ExecutionSpace::memory_space;
  using value_type = Value;
  using table_type = feature_table<Layout, memory_space, Value>;

  // own_stream: queue on a private stream instead of the space's default one, so several instances
  // can overlap (pipelined one-shot). Variants calling libraries that use the default stream (Kokkos
  // Kernels with cuBLAS) keep the default instance.
  explicit scoring_kokkos_variant(bool own_stream = false) : m_instance(own_stream), m_space(m_instance.space()) {}
  ~scoring_kokkos_variant() override { m_instance.drain(); }  // queued work ends before the buffers are freed
  scoring_kokkos_variant(const scoring_kokkos_variant&) = delete;
  scoring_kokkos_variant& operator=(const scoring_kokkos_variant&) = delete;

  void prepare_table(const scoring_problem& problem, const run_options& options) override {
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
    m_score = Kokkos::View<Value*, memory_space>(Kokkos::view_alloc("kstudy::score", Kokkos::WithoutInitializing),
                                                 m_shape.rows);
    m_flag = Kokkos::View<std::uint8_t*, memory_space>(Kokkos::view_alloc("kstudy::flag", Kokkos::WithoutInitializing),
                                                       m_shape.rows);
    m_count_host = count_host_view("kstudy::flagged_count");
    allocate_workspace();
    upload_table(problem.x);
  }

  void upload_table(const float* host_x) override {
    static_assert(std::is_same_v<Value, float>, "host tables are float32; add a converting upload for other types");
    auto host = host_table_view<Layout>(host_x, m_shape);
    Kokkos::deep_copy(m_space, contiguous_span(m_x, m_shape), host);
    m_space.fence();
  }

  void download_scores(float* host_score, std::uint8_t* host_flag) override {
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
  void enqueue_upload_table(const float* host_x) override {
    if (!this->queues_asynchronously()) return upload_table(host_x);
    auto host = host_table_view<Layout>(host_x, m_shape);
    Kokkos::deep_copy(m_space, contiguous_span(m_x, m_shape), host);
  }
  void enqueue_download_scores(float* host_score, std::uint8_t* host_flag) override {
    if (!this->queues_asynchronously()) return download_scores(host_score, host_flag);
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

  // The table, vectors, outputs and parameters for a kernel lambda to capture.
  scoring_kernel_args<Layout, memory_space, Value> kernel_args() const {
    return {m_x, m_vectors.mean, m_vectors.inv_std, m_vectors.weight, m_score, m_flag, m_clip, m_threshold};
  }

  space_instance<ExecutionSpace> m_instance;  // before m_space: the stream outlives every copy of the space
  ExecutionSpace m_space;
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
};

// A Kokkos variant whose resident run is queued by launch(), which reduces the flagged count into
// m_count_host (pinned host memory on CUDA, so the reduction needs no host fence): run() fences the
// instance and reads the count; on a device, enqueue_run() only queues (enqueues_run), so an event
// recorded after it ends with the work, and wait() fences and reads the count.
template <class ExecutionSpace, class Layout, class Value = float>
class queued_scoring_kokkos_variant : public scoring_kokkos_variant<ExecutionSpace, Layout, Value> {
  using base = scoring_kokkos_variant<ExecutionSpace, Layout, Value>;

 public:
  using base::base;

  bool enqueues_run() const override { return !is_host_space_v<ExecutionSpace>; }
  void run() override {
    launch();
    this->m_space.fence();
    this->m_flagged = this->m_count_host();
  }
  void enqueue_run() override {
    if constexpr (is_host_space_v<ExecutionSpace>)
      run();
    else
      launch();
  }

 protected:
  // Queues every kernel of one resident run on m_space, the count into m_count_host.
  virtual void launch() = 0;
};

// A queued variant of kernels of its own on a private stream, so device instances overlap in a pipeline; host
// spaces run synchronously.
template <class ExecutionSpace, class Layout, class Value = float>
class pipelined_scoring_kokkos_variant : public queued_scoring_kokkos_variant<ExecutionSpace, Layout, Value> {
 public:
  pipelined_scoring_kokkos_variant()
      : queued_scoring_kokkos_variant<ExecutionSpace, Layout, Value>(/*own_stream=*/true) {}
  bool queues_asynchronously() const override { return !is_host_space_v<ExecutionSpace>; }
};

}  // namespace kstudy::detail
