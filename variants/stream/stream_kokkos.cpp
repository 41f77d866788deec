// The STREAM operations in Kokkos, for every enabled execution space:
//  - stream_kokkos: what a Kokkos user writes first: one RangePolicy parallel_for over n (copy, scale, add,
//    triad) or one parallel_reduce accumulating float64 (dot), on the variant's own execution-space
//    instance (its own non-blocking stream on CUDA, so device events time only its kernel and instances
//    overlap);
//  - stream_kokkos_kernels: the library calls: Kokkos::deep_copy (copy), KokkosBlas::scal (scale),
//    KokkosBlas::update (add, triad: z = a x + b y + 0 z, which does not read z), KokkosBlas::dot (dot: a
//    float result returned to the host, so the call blocks; cuBLAS where Kokkos Kernels has that TPL).
//    Kokkos Kernels 3.4 takes no execution-space instance, so these run on the space's default instance;
//  - stream_kokkos_tuned, as the Kokkos team would write them, on the variant's own instance: copy, scale,
//    add, triad (*_kokkos_float4) as one RangePolicy over float4_t quads, four per work item, with the
//    n % 4 scalar tail as the same kernel's last items; dot (dot_kokkos_team_wave) as reduce_sum's
//    resident-wave TeamPolicy reduction (detail/kokkos_float4.hpp) over the products.
// Device views are Kokkos::View<float*, memory_space>; transfers are deep_copy between them and unmanaged
// views of the host arrays, on the variant's instance.
#include <Kokkos_Core.hpp>
#include <KokkosBlas1_dot.hpp>
#include <KokkosBlas1_scal.hpp>
#include <KokkosBlas1_update.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "detail/kokkos_float4.hpp"
#include "kstudy/support/kokkos_support.hpp"
#include "stream/stream.hpp"
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy::stream {
namespace {

using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

// Buffers, transfers and poisoning of a STREAM kind in one execution space; a family implements launch()
// (queues one resident run on m_space) and, for a reduction whose result lands elsewhere, the result
// hooks.
template <class ExecutionSpace, stream_kind K>
class stream_kokkos_base : public kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = kokkos_queued_variant<ExecutionSpace>;

 public:
  using memory_space = typename ExecutionSpace::memory_space;
  // Device<space, memory>: library calls on a host view would otherwise run on the default host space
  // (OpenMP) whatever the variant's space.
  using device_type = Kokkos::Device<ExecutionSpace, memory_space>;
  using vector_type = Kokkos::View<float*, device_type>;
  using result_type = Kokkos::View<double, device_type>;
  using kokkos_base::on_host;

  // own_stream: a private CUDA stream instead of the default instance's (see the file's comment).
  explicit stream_kokkos_base(bool own_stream) : kokkos_base(own_stream) {}
  ~stream_kokkos_base() override { m_instance.drain(); }  // queued work ends before the buffers are freed

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = stream_problem(problem, K);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    m_n = data.n();
    m_q = data.q();
    const auto n = static_cast<std::size_t>(m_n);
    m_x = vector_type(Kokkos::view_alloc("kstudy::stream::x", Kokkos::WithoutInitializing), n);
    if constexpr (has_y(K)) m_y = vector_type(Kokkos::view_alloc("kstudy::stream::y", Kokkos::WithoutInitializing), n);
    if constexpr (is_reduction(K))
      m_d = result_type("kstudy::stream::d");
    else
      m_z = vector_type(Kokkos::view_alloc("kstudy::stream::z", Kokkos::WithoutInitializing), n);
    this->upload(data.streamed_inputs());
  }

  void poison() override {
    if constexpr (is_reduction(K))
      Kokkos::deep_copy(m_space, m_d, std::numeric_limits<double>::quiet_NaN());
    else
      Kokkos::deep_copy(m_space, m_z, std::numeric_limits<float>::quiet_NaN());
    m_space.fence();
  }

  // The library family shares the default instance, so does not overlap others: only the families on
  // their own stream say they queue asynchronously.
  bool queues_asynchronously() const override { return false; }
  // On a device every launch only queues, so an event recorded after enqueue_run() ends with the work.
  bool enqueues_run() const override { return !on_host; }
  void enqueue_upload(const std::vector<host_span>& inputs) override {
    const auto n = static_cast<std::size_t>(m_n);
    if (inputs.size() != std::size_t(input_count(K)))
      throw std::invalid_argument(std::string(operation_name(K)) + ": expected " + std::to_string(input_count(K)) +
                                  " input arrays");
    Kokkos::deep_copy(m_space, m_x,
                      Kokkos::View<const float*, Kokkos::HostSpace, unmanaged>(inputs[0].as<const float>(), n));
    if constexpr (has_y(K))
      Kokkos::deep_copy(m_space, m_y,
                        Kokkos::View<const float*, Kokkos::HostSpace, unmanaged>(inputs[1].as<const float>(), n));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    if constexpr (is_reduction(K))
      Kokkos::deep_copy(m_space, Kokkos::View<double, Kokkos::HostSpace, unmanaged>(d_output(outputs)), m_d);
    else
      Kokkos::deep_copy(
          m_space, Kokkos::View<float*, Kokkos::HostSpace, unmanaged>(z_output(outputs), static_cast<std::size_t>(m_n)),
          m_z);
  }

 protected:
  using kokkos_base::m_instance;
  using kokkos_base::m_space;
  std::int64_t m_n = 0;
  float m_q = 0.0f;
  vector_type m_x, m_y, m_z;
  result_type m_d;
};

