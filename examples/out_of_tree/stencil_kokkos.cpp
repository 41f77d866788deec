// stencil_kokkos: what a Kokkos user writes first, one RangePolicy parallel_for over n on the variant's own
// execution-space instance (its own non-blocking stream on CUDA, so device events time only its kernel),
// registered once per backend this Kokkos enables (serial, openmp, cuda). kstudy/support/kokkos_support.hpp
// supplies the per-space registration and the instance; everything else is plain Kokkos.
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kstudy/support/kokkos_support.hpp"
#include "stencil.hpp"

namespace stencil {
namespace {

template <class ExecutionSpace>
class stencil_kokkos final : public kstudy::variant {
 public:
  using execution_space = ExecutionSpace;  // register_kokkos_variant reads the backend from it
  using device_type = Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>;
  using vector_type = Kokkos::View<float*, device_type>;
  using host_vector = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  static constexpr bool on_host = kstudy::detail::is_host_space_v<ExecutionSpace>;

  stencil_kokkos() : m_instance(/*own_stream=*/true), m_space(m_instance.space()) {}
  ~stencil_kokkos() override { m_instance.drain(); }  // queued work ends before the views are freed
  stencil_kokkos(const stencil_kokkos&) = delete;
  stencil_kokkos& operator=(const stencil_kokkos&) = delete;

  void prepare(const kstudy::problem_data& problem, const kstudy::run_options& options) override {
    const auto& data = stencil_problem(problem);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    m_n = data.n();
    m_x = vector_type(Kokkos::view_alloc("stencil::x", Kokkos::WithoutInitializing), std::size_t(m_n));
    m_y = vector_type(Kokkos::view_alloc("stencil::y", Kokkos::WithoutInitializing), std::size_t(m_n));
    upload(data.streamed_inputs());
  }
  void run() override {
    launch();
    m_space.fence();
  }
  void upload(const std::vector<kstudy::host_span>& inputs) override {
    enqueue_upload(inputs);
    m_space.fence();
  }
  void download(const std::vector<kstudy::host_span>& outputs) override {
    enqueue_download(outputs);
    m_space.fence();
  }
  void poison() override {
    Kokkos::deep_copy(m_space, m_y, std::numeric_limits<float>::quiet_NaN());
    m_space.fence();
  }

  // On a device every call only queues on the variant's stream; wait() fences it.
  bool queues_asynchronously() const override { return !on_host; }
  void enqueue_run() override {
    if constexpr (on_host)
      run();
    else
      launch();
  }
  void enqueue_upload(const std::vector<kstudy::host_span>& inputs) override {
    if (inputs.size() != 1) throw std::invalid_argument("stencil3: expected one input array");
    Kokkos::deep_copy(m_space, m_x, host_vector(inputs[0].as<float>(), std::size_t(m_n)));
  }
  void enqueue_download(const std::vector<kstudy::host_span>& outputs) override {
    Kokkos::deep_copy(m_space, host_vector(outputs.at(0).as<float>(), std::size_t(m_n)), m_y);
  }
  void wait() override { m_space.fence(); }
  void* stream() const override {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same_v<ExecutionSpace, Kokkos::Cuda>) return static_cast<void*>(m_space.cuda_stream());
#endif
    return nullptr;
  }

  // Public: nvcc refuses extended lambdas in private or protected member functions.
  void launch() {
    const auto x = m_x, y = m_y;
    const std::int64_t n = m_n;
    const float w = side_weight, c = centre_weight;  // captured by value into device code
    Kokkos::parallel_for(
        "stencil::stencil3", Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(m_space, 0, n),
        KOKKOS_LAMBDA(const std::int64_t i) {
          const float left = i > 0 ? x(i - 1) : 0.0f;
          const float right = i + 1 < n ? x(i + 1) : 0.0f;
          y(i) = w * (left + right) + c * x(i);
        });
  }

 private:
  kstudy::detail::space_instance<ExecutionSpace> m_instance;  // before m_space: the stream outlives every copy
  ExecutionSpace m_space;
  std::int64_t m_n = 0;
  vector_type m_x, m_y;
};

[[maybe_unused]] const int registered = kstudy::detail::for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  kstudy::detail::register_kokkos_variant<stencil_kokkos<space>>(
      variant_info_for("stencil_kokkos", "stencil_kokkos", "Kokkos RangePolicy, one element per work item"));
});

}  // namespace
}  // namespace stencil
