#pragma once
// What the Kokkos attention rungs share (attention_kokkos.cpp, rung 0; attention_kokkos_tuned.cpp, rung 1):
// the storage types and their widening loads and rounding stores, the quad accesses of the register-tiled
// device kernels, the host kernel (the tuned rung does not tune the host path, so both run the same one),
// the buffers and transfers of a variant, and the variant class of a register-tiled rung. The device kernels
// themselves stay in their rungs' files.
#include <Kokkos_Core.hpp>
#if defined(__CUDACC__)
#include <cuda_fp16.h>  // the device's fp16 conversions (one cvt each)
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attention/attention.hpp"
#include "detail/fp16.hpp"
#include "kstudy/support/kokkos_support.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::attention::kokkos_shared {

using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

// fp16 storage: the 16-bit pattern in a type of its own, so that the loads and stores below pick fp16's
// widening and rounding by overload (bfloat16 is a plain std::uint16_t).
struct fp16_bits {
  std::uint16_t bits;
};

template <attention_precision P>
using storage_t = std::conditional_t<P == attention_precision::fp32, float,
                                     std::conditional_t<P == attention_precision::bf16, std::uint16_t, fp16_bits>>;

// The NaN pattern poison() fills O with.
template <attention_precision P>
storage_t<P> nan_value() {
  if constexpr (P == attention_precision::fp32)
    return std::numeric_limits<float>::quiet_NaN();
  else if constexpr (P == attention_precision::bf16)
    return std::uint16_t(0xffff);
  else
    return fp16_bits{0xffff};
}

// Calls f(precision, mask) for every attention operation, each as a std::integral_constant (the Kokkos
// rungs register a variant per operation).
template <class F>
void for_each_attention_operation(F&& f) {
  using fp32 = std::integral_constant<attention_precision, attention_precision::fp32>;
  using bf16 = std::integral_constant<attention_precision, attention_precision::bf16>;
  using fp16 = std::integral_constant<attention_precision, attention_precision::fp16>;
  using none = std::integral_constant<attention_mask, attention_mask::none>;
  using causal = std::integral_constant<attention_mask, attention_mask::causal>;
  f(fp32{}, none{});
  f(bf16{}, none{});
  f(fp16{}, none{});
  f(fp32{}, causal{});
  f(bf16{}, causal{});
  f(fp16{}, causal{});
}

// What a variant's description adds for the storage and the mask.
inline std::string storage_note(attention_precision precision) {
  return precision == attention_precision::fp32   ? ""
         : precision == attention_precision::bf16 ? "; bf16 widened on the load, O rounded once"
                                                  : "; fp16 widened on the load, O rounded once";
}
inline std::string causal_note(attention_mask mask) {
  return mask == attention_mask::none ? "" : "; causal: key tiles stop at the block's last row, keys j <= t per row";
}

// Registers Variant (one fused kernel of family attention_kokkos) with info at the given rung.
template <class Variant>
void register_fused_rung(variant_info info, int rung) {
  info.rung = rung;
  info.implementation = implementation::kokkos;
  info.fusion = fusion_level::full;
  info.kernels_launched = 1;
  register_kokkos_variant<Variant>(std::move(info));
}

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

// The float an fp16 pattern stands for (exact). On CUDA devices one conversion instruction; elsewhere
// (hosts) detail/fp16.hpp's.
KOKKOS_INLINE_FUNCTION float load_value(fp16_bits h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h.bits));
#else
  return detail::widen_fp16(h.bits);
#endif
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
// Nearest-even fp16 (subnormals kept, 65520 and beyond to infinity, NaN stays NaN), as load_value.
KOKKOS_INLINE_FUNCTION void store_value(fp16_bits& out, float x) {
#if defined(__CUDA_ARCH__)
  out.bits = __half_as_ushort(__float2half_rn(x));
#else
  out.bits = detail::round_to_fp16(x);
#endif
}