// stream_kokkos: one RangePolicy kernel on the variant's own instance.
template <class ExecutionSpace, stream_kind K>
class stream_kokkos final : public stream_kokkos_base<ExecutionSpace, K> {
  using base = stream_kokkos_base<ExecutionSpace, K>;

 public:
  stream_kokkos() : base(/*own_stream=*/true) {}
  // Its own stream on a device: several instances overlap.
  bool queues_asynchronously() const override { return !base::on_host; }

  void launch() override {
    using policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
    const policy range(this->m_space, 0, this->m_n);
    const auto x = this->m_x, y = this->m_y, z = this->m_z;
    const float q = this->m_q;
    if constexpr (K == stream_kind::copy) {
      Kokkos::parallel_for(
          "kstudy::stream_copy", range, KOKKOS_LAMBDA(const std::int64_t i) { z(i) = x(i); });
    } else if constexpr (K == stream_kind::scale) {
      Kokkos::parallel_for(
          "kstudy::stream_scale", range, KOKKOS_LAMBDA(const std::int64_t i) { z(i) = q * x(i); });
    } else if constexpr (K == stream_kind::add) {
      Kokkos::parallel_for(
          "kstudy::stream_add", range, KOKKOS_LAMBDA(const std::int64_t i) { z(i) = x(i) + y(i); });
    } else if constexpr (K == stream_kind::triad) {
      Kokkos::parallel_for(
          "kstudy::stream_triad", range, KOKKOS_LAMBDA(const std::int64_t i) { z(i) = x(i) + q * y(i); });
    } else {
      // Into a view in the space's memory: on a device the reduction only queues (no host fence).
      Kokkos::parallel_reduce(
          "kstudy::stream_dot", range,
          KOKKOS_LAMBDA(const std::int64_t i, double& sum) { sum += double(x(i)) * double(y(i)); }, this->m_d);
    }
  }
};

// stream_kokkos_strided: one work item per thread the space runs at once (concurrency()), each looping
// over its share: on a device with a grid stride (consecutive items take consecutive elements, so every
// warp's access stays coalesced), on a host over one contiguous block (no two threads share a cache line).
// The plain RangePolicy over n measured 3.3x slower than cuBLAS at n = 2^28 on the H200 with Kokkos 3.4
// (docs/performance_notes.md); this is the same loop with the launch shape the escape path uses.
template <class ExecutionSpace, stream_kind K>
class stream_kokkos_strided final : public stream_kokkos_base<ExecutionSpace, K> {
  using base = stream_kokkos_base<ExecutionSpace, K>;

