// Fused attention in Kokkos, for every enabled execution space (portable, rung 0, family attention_kokkos):
// attention_kokkos_fused (attention) and attention_bf16_kokkos_fused (attention_bf16).
// a TeamPolicy with one team per (head, block of query rows). The team stages its query block in team
// scratch, then streams K and V through scratch one tile of keys at a time (consecutive threads load
// consecutive elements: coalesced on a GPU). Each query row keeps an online softmax -- running max m,
// running sum l and an accumulator o[D] rescaled by exp(m_old - m_new) when the max grows -- so the T x T
// score matrix is never formed: a tile's scores live in scratch (block_q x block_k floats) and the memory
// beyond Q, K, V and O is per team, independent of T.
// On a device a team has one thread per query row: the K and V tile reads are broadcasts (every thread reads
// the same key), the per-row arrays have an odd stride so that the row-private reads of a warp hit 32
// different banks. On a host a team is one thread and walks its rows in turn (contiguous inner loops over d).
// Tile sizes start at 64 x 64 and shrink until the scratch fits the space's level-0 team scratch (Kokkos 3.4:
// 40 KB on CUDA, 32 KB on hosts); a head_dim too large even for 8 x 8 tiles uses level-1 scratch (global
// memory) instead.
// attention_bf16 reads the 16-bit patterns and widens them to float (bits << 16, exact); scores, softmax and
// accumulation are float32, and O is rounded to bfloat16 (nearest even) once.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attention/attention.hpp"
#include "detail/kokkos_support.hpp"

namespace kstudy::attention {
namespace {

using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

template <attention_precision P>
using storage_t = std::conditional_t<P == attention_precision::fp32, float, std::uint16_t>;

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

// The tiling of one launch: rows per team (block_q), keys per tile (block_k), the odd strides of the
// per-row arrays and the scratch level.
struct tiling {
  int block_q = 64, block_k = 64, level = 0;
  int row_stride = 1, score_stride = 1;
  static int odd(int n) { return n % 2 == 0 ? n + 1 : n; }
  // Floats of team scratch: Q block, O accumulators, K tile, V tile, tile scores, m and l per row.
  KOKKOS_INLINE_FUNCTION std::size_t floats(int dim) const {
    return std::size_t(2) * block_q * row_stride + std::size_t(2) * block_k * dim +
           std::size_t(block_q) * score_stride + std::size_t(2) * block_q;
  }
};

template <class ExecutionSpace>
std::size_t scratch_bytes(const tiling& t, int dim) {
  using scratch_view = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, unmanaged>;
  return scratch_view::shmem_size(t.floats(dim));
}

template <class ExecutionSpace>
tiling choose_tiling(int dim) {
  using policy = Kokkos::TeamPolicy<ExecutionSpace>;
  tiling t;
  const auto settle = [&t, dim] {
    t.row_stride = tiling::odd(dim);
    t.score_stride = tiling::odd(t.block_k);
  };
  settle();
  const auto level0 = static_cast<std::size_t>(policy::scratch_size_max(0));
  while (scratch_bytes<ExecutionSpace>(t, dim) > level0 && (t.block_q > 8 || t.block_k > 8)) {
    if (t.block_k >= t.block_q)
      t.block_k /= 2;
    else
      t.block_q /= 2;
    settle();
  }
  if (scratch_bytes<ExecutionSpace>(t, dim) > level0) {
    t.level = 1;
    if (scratch_bytes<ExecutionSpace>(t, dim) > static_cast<std::size_t>(policy::scratch_size_max(1)))
      throw std::invalid_argument("attention_kokkos_fused: head_dim " + std::to_string(dim) +
                                  " does not fit the team scratch even with 8 x 8 tiles");
  }
  return t;
}

template <class ExecutionSpace, attention_precision P>
struct attention_body {
  using storage = storage_t<P>;
  using device_type = Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>;
  using array_type = Kokkos::View<storage*, device_type>;
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace>;
  using member_type = typename policy_type::member_type;
  using scratch_view = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, unmanaged>;

