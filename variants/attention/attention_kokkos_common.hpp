#pragma once
// What the Kokkos attention rungs share (attention_kokkos.cpp, rung 0; attention_kokkos_tuned.cpp, rung 1):
// the storage types and their widening loads and rounding stores, the quad accesses of the register-tiled
// device kernels, the host kernel (the tuned rung does not tune the host path, so both run the same one),
// the buffers and transfers of a variant, and the variant class of a register-tiled rung. The device kernels
// themselves stay in their rungs' files.
#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attention/attention.hpp"
#include "kstudy/support/kokkos_support.hpp"

namespace kstudy::attention::kokkos_shared {

using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

template <attention_precision P>
using storage_t = std::conditional_t<P == attention_precision::fp32, float, std::uint16_t>;

template <class ExecutionSpace>
using scratch_floats = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, unmanaged>;

// Bit casts through a union: valid in host and device code of every compiler Kokkos supports.
union float_bits {
  float f;
  std::uint32_t u;
};

KOKKOS_INLINE_FUNCTION float load_value(float x) { return x; }
KOKKOS_INLINE_FUNCTION float load_value(std::uint16_t bits) {
  float_bits b;
  b.u = std::uint32_t(bits) << 16;
  return b.f;
}

KOKKOS_INLINE_FUNCTION void store_value(float& out, float x) { out = x; }
// Nearest-even bfloat16; NaN stays NaN.
KOKKOS_INLINE_FUNCTION void store_value(std::uint16_t& out, float x) {
  float_bits b;
  b.f = x;
  if (x != x) {
    out = static_cast<std::uint16_t>((b.u >> 16) | 0x40u);
    return;
  }
  b.u += 0x7fffu + ((b.u >> 16) & 1u);
  out = static_cast<std::uint16_t>(b.u >> 16);
}

// One key tile's online-softmax step for a query row: rescales what the earlier tiles accumulated in orow
// and row_sum to the new running maximum, then adds the tile's weights exp(s - max) and their values.
// scores: the tile's scaled scores; tile_max: their maximum; values: the tile's V rows (dim apart).
KOKKOS_INLINE_FUNCTION void accumulate_tile(const float* scores, float tile_max, const float* values, int keys, int dim,
                                            float* orow, float& row_max, float& row_sum) {
  const float m_old = row_max, m_new = m_old > tile_max ? m_old : tile_max;
  float l = row_sum;
  if (m_new > m_old) {  // rescale what the earlier tiles accumulated (nothing yet on the first)
    const float correction = expf(m_old - m_new);  // 0 while m_old is -inf
    l *= correction;
    for (int d = 0; d < dim; ++d) orow[d] *= correction;
  }
  for (int j = 0; j < keys; ++j) {
    const float p = expf(scores[j] - m_new);
    const float* const vj = values + j * dim;
    l += p;
    for (int d = 0; d < dim; ++d) orow[d] += p * vj[d];
  }
  row_max = m_new;
  row_sum = l;
}

// Four consecutive floats; float4 accesses on CUDA (p 16-byte aligned), scalar ones elsewhere.
struct quad {
  float x, y, z, w;
};
KOKKOS_FORCEINLINE_FUNCTION quad load_quad(const float* p) {
#if defined(__CUDA_ARCH__)
  const float4 v = *reinterpret_cast<const float4*>(p);
  return {v.x, v.y, v.z, v.w};
#else
  return {p[0], p[1], p[2], p[3]};
#endif
}
KOKKOS_FORCEINLINE_FUNCTION void store_quad(float* p, const quad& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<float4*>(p) = make_float4(v.x, v.y, v.z, v.w);
#else
  p[0] = v.x;
  p[1] = v.y;
  p[2] = v.z;
  p[3] = v.w;
#endif
}
// Four consecutive inputs from global memory, widened; p aligned to 4 elements (one 16- or 8-byte load).
KOKKOS_FORCEINLINE_FUNCTION quad load_input_quad(const float* p) { return load_quad(p); }
KOKKOS_FORCEINLINE_FUNCTION quad load_input_quad(const std::uint16_t* p) {
#if defined(__CUDA_ARCH__)
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  return {load_value(std::uint16_t(v.x & 0xffffu)), load_value(std::uint16_t(v.x >> 16)),
          load_value(std::uint16_t(v.y & 0xffffu)), load_value(std::uint16_t(v.y >> 16))};
#else
  return {load_value(p[0]), load_value(p[1]), load_value(p[2]), load_value(p[3])};
#endif
}
KOKKOS_INLINE_FUNCTION float* align16(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(p) + 15) & ~std::uintptr_t(15));
}