 public:
  stream_kokkos_strided() : base(/*own_stream=*/true) {}
  bool queues_asynchronously() const override { return !base::on_host; }

  void launch() override {
    const std::int64_t n = this->m_n;
    const std::int64_t items = std::max<std::int64_t>(1, std::min<std::int64_t>(n, this->m_space.concurrency()));
    const std::int64_t share = (n + items - 1) / items;
    constexpr bool grid_stride = !base::on_host;
    using policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
    const policy range(this->m_space, 0, items);
    const auto x = this->m_x, y = this->m_y, z = this->m_z;
    const float q = this->m_q;
    if constexpr (K == stream_kind::dot) {
      Kokkos::parallel_reduce(
          "kstudy::stream_dot_strided", range,
          KOKKOS_LAMBDA(const std::int64_t t, double& sum) {
            const std::int64_t begin = grid_stride ? t : t * share, step = grid_stride ? items : 1;
            const std::int64_t end = grid_stride ? n : (begin + share < n ? begin + share : n);
            for (std::int64_t i = begin; i < end; i += step) sum += double(x(i)) * double(y(i));
          },
          this->m_d);
    } else {
      Kokkos::parallel_for(
          "kstudy::stream_strided", range, KOKKOS_LAMBDA(const std::int64_t t) {
            const std::int64_t begin = grid_stride ? t : t * share, step = grid_stride ? items : 1;
            const std::int64_t end = grid_stride ? n : (begin + share < n ? begin + share : n);
            (void)q;  // nvcc: an extended lambda may not first capture a variable inside if constexpr
            (void)x;
            (void)y;
            (void)z;
            for (std::int64_t i = begin; i < end; i += step) {
              if constexpr (K == stream_kind::copy)
                z(i) = x(i);
              else if constexpr (K == stream_kind::scale)
                z(i) = q * x(i);
              else if constexpr (K == stream_kind::add)
                z(i) = x(i) + y(i);
              else
                z(i) = x(i) + q * y(i);
            }
          });
    }
  }
};

// stream_kokkos_kernels: the Kokkos Kernels (and Kokkos) library call, on the default instance.
template <class ExecutionSpace, stream_kind K>
class stream_kokkos_kernels final : public stream_kokkos_base<ExecutionSpace, K> {
  using base = stream_kokkos_base<ExecutionSpace, K>;

 public:
  stream_kokkos_kernels() : base(/*own_stream=*/false) {}

  // dot's result is a host float (KokkosBlas::dot returns it): kept here, not in the device view.
  void poison() override {
    if constexpr (K == stream_kind::dot)
      m_host_d = std::numeric_limits<double>::quiet_NaN();
    else
      base::poison();
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    if constexpr (K == stream_kind::dot)
      *d_output(outputs) = m_host_d;
    else
      base::enqueue_download(outputs);
  }

  void launch() override {
    const auto x = this->m_x, y = this->m_y, z = this->m_z;
    const float q = this->m_q;
    if constexpr (K == stream_kind::copy) {
      Kokkos::deep_copy(this->m_space, z, x);
    } else if constexpr (K == stream_kind::scale) {
      KokkosBlas::scal(z, q, x);
    } else if constexpr (K == stream_kind::add) {
      KokkosBlas::update(1.0f, x, 1.0f, y, 0.0f, z);
    } else if constexpr (K == stream_kind::triad) {
      KokkosBlas::update(1.0f, x, q, y, 0.0f, z);
    } else {
      m_host_d = KokkosBlas::dot(x, y);  // returns to the host: the call fences
    }
  }