  array_type q, k, v, o;
  std::int64_t tokens = 0;
  int dim = 0, blocks_per_head = 1;
  tiling tiles;
  float scale = 1.0f;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const int bq = tiles.block_q, bk = tiles.block_k, rs = tiles.row_stride, ss = tiles.score_stride;
    const std::int64_t h = team.league_rank() / blocks_per_head;
    const std::int64_t q0 = std::int64_t(team.league_rank() % blocks_per_head) * bq;
    const int rows = static_cast<int>(tokens - q0 < bq ? tokens - q0 : bq);
    const scratch_view scratch(team.team_scratch(tiles.level), tiles.floats(dim));
    float* const qs = scratch.data();
    float* const os = qs + std::size_t(bq) * rs;
    float* const ks = os + std::size_t(bq) * rs;
    float* const vs = ks + std::size_t(bk) * dim;
    float* const scores = vs + std::size_t(bk) * dim;
    float* const row_max = scores + std::size_t(bq) * ss;
    float* const row_sum = row_max + bq;
    const float minus_infinity = -INFINITY;  // the macro: numeric_limits is host-only in device code

    const std::int64_t q_base = (h * tokens + q0) * dim;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * dim), [&](const int i) {
      const int r = i / dim, d = i % dim;
      qs[r * rs + d] = load_value(q(q_base + i));
      os[r * rs + d] = 0.0f;
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](const int r) {
      row_max[r] = minus_infinity;
      row_sum[r] = 0.0f;
    });
    for (std::int64_t k0 = 0; k0 < tokens; k0 += bk) {
      const int keys = static_cast<int>(tokens - k0 < bk ? tokens - k0 : bk);
      const std::int64_t kv_base = (h * tokens + k0) * dim;
      team.team_barrier();  // the previous tile is consumed (and the Q block staged) before it is overwritten
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, keys * dim), [&](const int i) {
        ks[i] = load_value(k(kv_base + i));
        vs[i] = load_value(v(kv_base + i));
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](const int r) {
        const float* const qr = qs + r * rs;
        float* const orow = os + r * rs;
        float* const sr = scores + r * ss;
        float tile_max = minus_infinity;
        for (int j = 0; j < keys; ++j) {
          const float* const kj = ks + j * dim;
          float dot = 0.0f;
          for (int d = 0; d < dim; ++d) dot += qr[d] * kj[d];
          const float s = dot * scale;
          sr[j] = s;
          tile_max = tile_max > s ? tile_max : s;
        }
        const float m_old = row_max[r], m_new = m_old > tile_max ? m_old : tile_max;
        float l = row_sum[r];
        if (m_new > m_old) {  // rescale what the earlier tiles accumulated (nothing yet on the first)
          const float correction = expf(m_old - m_new);  // 0 while m_old is -inf
          l *= correction;
          for (int d = 0; d < dim; ++d) orow[d] *= correction;
        }
        for (int j = 0; j < keys; ++j) {
          const float p = expf(sr[j] - m_new);
          const float* const vj = vs + j * dim;
          l += p;
          for (int d = 0; d < dim; ++d) orow[d] += p * vj[d];
        }
        row_max[r] = m_new;
        row_sum[r] = l;
      });
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * dim), [&](const int i) {
      const int r = i / dim, d = i % dim;
      store_value(o(q_base + i), os[r * rs + d] / row_sum[r]);
    });
  }
};

template <class ExecutionSpace, attention_precision P>
class attention_kokkos_fused final : public variant {
 public:
  using execution_space = ExecutionSpace;
  using body_type = attention_body<ExecutionSpace, P>;
  using array_type = typename body_type::array_type;
  using policy_type = typename body_type::policy_type;
  using storage = storage_t<P>;
  static constexpr bool on_host = detail::is_host_space_v<ExecutionSpace>;