// The register-tiled rungs' launch shape: a team takes tile_rows query rows of a head on a device and on a
// host alike (one league for both), device_threads threads on a device for head_dim up to
// max_device_head_dim, and a host team streams K and V in tiles of host_keys keys.
constexpr int tile_rows = 64;
constexpr int device_threads = 128;
constexpr int max_device_head_dim = 128;
constexpr int host_keys = 64;

// The host kernel of the register-tiled rungs: a team is one thread and tile_rows query rows, any head_dim.
// One scratch level holds Q, the O accumulators, a host_keys-key K tile transposed, the V tile and a score
// row: the score row is host_keys independent sums updated along the transposed K tile and O += p V runs
// along head_dim, both contiguous inner loops the compiler vectorises.
template <class ExecutionSpace, attention_precision P>
struct host_body {
  using storage = storage_t<P>;
  using device_type = Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>;
  using array_type = Kokkos::View<storage*, device_type>;
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace>;
  using member_type = typename policy_type::member_type;

  array_type q, k, v, o;
  std::int64_t tokens = 0;
  int dim = 0, blocks_per_head = 1, level = 0;
  float scale = 1.0f;

  // Q block, O accumulators, K tile transposed (dim x 64), V tile (64 x dim), a score row, max and sum per row.
  KOKKOS_INLINE_FUNCTION static std::size_t floats(int dim) {
    return std::size_t(2) * tile_rows * dim + std::size_t(2) * host_keys * dim + host_keys + 2 * tile_rows;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const scratch_floats<ExecutionSpace> scratch(team.team_scratch(level), floats(dim));
    float* const qs = scratch.data();
    float* const os = qs + std::size_t(tile_rows) * dim;
    float* const kt = os + std::size_t(tile_rows) * dim;
    float* const vs = kt + std::size_t(host_keys) * dim;
    float* const sr = vs + std::size_t(host_keys) * dim;
    float* const row_max = sr + host_keys;
    float* const row_sum = row_max + tile_rows;
    const std::int64_t head = team.league_rank() / blocks_per_head;
    const std::int64_t row0 = std::int64_t(team.league_rank() % blocks_per_head) * tile_rows;
    const int rows = static_cast<int>(tokens - row0 < tile_rows ? tokens - row0 : tile_rows);
    const std::int64_t head_base = head * tokens * dim;
    const storage* const qg = q.data() + head_base + row0 * dim;
    for (int i = 0; i < rows * dim; ++i) {
      qs[i] = load_value(qg[i]);
      os[i] = 0.0f;
    }
    for (int r = 0; r < rows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
    for (std::int64_t key0 = 0; key0 < tokens; key0 += host_keys) {
      const int keys = static_cast<int>(tokens - key0 < host_keys ? tokens - key0 : host_keys);
      const storage* const kg = k.data() + head_base + key0 * dim;
      const storage* const vg = v.data() + head_base + key0 * dim;
      for (int j = 0; j < keys; ++j)
        for (int d = 0; d < dim; ++d) {
          kt[d * host_keys + j] = load_value(kg[j * dim + d]);
          vs[j * dim + d] = load_value(vg[j * dim + d]);
        }
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < keys; ++j) sr[j] = 0.0f;
        for (int d = 0; d < dim; ++d) {
          const float qd = qs[r * dim + d];
          const float* const kd = kt + d * host_keys;
          for (int j = 0; j < keys; ++j) sr[j] += qd * kd[j];
        }
        float tile_max = -INFINITY;
        for (int j = 0; j < keys; ++j) {
          sr[j] *= scale;
          tile_max = tile_max > sr[j] ? tile_max : sr[j];
        }
        accumulate_tile(sr, tile_max, vs, keys, dim, os + r * dim, row_max[r], row_sum[r]);
      }
    }
    storage* const og = o.data() + head_base + row0 * dim;
    for (int r = 0; r < rows; ++r) {
      const float inv = 1.0f / row_sum[r];
      for (int d = 0; d < dim; ++d) store_value(og[r * dim + d], os[r * dim + d] * inv);
    }
  }
};