 private:
  double m_host_d = std::numeric_limits<double>::quiet_NaN();
};

// ---------------------------------------------------------------------------------------------------------
// stream_kokkos_tuned

using detail::float4_t;

template <stream_kind K>
KOKKOS_INLINE_FUNCTION float apply(float x, float y, float q) {
  if constexpr (K == stream_kind::copy) {
    (void)y;
    (void)q;
    return x;
  } else if constexpr (K == stream_kind::scale) {
    (void)y;
    return q * x;
  } else if constexpr (K == stream_kind::add) {
    (void)q;
    return x + y;
  } else {
    return x + q * y;  // triad; a device compiler contracts it to one FMA, which the gate allows
  }
}

template <stream_kind K>
KOKKOS_INLINE_FUNCTION float4_t apply4(const float4_t& a, const float4_t& b, float q) {
  return {apply<K>(a.x, b.x, q), apply<K>(a.y, b.y, q), apply<K>(a.z, b.z, q), apply<K>(a.w, b.w, q)};
}

// has_y() is a host constexpr function; device code reads its value through this constant.
template <stream_kind K>
inline constexpr bool reads_y = has_y(K);

// Quads moved by one work item of queue_float4_elementwise.
inline constexpr int quads_per_item = 4;

// z = op(x, y) over n floats as one RangePolicy parallel_for: `items` work items of up to four quads each
// (all loaded before any is stored), then the n - 4 quads scalar elements as the range's last items.
// Item i takes quads i + k items on a device (consecutive items on consecutive quads: every warp's load
// and store is coalesced) and 4 i + k on a host (one contiguous run per item, contiguous blocks of items
// per thread under the OpenMP schedule). Four quads per item rather than one because of what RangePolicy
// does on CUDA: its chunk size is not used (Kokkos' CUDA parallel_for strides over blockDim x gridDim),
// IndexType only sets the index's type (int64: n may pass 2^31), and the block size is Kokkos' occupancy
// choice up to LaunchBounds' 256 threads, where Kokkos 3.4 takes the smallest block that reaches the best
// occupancy (64 threads for a light kernel; Kokkos 4 stops at 128): per item one quad, Kokkos 3.4 would
// schedule one 64-thread block per KiB of x with one load in flight per thread. Items never fall below
// min(quads, concurrency()), so small n still fills the device.
template <stream_kind K, class ExecutionSpace, class ConstQuads, class Quads, class ConstFloats, class Floats>
void queue_float4_elementwise(const ExecutionSpace& space, const ConstQuads& x4, const ConstQuads& y4, const Quads& z4,
                              const ConstFloats& x, const ConstFloats& y, const Floats& z, float q, std::int64_t quads,
                              std::int64_t n) {
  constexpr bool contiguous = is_host_space_v<ExecutionSpace>;
  constexpr int per_item = quads_per_item;
  const std::int64_t items =
      std::max(std::min<std::int64_t>(quads, space.concurrency()), (quads + per_item - 1) / per_item);
  const std::int64_t tail = n - 4 * quads;
  using policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>, Kokkos::LaunchBounds<256, 4>>;
  Kokkos::parallel_for(
      std::string("kstudy::stream_") + short_name(K) + "_float4", light_weight(policy(space, 0, items + tail)),
      KOKKOS_LAMBDA(const std::int64_t i) {
        (void)x;  // nvcc: an extended lambda may not first capture a variable inside if constexpr
        (void)y;
        (void)z;
        (void)y4;
        (void)q;
        if (i < items) {
          const std::int64_t first = contiguous ? per_item * i : i, stride = contiguous ? 1 : items;
          float4_t a[per_item] = {}, b[per_item] = {};
          KSTUDY_FLOAT4_UNROLL
          for (int k = 0; k < per_item; ++k) {
            const std::int64_t j = first + k * stride;
            if (j < quads) {
              a[k] = x4(j);
              if constexpr (reads_y<K>) b[k] = y4(j);
            }
          }
          KSTUDY_FLOAT4_UNROLL
          for (int k = 0; k < per_item; ++k) {
            const std::int64_t j = first + k * stride;
            if (j < quads) z4(j) = apply4<K>(a[k], b[k], q);
          }
        } else {
          const std::int64_t j = 4 * quads + (i - items);
          if constexpr (reads_y<K>)
            z(j) = apply<K>(x(j), y(j), q);
          else
            z(j) = apply<K>(x(j), 0.0f, q);
        }
      });
}

