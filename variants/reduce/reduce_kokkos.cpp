// reduce_sum in Kokkos, for every enabled execution space (not ladder rungs: the portable versions the
// CUDA ladder is compared against):
//  - reduce_sum_kokkos: what a Kokkos user writes: one RangePolicy parallel_reduce over n, float64
//    accumulation (free on a memory-bound kernel), into a view in the space's memory (so on a device the
//    reduction only queues), on the variant's own execution-space instance;
//  - reduce_sum_kokkos_strided: one work item per thread the space runs at once (concurrency()), each
//    summing its share: a grid stride on a device (coalesced), one contiguous block on a host - the launch
//    shape of the CUDA ladder's top rung, in portable code;
//  - reduce_sum_kokkos_team_wave: the reduction as the Kokkos team would tune it: one parallel_reduce
//    over a TeamPolicy of the teams resident at once, 16-byte float4_t loads (four in flight per thread),
//    float running sums folded into float64, each team's partial by Kokkos' team reduction and the teams'
//    partials by the policy's own reduction in the same kernel (detail/kokkos_float4.hpp). Not a rung of
//    the CUDA ladder: the portable version it is compared with, as the others.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "detail/kokkos_float4.hpp"
#include "kstudy/support/kokkos_support.hpp"
#include "reduce/reduce_sum.hpp"

namespace kstudy::reduce {
namespace {

using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

// Buffers, transfers and poisoning in one execution space; a family implements launch().
template <class ExecutionSpace>
class reduce_kokkos_base : public kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = kokkos_queued_variant<ExecutionSpace>;

 public:
  using memory_space = typename ExecutionSpace::memory_space;
  using device_type = Kokkos::Device<ExecutionSpace, memory_space>;
  using vector_type = Kokkos::View<float*, device_type>;
  using result_type = Kokkos::View<double, device_type>;
  using kokkos_base::on_host;

  reduce_kokkos_base() : kokkos_base(/*own_stream=*/true) {}
  ~reduce_kokkos_base() override { m_instance.drain(); }  // queued work ends before the buffers are freed

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = reduce_problem(problem);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    m_n = data.n();
    m_x = vector_type(Kokkos::view_alloc("kstudy::reduce::x", Kokkos::WithoutInitializing),
                      static_cast<std::size_t>(m_n));
    m_s = result_type("kstudy::reduce::s");
    this->upload(data.streamed_inputs());
  }

  void poison() override {
    Kokkos::deep_copy(m_space, m_s, std::numeric_limits<double>::quiet_NaN());
    m_space.fence();
  }

  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != 1) throw std::invalid_argument("reduce_sum: expected one input array");
    Kokkos::deep_copy(m_space, m_x,
                      Kokkos::View<const float*, Kokkos::HostSpace, unmanaged>(inputs[0].as<const float>(),
                                                                               static_cast<std::size_t>(m_n)));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    Kokkos::deep_copy(m_space, Kokkos::View<double, Kokkos::HostSpace, unmanaged>(s_output(outputs)), m_s);
  }

 protected:
  using kokkos_base::m_instance;
  using kokkos_base::m_space;
  std::int64_t m_n = 0;
  vector_type m_x;
  result_type m_s;
};

template <class ExecutionSpace>
class reduce_kokkos final : public reduce_kokkos_base<ExecutionSpace> {
 public:
  void launch() override {
    using policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
    const auto x = this->m_x;
    Kokkos::parallel_reduce(
        "kstudy::reduce_sum", policy(this->m_space, 0, this->m_n),
        KOKKOS_LAMBDA(const std::int64_t i, double& sum) { sum += double(x(i)); }, this->m_s);
  }
};

template <class ExecutionSpace>
class reduce_kokkos_strided final : public reduce_kokkos_base<ExecutionSpace> {
  using base = reduce_kokkos_base<ExecutionSpace>;