// Q, K, V and O of one precision in one execution space, their transfers and the poisoning of O; a variant
// derives, allocates in prepare() and implements launch().
template <class ExecutionSpace, attention_precision P>
class attention_kokkos_base : public detail::kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = detail::kokkos_queued_variant<ExecutionSpace>;

 public:
  using storage = storage_t<P>;
  using device_type = Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>;
  using array_type = Kokkos::View<storage*, device_type>;
  using kokkos_base::on_host;

  attention_kokkos_base() : kokkos_base(/*own_stream=*/true) {}
  ~attention_kokkos_base() override { m_instance.drain(); }  // queued work ends before the buffers are freed

  void poison() override {
    if constexpr (P == attention_precision::fp32)
      Kokkos::deep_copy(m_space, m_o, std::numeric_limits<float>::quiet_NaN());
    else
      Kokkos::deep_copy(m_space, m_o, std::uint16_t(0xffff));  // a NaN pattern
    m_space.fence();
  }

  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != 3) throw std::invalid_argument(std::string(operation_name(P)) + ": expected Q, K and V");
    using host_view = Kokkos::View<const storage*, Kokkos::HostSpace, unmanaged>;
    const auto n = static_cast<std::size_t>(m_elements);
    Kokkos::deep_copy(m_space, m_q, host_view(inputs[0].as<const storage>(), n));
    Kokkos::deep_copy(m_space, m_k, host_view(inputs[1].as<const storage>(), n));
    Kokkos::deep_copy(m_space, m_v, host_view(inputs[2].as<const storage>(), n));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    using host_view = Kokkos::View<storage*, Kokkos::HostSpace, unmanaged>;
    Kokkos::deep_copy(m_space,
                      host_view(static_cast<storage*>(o_output(outputs)), static_cast<std::size_t>(m_elements)), m_o);
  }

 protected:
  // Q, K, V and O of `elements` each, uninitialised (the upload and poison() write them).
  void allocate(std::int64_t elements) {
    m_elements = elements;
    const auto n = static_cast<std::size_t>(m_elements);
    const auto alloc = [](const std::string& label) { return Kokkos::view_alloc(label, Kokkos::WithoutInitializing); };
    m_q = array_type(alloc("kstudy::attention::q"), n);
    m_k = array_type(alloc("kstudy::attention::k"), n);
    m_v = array_type(alloc("kstudy::attention::v"), n);
    m_o = array_type(alloc("kstudy::attention::o"), n);
  }

  using kokkos_base::m_instance;
  using kokkos_base::m_space;
  array_type m_q, m_k, m_v, m_o;
  std::int64_t m_elements = 0;
};

// A register-tiled rung's variant: one team per (head, tile_rows query rows); on a device
// DeviceBody<ExecutionSpace, P, DMAX> (DMAX 64 for head_dim <= 64, else 128: its tiles say what team scratch
// it takes), on a host host_body. A rung derives with its name, which its errors and kernel label carry.
template <class ExecutionSpace, attention_precision P, template <class, attention_precision, int> class DeviceBody>
class tiled_attention_variant : public attention_kokkos_base<ExecutionSpace, P> {
  using base = attention_kokkos_base<ExecutionSpace, P>;

 public:
  using base::on_host;