// The terms of stream_dot's sum for detail::thread_sum: the products x_i y_i in float, by quads.
template <class Quads, class Floats>
struct dot_terms {
  Quads x4, y4;
  Floats x, y;
  KOKKOS_INLINE_FUNCTION float4_t quad(std::int64_t q) const {
    const float4_t a = x4(q), b = y4(q);
    return {a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w};
  }
  KOKKOS_INLINE_FUNCTION float one(std::int64_t i) const { return x(i) * y(i); }
};

template <class ExecutionSpace, stream_kind K>
class stream_kokkos_tuned final : public stream_kokkos_base<ExecutionSpace, K> {
  using base = stream_kokkos_base<ExecutionSpace, K>;
  using device_type = typename base::device_type;
  using const_vector = Kokkos::View<const float*, device_type>;
  using const_quads = Kokkos::View<const float4_t*, device_type, detail::quad_traits>;
  using quads = Kokkos::View<float4_t*, device_type, detail::quad_traits>;

 public:
  stream_kokkos_tuned() : base(/*own_stream=*/true) {}
  bool queues_asynchronously() const override { return !base::on_host; }

  // Quads over the vectors just allocated (none where one is not 16-byte aligned: then every element is
  // a scalar item).
  void prepare(const problem_data& problem, const run_options& options) override {
    base::prepare(problem, options);
    const bool aligned = detail::quad_aligned(this->m_x) && detail::quad_aligned(this->m_y) &&
                         (is_reduction(K) || detail::quad_aligned(this->m_z));
    m_quads = aligned ? this->m_n / 4 : 0;
    m_x4 = detail::quads_of(const_vector(this->m_x), m_quads);
    if constexpr (has_y(K)) m_y4 = detail::quads_of(const_vector(this->m_y), m_quads);
    if constexpr (!is_reduction(K)) m_z4 = detail::quads_of(this->m_z, m_quads);
  }

  void launch() override {
    if constexpr (K == stream_kind::dot) {
      const dot_terms<const_quads, const_vector> terms{m_x4, m_y4, this->m_x, this->m_y};
      detail::queue_team_wave_sum("kstudy::stream_dot_team_wave", this->m_space, terms, m_quads, this->m_n, this->m_d);
    } else {
      queue_float4_elementwise<K>(this->m_space, m_x4, m_y4, m_z4, const_vector(this->m_x), const_vector(this->m_y),
                                  this->m_z, this->m_q, m_quads, this->m_n);
    }
  }

 private:
  std::int64_t m_quads = 0;
  const_quads m_x4, m_y4;
  quads m_z4;
};

template <stream_kind K>
std::string kokkos_tuned_description() {
  if constexpr (K == stream_kind::dot) {
    return "Kokkos TeamPolicy<LaunchBounds<256, 4>> (HintLightWeight) parallel_reduce into a device View over the "
           "resident teams (one thread per team on a host), float4_t quads of x and y through unmanaged Restrict "
           "Views (4 x 2 loads in flight per thread, grid stride; a contiguous block on a host), float products and "
           "running sums folded into float64, team partials by parallel_reduce(TeamThreadRange) and "
           "single(PerTeam), one kernel";
  } else {
    const char* op = K == stream_kind::copy    ? "z = x"
                     : K == stream_kind::scale ? "z = q x"
                     : K == stream_kind::add   ? "z = x + y"
                                               : "z = x + q y";
    return "Kokkos RangePolicy<IndexType<int64>, LaunchBounds<256, 4>> (HintLightWeight) parallel_for: " +
           std::string(op) +
           " over float4_t quads through unmanaged Restrict Views, 4 quads per work item (all loaded before any is "
           "stored; strided by the item count on a device, contiguous on a host), the n % 4 tail as the last items";
  }
}