 public:
  void launch() override {
    const std::int64_t n = this->m_n;
    const std::int64_t items = std::max<std::int64_t>(1, std::min<std::int64_t>(n, this->m_space.concurrency()));
    const std::int64_t share = (n + items - 1) / items;
    constexpr bool grid_stride = !base::on_host;
    using policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
    const auto x = this->m_x;
    Kokkos::parallel_reduce(
        "kstudy::reduce_sum_strided", policy(this->m_space, 0, items),
        KOKKOS_LAMBDA(const std::int64_t t, double& sum) {
          const std::int64_t begin = grid_stride ? t : t * share, step = grid_stride ? items : 1;
          const std::int64_t end = grid_stride ? n : (begin + share < n ? begin + share : n);
          for (std::int64_t i = begin; i < end; i += step) sum += double(x(i));
        },
        this->m_s);
  }
};

// The terms of the sum for detail::thread_sum: x by quads, and its scalar tail.
template <class Quads, class Floats>
struct sum_terms {
  Quads x4;
  Floats x;
  KOKKOS_INLINE_FUNCTION detail::float4_t quad(std::int64_t q) const { return x4(q); }
  KOKKOS_INLINE_FUNCTION float one(std::int64_t i) const { return x(i); }
};

template <class ExecutionSpace>
class reduce_kokkos_team_wave final : public reduce_kokkos_base<ExecutionSpace> {
  using base = reduce_kokkos_base<ExecutionSpace>;
  using device_type = typename base::device_type;
  using terms_type = sum_terms<Kokkos::View<const detail::float4_t*, device_type, detail::quad_traits>,
                               Kokkos::View<const float*, device_type>>;

 public:
  void prepare(const problem_data& problem, const run_options& options) override {
    base::prepare(problem, options);
    const Kokkos::View<const float*, device_type> x = this->m_x;
    m_quads = detail::quad_aligned(x) ? this->m_n / 4 : 0;
    m_terms = terms_type{detail::quads_of(x, m_quads), x};
  }

  void launch() override {
    detail::queue_team_wave_sum("kstudy::reduce_sum_team_wave", this->m_space, m_terms, m_quads, this->m_n, this->m_s);
  }

 private:
  std::int64_t m_quads = 0;
  terms_type m_terms;
};

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  auto plain = variant_info_for("kokkos", "reduce_kokkos",
                                "Kokkos RangePolicy parallel_reduce over n, float64 accumulation, into a view "
                                "in the space's memory, own instance");
  plain.kernels_launched = 1;  // the parallel_reduce (Kokkos combines the blocks inside it)
  register_kokkos_variant<reduce_kokkos<space>>(std::move(plain));
  auto strided = variant_info_for("kokkos_strided", "reduce_kokkos_strided",
                                  "Kokkos parallel_reduce over the resident threads, each summing its share in "
                                  "float64 (grid stride on a device, one contiguous block on a host)");
  strided.kernels_launched = 1;  // the parallel_reduce
  register_kokkos_variant<reduce_kokkos_strided<space>>(std::move(strided));
  // rung 0, as every portable variant: the ladder and the reports take rung > 0 for the handwritten CUDA
  // ladder, and count only rung 0 Kokkos variants as the portable side of the comparison.
  auto wave = variant_info_for("kokkos_team_wave", "reduce_kokkos_tuned",
                               "Kokkos TeamPolicy<LaunchBounds<256, 4>> (HintLightWeight) parallel_reduce into a "
                               "device View over the resident teams (one thread per team on a host), float4_t quads "
                               "through an unmanaged Restrict View (4 loads in flight per thread, grid stride; a "
                               "contiguous block on a host), float running sums folded into float64, team partials "
                               "by parallel_reduce(TeamThreadRange) and single(PerTeam), one kernel");
  wave.rung = 1;              // the portable ladder: reduce_sum_kokkos (0) is the first attempt
  wave.kernels_launched = 1;  // the parallel_reduce: Kokkos combines the teams' values inside it
  register_kokkos_variant<reduce_kokkos_team_wave<space>>(std::move(wave));
});

}  // namespace
}  // namespace kstudy::reduce