  explicit tiled_attention_variant(const std::string& name) : m_name(name), m_label("kstudy::" + name) {}

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = attention_problem(problem, P);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    if (data.tokens() > std::numeric_limits<int>::max() / 2)
      throw std::invalid_argument(m_name + ": tokens beyond 2^30");
    const std::int64_t blocks = (data.tokens() + tile_rows - 1) / tile_rows;
    if (data.heads() * blocks > std::numeric_limits<int>::max())
      throw std::invalid_argument(m_name + ": more teams than a Kokkos league holds (2^31 - 1)");
    m_dim = static_cast<int>(data.head_dim());
    if constexpr (on_host) {
      if (data.head_dim() > 65536) throw std::invalid_argument(m_name + ": head_dim beyond 65536");
      m_host_bytes = scratch_floats<ExecutionSpace>::shmem_size(host_body<ExecutionSpace, P>::floats(m_dim));
      using policy = typename host_body<ExecutionSpace, P>::policy_type;
      m_level = m_host_bytes <= static_cast<std::size_t>(policy::scratch_size_max(0)) ? 0 : 1;
      if (m_host_bytes > static_cast<std::size_t>(policy::scratch_size_max(m_level)))
        throw std::invalid_argument(m_name + ": head_dim too large for the team scratch");
    } else {
      if (data.head_dim() > max_device_head_dim)
        throw std::invalid_argument(m_name + ": head_dim beyond " + std::to_string(max_device_head_dim));
      m_dmax = m_dim <= 64 ? 64 : 128;
      if (m_dmax == 64)
        check_device_scratch<64>();
      else
        check_device_scratch<128>();
    }
    this->allocate(data.elements());
    m_tokens = data.tokens();
    m_blocks_per_head = static_cast<int>(blocks);
    m_scale = data.scale();
    m_teams = static_cast<int>(data.heads() * blocks);
    this->upload(data.streamed_inputs());
  }

  void launch() override {
    if constexpr (on_host) {
      using body_type = host_body<ExecutionSpace, P>;
      body_type body;
      fill(body);
      body.level = m_level;
      typename body_type::policy_type policy(m_space, m_teams, 1);
      policy = policy.set_scratch_size(m_level, Kokkos::PerTeam(m_host_bytes));
      Kokkos::parallel_for(m_label, policy, body);
    } else {
      if (m_dmax == 64)
        launch_device<64>();
      else
        launch_device<128>();
    }
  }

 private:
  template <class Body>
  void fill(Body& body) const {
    body.q = this->m_q;
    body.k = this->m_k;
    body.v = this->m_v;
    body.o = this->m_o;
    body.tokens = static_cast<decltype(body.tokens)>(m_tokens);  // a device body may hold it in 32 bits
    body.dim = m_dim;
    body.blocks_per_head = m_blocks_per_head;
    body.scale = m_scale;
  }
  template <int DMAX>
  static std::size_t device_bytes(int level) {
    return scratch_floats<ExecutionSpace>::shmem_size(DeviceBody<ExecutionSpace, P, DMAX>::tiles::level_floats(level));
  }
  template <int DMAX>
  void check_device_scratch() const {
    using policy = typename DeviceBody<ExecutionSpace, P, DMAX>::policy_type;
    for (int level = 0; level < 2; ++level)
      if (device_bytes<DMAX>(level) > static_cast<std::size_t>(policy::scratch_size_max(level)))
        throw std::invalid_argument(m_name + ": the DMAX " + std::to_string(DMAX) + " tiles need " +
                                    std::to_string(device_bytes<DMAX>(level)) + " bytes of level-" +
                                    std::to_string(level) + " team scratch; this Kokkos offers " +
                                    std::to_string(policy::scratch_size_max(level)));
  }
  template <int DMAX>
  void launch_device() {
    using body_type = DeviceBody<ExecutionSpace, P, DMAX>;
    body_type body;
    fill(body);
    typename body_type::policy_type policy(m_space, m_teams, device_threads);
    policy = policy.set_scratch_size(0, Kokkos::PerTeam(device_bytes<DMAX>(0)));
    if constexpr (body_type::tiles::q_level == 1)
      policy = policy.set_scratch_size(1, Kokkos::PerTeam(device_bytes<DMAX>(1)));
    Kokkos::parallel_for(m_label, policy, body);
  }

  using base::m_space;
  std::string m_name, m_label;
  std::int64_t m_tokens = 0;
  std::size_t m_host_bytes = 0;
  int m_dim = 0, m_dmax = 64, m_level = 0, m_blocks_per_head = 1, m_teams = 1;
  float m_scale = 1.0f;
};

}  // namespace kstudy::attention::kokkos_shared