// The keys of a tile of `keys` starting at key0 that query row t attends: all without a mask, those up to t
// with the causal one (none when the tile lies beyond t).
template <attention_mask M>
KOKKOS_INLINE_FUNCTION int attended_keys(std::int64_t t, std::int64_t key0, int keys) {
  if (M == attention_mask::none) return keys;
  const std::int64_t through_t = t - key0 + 1;
  return through_t < 0 ? 0 : (through_t < keys ? static_cast<int>(through_t) : keys);
}
// The keys a block of query rows up to last_row attends: every token without a mask, up to last_row with the
// causal one.
template <attention_mask M>
KOKKOS_INLINE_FUNCTION std::int64_t key_end(std::int64_t tokens, std::int64_t last_row) {
  return M == attention_mask::none ? tokens : last_row + 1;
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
KOKKOS_FORCEINLINE_FUNCTION quad load_input_quad(const fp16_bits* p) {
  return {load_value(p[0]), load_value(p[1]), load_value(p[2]), load_value(p[3])};
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
// along head_dim, both contiguous inner loops the compiler vectorises. With the causal mask the block stops
// at its last row's key and each row takes the keys up to its own.
template <class ExecutionSpace, attention_precision P, attention_mask M>
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
    const std::int64_t keys_end = key_end<M>(tokens, row0 + rows - 1);
    for (std::int64_t key0 = 0; key0 < keys_end; key0 += host_keys) {
      const int keys = static_cast<int>(keys_end - key0 < host_keys ? keys_end - key0 : host_keys);
      const storage* const kg = k.data() + head_base + key0 * dim;
      const storage* const vg = v.data() + head_base + key0 * dim;
      for (int j = 0; j < keys; ++j)
        for (int d = 0; d < dim; ++d) {
          kt[d * host_keys + j] = load_value(kg[j * dim + d]);
          vs[j * dim + d] = load_value(vg[j * dim + d]);
        }
      for (int r = 0; r < rows; ++r) {
        const int attended = attended_keys<M>(row0 + r, key0, keys);
        for (int j = 0; j < attended; ++j) sr[j] = 0.0f;
        for (int d = 0; d < dim; ++d) {
          const float qd = qs[r * dim + d];
          const float* const kd = kt + d * host_keys;
          for (int j = 0; j < attended; ++j) sr[j] += qd * kd[j];
        }
        float tile_max = -INFINITY;
        for (int j = 0; j < attended; ++j) {
          sr[j] *= scale;
          tile_max = tile_max > sr[j] ? tile_max : sr[j];
        }
        accumulate_tile(sr, tile_max, vs, attended, dim, os + r * dim, row_max[r], row_sum[r]);
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
class attention_kokkos_base : public kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = kokkos_queued_variant<ExecutionSpace>;

 public:
  using storage = storage_t<P>;
  using device_type = Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>;
  using array_type = Kokkos::View<storage*, device_type>;
  using kokkos_base::on_host;

  attention_kokkos_base() : kokkos_base(/*own_stream=*/true) {}
  ~attention_kokkos_base() override { m_instance.drain(); }  // queued work ends before the buffers are freed

  void poison() override {
    Kokkos::deep_copy(m_space, m_o, nan_value<P>());
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
// The device kernels have no mask: the causal operations take the host path only.
template <class ExecutionSpace, attention_precision P, attention_mask M,
          template <class, attention_precision, int> class DeviceBody>
class tiled_attention_variant : public attention_kokkos_base<ExecutionSpace, P> {
  using base = attention_kokkos_base<ExecutionSpace, P>;

 public:
  using base::on_host;
  static_assert(M == attention_mask::none || on_host, "the device kernels have no causal mask");

  explicit tiled_attention_variant(const std::string& name) : m_name(name), m_label("kstudy::" + name) {}

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = attention_problem(problem, P, M);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    if (data.tokens() > std::numeric_limits<int>::max() / 2)
      throw std::invalid_argument(m_name + ": tokens beyond 2^30");
    const std::int64_t blocks = (data.tokens() + tile_rows - 1) / tile_rows;
    if (data.heads() * blocks > std::numeric_limits<int>::max())
      throw std::invalid_argument(m_name + ": more teams than a Kokkos league holds (2^31 - 1)");
    m_dim = static_cast<int>(data.head_dim());
    if constexpr (on_host) {
      if (data.head_dim() > 65536) throw std::invalid_argument(m_name + ": head_dim beyond 65536");
      m_host_bytes = scratch_floats<ExecutionSpace>::shmem_size(host_body<ExecutionSpace, P, M>::floats(m_dim));
      using policy = typename host_body<ExecutionSpace, P, M>::policy_type;
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
      using body_type = host_body<ExecutionSpace, P, M>;
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