template <stream_kind K>
std::string kokkos_description() {
  switch (K) {
    case stream_kind::copy:
      return "Kokkos RangePolicy parallel_for: z(i) = x(i)";
    case stream_kind::scale:
      return "Kokkos RangePolicy parallel_for: z(i) = q * x(i)";
    case stream_kind::add:
      return "Kokkos RangePolicy parallel_for: z(i) = x(i) + y(i)";
    case stream_kind::triad:
      return "Kokkos RangePolicy parallel_for: z(i) = x(i) + q * y(i)";
    case stream_kind::dot:
      return "Kokkos RangePolicy parallel_reduce, float64 accumulation, into a device view";
  }
  return {};
}

template <stream_kind K>
std::string kokkos_kernels_description() {
  switch (K) {
    case stream_kind::copy:
      return "Kokkos::deep_copy(z, x), default instance";
    case stream_kind::scale:
      return "KokkosBlas::scal(z, q, x), default instance";
    case stream_kind::add:
      return "KokkosBlas::update(1, x, 1, y, 0, z), default instance";
    case stream_kind::triad:
      return "KokkosBlas::update(1, x, q, y, 0, z), default instance";
    case stream_kind::dot:
      return "KokkosBlas::dot(x, y): float accumulation, result returned to the host (blocking; cuBLAS TPL where "
             "enabled), default instance";
  }
  return {};
}

template <class Space, stream_kind K>
void register_kind() {
  auto kokkos = variant_info_for(K, "kokkos", "stream_kokkos", kokkos_description<K>());
  kokkos.kernels_launched = 1;  // the parallel_for (or parallel_reduce)
  register_kokkos_variant<stream_kokkos<Space, K>>(std::move(kokkos));
  auto strided = variant_info_for(K, "kokkos_strided", "stream_kokkos_strided",
                                  "Kokkos RangePolicy over the resident threads, each looping over its elements "
                                  "(grid stride on a device, one contiguous block on a host)");
  strided.kernels_launched = 1;  // the parallel_for (or parallel_reduce)
  register_kokkos_variant<stream_kokkos_strided<Space, K>>(std::move(strided));
  auto kernels = variant_info_for(K, "kokkos_kernels", "stream_kokkos_kernels", kokkos_kernels_description<K>());
  kernels.kernels_launched = 1;  // the deep_copy, scal, update or dot
  kernels.implementation = implementation::kokkos_kernels;
  register_kokkos_variant<stream_kokkos_kernels<Space, K>>(std::move(kernels));
  // rung 0, as every portable variant: the reports take rung > 0 for the handwritten CUDA ladder, and count
  // only rung 0 Kokkos variants as the portable side of the comparison.
  auto tuned = variant_info_for(K, K == stream_kind::dot ? "kokkos_team_wave" : "kokkos_float4", "stream_kokkos_tuned",
                                kokkos_tuned_description<K>());
  tuned.rung = 1;              // the portable ladder: the RangePolicy variants (0) are the first attempt
  tuned.kernels_launched = 1;  // the parallel_for (tail included), or the parallel_reduce
  register_kokkos_variant<stream_kokkos_tuned<Space, K>>(std::move(tuned));
}

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  register_kind<space, stream_kind::copy>();
  register_kind<space, stream_kind::scale>();
  register_kind<space, stream_kind::add>();
  register_kind<space, stream_kind::triad>();
  register_kind<space, stream_kind::dot>();
});

}  // namespace
}  // namespace kstudy::stream