  attention_kokkos_fused() : m_instance(/*own_stream=*/true), m_space(m_instance.space()) {}
  ~attention_kokkos_fused() override { m_instance.drain(); }  // queued work ends before the buffers are freed
  attention_kokkos_fused(const attention_kokkos_fused&) = delete;
  attention_kokkos_fused& operator=(const attention_kokkos_fused&) = delete;

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = attention_problem(problem, P);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    if (data.tokens() > std::numeric_limits<int>::max() / 2 || data.head_dim() > 65536)
      throw std::invalid_argument("attention_kokkos_fused: tokens or head_dim too large");
    const tiling tiles = choose_tiling<ExecutionSpace>(static_cast<int>(data.head_dim()));
    const std::int64_t blocks = (data.tokens() + tiles.block_q - 1) / tiles.block_q;
    if (data.heads() * blocks > std::numeric_limits<int>::max())
      throw std::invalid_argument("attention_kokkos_fused: more teams than a Kokkos league holds (2^31 - 1)");
    m_elements = data.elements();
    const auto n = static_cast<std::size_t>(m_elements);
    const auto alloc = [](const std::string& label) { return Kokkos::view_alloc(label, Kokkos::WithoutInitializing); };
    m_body.q = array_type(alloc("kstudy::attention::q"), n);
    m_body.k = array_type(alloc("kstudy::attention::k"), n);
    m_body.v = array_type(alloc("kstudy::attention::v"), n);
    m_body.o = array_type(alloc("kstudy::attention::o"), n);
    m_body.tokens = data.tokens();
    m_body.dim = static_cast<int>(data.head_dim());
    m_body.blocks_per_head = static_cast<int>(blocks);
    m_body.tiles = tiles;
    m_body.scale = data.scale();
    m_teams = static_cast<int>(data.heads() * blocks);
    upload(data.streamed_inputs());
  }

  void run() override {
    launch();
    m_space.fence();
  }
  void upload(const std::vector<host_span>& inputs) override {
    enqueue_upload(inputs);
    m_space.fence();
  }
  void download(const std::vector<host_span>& outputs) override {
    enqueue_download(outputs);
    m_space.fence();
  }
  void poison() override {
    if constexpr (P == attention_precision::fp32)
      Kokkos::deep_copy(m_space, m_body.o, std::numeric_limits<float>::quiet_NaN());
    else
      Kokkos::deep_copy(m_space, m_body.o, std::uint16_t(0xffff));  // a NaN pattern
    m_space.fence();
  }

  // Own stream on a device: launches only queue, so an event recorded after enqueue_run() ends with them.
  bool queues_asynchronously() const override { return !on_host; }
  void enqueue_run() override {
    if constexpr (on_host)
      run();
    else
      launch();
  }
  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != 3) throw std::invalid_argument(std::string(operation_name(P)) + ": expected Q, K and V");
    using host_view = Kokkos::View<const storage*, Kokkos::HostSpace, unmanaged>;
    const auto n = static_cast<std::size_t>(m_elements);
    Kokkos::deep_copy(m_space, m_body.q, host_view(inputs[0].as<const storage>(), n));
    Kokkos::deep_copy(m_space, m_body.k, host_view(inputs[1].as<const storage>(), n));
    Kokkos::deep_copy(m_space, m_body.v, host_view(inputs[2].as<const storage>(), n));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    using host_view = Kokkos::View<storage*, Kokkos::HostSpace, unmanaged>;
    Kokkos::deep_copy(m_space, host_view(static_cast<storage*>(o_output(outputs)), static_cast<std::size_t>(m_elements)),
                      m_body.o);
  }
  void wait() override { m_space.fence(); }

  void* stream() const override {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same_v<ExecutionSpace, Kokkos::Cuda>) return static_cast<void*>(m_space.cuda_stream());
#endif
    return nullptr;
  }

  void launch() {
    const int team_size = on_host ? 1 : m_body.tiles.block_q;  // one thread per query row on a device
    const auto bytes = scratch_bytes<ExecutionSpace>(m_body.tiles, m_body.dim);
    const policy_type policy =
        policy_type(m_space, m_teams, team_size).set_scratch_size(m_body.tiles.level, Kokkos::PerTeam(bytes));
    Kokkos::parallel_for("kstudy::attention_kokkos_fused", policy, m_body);
  }

 private:
  detail::space_instance<ExecutionSpace> m_instance;  // before m_space: the stream outlives every copy
  ExecutionSpace m_space;
  body_type m_body;
  std::int64_t m_elements = 0;
  int m_teams = 1;
};

template <class Space, attention_precision P>
void register_precision() {
  // Variant ids are unique per backend across operations, so the bf16 one carries the precision in its name.
  auto info = variant_info_for(
      P, P == attention_precision::fp32 ? "attention_kokkos_fused" : "attention_bf16_kokkos_fused", "attention_kokkos",
      "Kokkos TeamPolicy, one team per (head, block of query rows): K and V tiles staged in team scratch, online "
      "softmax per row (running max and sum, rescaled accumulator); never forms the T x T scores");
  info.rung = 0;
  info.implementation = implementation::kokkos;
  info.fusion = fusion_level::full;
  info.kernels_launched = 1;  // attention_kokkos_fused
  detail::register_kokkos_variant<attention_kokkos_fused<Space, P>>(std::move(info));
}

[[maybe_unused]] const int registered = detail::for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  register_precision<space, attention_precision::fp32>();
  register_precision<space, attention_precision::bf16>();
});

}  // namespace
}  // namespace kstudy::attention
