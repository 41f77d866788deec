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
#include "kstudy/support/kokkos_support.hpp"

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
        accumulate_tile(sr, tile_max, vs, keys, dim, orow, row_max[r], row_sum[r]);
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
class attention_kokkos_fused final : public detail::kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = detail::kokkos_queued_variant<ExecutionSpace>;

 public:
  using body_type = attention_body<ExecutionSpace, P>;
  using array_type = typename body_type::array_type;
  using policy_type = typename body_type::policy_type;
  using storage = storage_t<P>;
  using kokkos_base::on_host;

  attention_kokkos_fused() : kokkos_base(/*own_stream=*/true) {}
  ~attention_kokkos_fused() override { m_instance.drain(); }  // queued work ends before the buffers are freed

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
    this->upload(data.streamed_inputs());
  }

  void poison() override {
    if constexpr (P == attention_precision::fp32)
      Kokkos::deep_copy(m_space, m_body.o, std::numeric_limits<float>::quiet_NaN());
    else
      Kokkos::deep_copy(m_space, m_body.o, std::uint16_t(0xffff));  // a NaN pattern
    m_space.fence();
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
    Kokkos::deep_copy(
        m_space, host_view(static_cast<storage*>(o_output(outputs)), static_cast<std::size_t>(m_elements)), m_body.o);
  }
  void launch() override {
    const int team_size = on_host ? 1 : m_body.tiles.block_q;  // one thread per query row on a device
    const auto bytes = scratch_bytes<ExecutionSpace>(m_body.tiles, m_body.dim);
    const policy_type policy =
        policy_type(m_space, m_teams, team_size).set_scratch_size(m_body.tiles.level, Kokkos::PerTeam(bytes));
    Kokkos::parallel_for("kstudy::attention_kokkos_fused", policy, m_body);
  }

 private:
  using kokkos_base::m_instance;
  using kokkos_base::m_space;
  body_type m_body;
  std::int64_t m_elements = 0;
  int m_teams = 1;
};

// ---------------------------------------------------------------------------------------------------------
// attention_kokkos_tiled: the CUDA fused kernel's register tiling (attention_fused_f32) in portable Kokkos.
//
// Device (team of 128 threads per (head, 64 query rows)). Team scratch holds the Q block (64 x DMAX), one
// K/V tile of 32 keys (32 x DMAX each), P (64 x 32, over the K tile once the scores are done) and the
// per-row partials of the 8 threads sharing a row (64 x 8). Rows are padded to DMAX + 4 floats (P: 32 + 8),
// so consecutive rows start 4 (8) banks apart and the quad reads of a warp below are conflict-free. Thread
// t (warp w = t / 32, lane = 8 rg + cg) owns query rows w 16 + rg + 4 i (i < 4), keys cg + 8 j (j < 4) of a
// tile's 64 x 32 scores and output columns 32 dd + 4 cg + e (dd < DMAX / 32, e < 4): a 4 x 4 block of S and
// a 4 x 8 (DMAX 64) or 4 x 16 (DMAX 128) block of O in registers. S: per 4 of head_dim, 4 Q quads and 4 K
// quads for 64 FMAs; O += P V: per 4 keys, 4 P quads and 4 DMAX / 32 V quads for 16 DMAX / 8 FMAs. Quads
// are float4 loads on CUDA (the scratch is realigned to 16 bytes), 4 scalar loads elsewhere. The row maxima
// go through the partials array (one barrier per tile: no portable warp shuffle in Kokkos 3.4); the row sums
// stay per thread (every thread of a row rescales by the same max) and are combined once at the end.
// Kokkos 3.4 caps level-0 team scratch at 40 KiB on CUDA (4.6: 48 KiB less 8 KiB for team reductions):
// DMAX 64 takes 38.4 KB of level 0; DMAX 128 keeps K, V, P and the partials (35.9 KB) in level 0 and the
// Q block in level 1 (global memory through L1). Why 32-key tiles: Q + 64-key K and V tiles (52 KB) do not
// fit 40 KiB. head_dim <= 64 runs the DMAX 64 kernel, up to 128 the DMAX 128 one (Q, K and V zero-padded
// beyond head_dim in scratch, keys beyond tokens masked to -inf, rows beyond tokens not stored).
// Expected on the H200 at 16 x 16384 x 64 (fp32 and bf16 alike: the inputs are widened on the load):
// ~25 TFLOP/s (70-80% of attention_fused's 33.3: the same 12-quads-per-128-FMA O loop, an S loop with
// 8 quads per 64 FMAs, twice the barriers and softmax work per FMA with 32-key tiles, 4 teams of 4 warps
// per SM at <= 128 registers).
//
// Host (a team is one thread and 64 query rows; one scratch level holds Q, O accumulators, a 64-key K tile
// transposed, the V tile and a score row): the score row is 64 independent sums updated along the
// transposed K tile and O += p V runs along head_dim, both contiguous inner loops the compiler vectorises.

#if defined(__CUDA_ARCH__)  // the device pass only: the host compiler warns on an unknown pragma
#define KSTUDY_ATTENTION_UNROLL _Pragma("unroll")
#define KSTUDY_ATTENTION_UNROLL_2 _Pragma("unroll 2")
#define KSTUDY_ATTENTION_UNROLL_4 _Pragma("unroll 4")
#else
#define KSTUDY_ATTENTION_UNROLL
#define KSTUDY_ATTENTION_UNROLL_2
#define KSTUDY_ATTENTION_UNROLL_4
#endif

constexpr int tiled_rows = 64;      // query rows per team
constexpr int tiled_threads = 128;  // threads per team on a device
constexpr int tiled_max_head_dim = 128;
constexpr int tiled_host_keys = 64;  // keys per tile on a host

template <int DMAX>
struct device_tiles {
  static_assert(DMAX % 32 == 0 && DMAX <= tiled_max_head_dim, "DMAX: a multiple of 32 up to 128");
  static constexpr int keys = 32;           // per K/V tile
  static constexpr int pitch = DMAX + 4;    // Q, K, V rows
  static constexpr int p_pitch = keys + 8;  // P rows
  static constexpr int dq = DMAX / 32;      // quads of O columns per thread
  static constexpr int q_floats = tiled_rows * pitch;
  static constexpr int kp_floats = keys * pitch > tiled_rows* p_pitch ? keys* pitch : tiled_rows* p_pitch;
  static constexpr int v_floats = keys * pitch;
  static constexpr int part_floats = tiled_rows * 8;  // per row, one partial per thread of the row
  static constexpr int q_level = DMAX <= 64 ? 0 : 1;
  static constexpr int align_floats = 4;  // slack to realign a scratch level to 16 bytes
  KOKKOS_INLINE_FUNCTION static constexpr std::size_t level_floats(int level) {
    return level == 0 ? std::size_t((q_level == 0 ? q_floats : 0) + kp_floats + v_floats + part_floats + align_floats)
                      : std::size_t(q_level == 1 ? q_floats + align_floats : 0);
  }
};
static_assert(tiled_threads == 2 * tiled_rows && device_tiles<64>::keys * tiled_rows == 16 * tiled_threads,
              "the thread mapping: 8 threads per row group of 4 rows, 4 x 4 scores per thread");

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

template <class ExecutionSpace>
using scratch_floats = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, unmanaged>;

// The device kernel (see above) for head_dim <= DMAX.
template <class ExecutionSpace, attention_precision P, int DMAX>
struct tiled_device_body {
  using tiles = device_tiles<DMAX>;
  using storage = storage_t<P>;
  using device_type = Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>;
  using array_type = Kokkos::View<storage*, device_type>;
  // Teams of 128 threads, 4 per SM for DMAX 64 (at most 128 registers a thread), 3 for DMAX 128 (168; capped
  // for four it spilled 244 bytes). sm_90, nvcc 13: 128 / 168 registers, 40-56 bytes of spills either way
  // (long-lived 64-bit scratch pointers: Kokkos hands scratch out as generic pointers).
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<tiled_threads, DMAX <= 64 ? 4 : 3>>;
  using member_type = typename policy_type::member_type;

  array_type q, k, v, o;
  std::int64_t tokens = 0;
  int dim = 0, blocks_per_head = 1;
  float scale = 1.0f;

  // Rows [row0, row0 + count) of a head's tokens x dim matrix into a tile of pitch tiles::pitch, zero beyond
  // tokens and dim; consecutive threads load consecutive quads of a row (coalesced).
  KOKKOS_INLINE_FUNCTION void load_tile(float* tile, int count, const storage* src, std::int64_t row0, int rank,
                                        bool vector) const {
    constexpr int chunks = DMAX / 4;
    // Two quads in flight per thread, as in attention_fused_f32: unrolled further the loads hold registers
    // the accumulators need.
    KSTUDY_ATTENTION_UNROLL_2
    for (int f = rank; f < count * chunks; f += tiled_threads) {
      const int r = f / chunks, c = (f % chunks) * 4;
      const std::int64_t t = row0 + r;
      quad x = {0.0f, 0.0f, 0.0f, 0.0f};
      if (t < tokens && c < dim) {
        const storage* p = src + t * dim + c;
        if (vector) {
          x = load_input_quad(p);
        } else {
          x.x = load_value(p[0]);
          if (c + 1 < dim) x.y = load_value(p[1]);
          if (c + 2 < dim) x.z = load_value(p[2]);
          if (c + 3 < dim) x.w = load_value(p[3]);
        }
      }
      store_quad(tile + r * tiles::pitch + c, x);
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    constexpr int pitch = tiles::pitch, p_pitch = tiles::p_pitch, dq = tiles::dq, keys = tiles::keys;
    const scratch_floats<ExecutionSpace> level0(team.team_scratch(0), tiles::level_floats(0));
    float* const base0 = align16(level0.data());
    float* qs = base0;
    float* ks = base0;
    if constexpr (tiles::q_level == 1) {
      const scratch_floats<ExecutionSpace> level1(team.team_scratch(1), tiles::level_floats(1));
      qs = align16(level1.data());
    } else {
      ks = base0 + tiles::q_floats;
    }
    float* const ps = ks;  // P replaces the K tile once the scores are computed
    float* const vs = ks + tiles::kp_floats;
    float* const part = vs + tiles::v_floats;

    const int rank = team.team_rank();
    const int warp = rank >> 5, lane = rank & 31, rg = lane >> 3, cg = lane & 7;
    const int r_first = warp * 16 + rg;  // this thread's rows: r_first + 4 i
    const std::int64_t head = team.league_rank() / blocks_per_head;
    const std::int64_t row0 = std::int64_t(team.league_rank() % blocks_per_head) * tiled_rows;
    const std::int64_t head_base = head * tokens * dim;
    const bool vector = dim % 4 == 0;  // every row starts 4-element aligned
    const float minus_infinity = -INFINITY;

    load_tile(qs, tiled_rows, q.data() + head_base, row0, rank, vector);

    float acc[4][dq][4];
    float m[4], l[4];
    KSTUDY_ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i) {
      m[i] = minus_infinity;
      l[i] = 0.0f;
      KSTUDY_ATTENTION_UNROLL
      for (int c = 0; c < dq; ++c) {
        KSTUDY_ATTENTION_UNROLL
        for (int e = 0; e < 4; ++e) acc[i][c][e] = 0.0f;
      }
    }

    for (std::int64_t key0 = 0; key0 < tokens; key0 += keys) {
      team.team_barrier();  // the previous tile's O += P V is done with P (over K) and V
      load_tile(ks, keys, k.data() + head_base, key0, rank, vector);
      load_tile(vs, keys, v.data() + head_base, key0, rank, vector);
      team.team_barrier();  // (and the Q block on the first pass)

      float s[4][4];
      KSTUDY_ATTENTION_UNROLL
      for (int i = 0; i < 4; ++i) {
        KSTUDY_ATTENTION_UNROLL
        for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
      }
      // Unrolled by 4 (of DMAX / 4): fully unrolled, the hoisted Q and K loads spill.
      KSTUDY_ATTENTION_UNROLL_4
      for (int d = 0; d < DMAX; d += 4) {
        quad qv[4];
        KSTUDY_ATTENTION_UNROLL
        for (int i = 0; i < 4; ++i) qv[i] = load_quad(qs + (r_first + 4 * i) * pitch + d);
        KSTUDY_ATTENTION_UNROLL
        for (int j = 0; j < 4; ++j) {
          const quad kv = load_quad(ks + (cg + 8 * j) * pitch + d);
          KSTUDY_ATTENTION_UNROLL
          for (int i = 0; i < 4; ++i) {
            s[i][j] += qv[i].x * kv.x;
            s[i][j] += qv[i].y * kv.y;
            s[i][j] += qv[i].z * kv.z;
            s[i][j] += qv[i].w * kv.w;
          }
        }
      }

      // This thread's maxima of its rows, to the partials; keys beyond tokens are masked.
      const bool edge = key0 + keys > tokens;
      KSTUDY_ATTENTION_UNROLL
      for (int i = 0; i < 4; ++i) {
        float tile_max = minus_infinity;
        KSTUDY_ATTENTION_UNROLL
        for (int j = 0; j < 4; ++j) {
          float x = s[i][j] * scale;
          if (edge && key0 + cg + 8 * j >= tokens) x = minus_infinity;
          s[i][j] = x;
          tile_max = fmaxf(tile_max, x);
        }
        part[(r_first + 4 * i) * 8 + cg] = tile_max;
      }
      team.team_barrier();  // the partials are complete and every thread is done reading K: P may replace it

      KSTUDY_ATTENTION_UNROLL
      for (int i = 0; i < 4; ++i) {
        const float* const pr = part + (r_first + 4 * i) * 8;
        const quad a = load_quad(pr), b = load_quad(pr + 4);
        const float tile_max = fmaxf(fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)), fmaxf(fmaxf(b.x, b.y), fmaxf(b.z, b.w)));
        // Key key0 < tokens is in every tile, so m_new is finite; on the first tile m[i] = -inf, alpha = 0.
        const float m_new = fmaxf(m[i], tile_max);
        const float alpha = expf(m[i] - m_new);
        float sum = 0.0f;
        KSTUDY_ATTENTION_UNROLL
        for (int j = 0; j < 4; ++j) {
          const float p = expf(s[i][j] - m_new);  // 0 for the masked keys
          ps[(r_first + 4 * i) * p_pitch + cg + 8 * j] = p;
          sum += p;
        }
        l[i] = l[i] * alpha + sum;  // this thread's keys only: combined with the row's other 7 at the end
        m[i] = m_new;
        KSTUDY_ATTENTION_UNROLL
        for (int c = 0; c < dq; ++c) {
          KSTUDY_ATTENTION_UNROLL
          for (int e = 0; e < 4; ++e) acc[i][c][e] *= alpha;
        }
      }
      team.team_barrier();  // P is complete

      // Unrolled by 4 (of 8): fully unrolled, the hoisted P and V loads spill.
      KSTUDY_ATTENTION_UNROLL_4
      for (int c = 0; c < keys; c += 4) {
        quad pv[4];
        KSTUDY_ATTENTION_UNROLL
        for (int i = 0; i < 4; ++i) pv[i] = load_quad(ps + (r_first + 4 * i) * p_pitch + c);
        KSTUDY_ATTENTION_UNROLL
        for (int cc = 0; cc < 4; ++cc) {
          KSTUDY_ATTENTION_UNROLL
          for (int dd = 0; dd < dq; ++dd) {
            const quad vv = load_quad(vs + (c + cc) * pitch + 32 * dd + 4 * cg);
            KSTUDY_ATTENTION_UNROLL
            for (int i = 0; i < 4; ++i) {
              const float p = cc == 0 ? pv[i].x : cc == 1 ? pv[i].y : cc == 2 ? pv[i].z : pv[i].w;
              acc[i][dd][0] += p * vv.x;
              acc[i][dd][1] += p * vv.y;
              acc[i][dd][2] += p * vv.z;
              acc[i][dd][3] += p * vv.w;
            }
          }
        }
      }
    }

    // Row sums: every thread read the last maxima before the last barrier, so the partials are free.
    KSTUDY_ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i) part[(r_first + 4 * i) * 8 + cg] = l[i];
    team.team_barrier();
    KSTUDY_ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i) {
      const std::int64_t t = row0 + r_first + 4 * i;
      if (t >= tokens) continue;
      const float* const pr = part + (r_first + 4 * i) * 8;
      const quad a = load_quad(pr), b = load_quad(pr + 4);
      const float inv = 1.0f / (((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w)));
      storage* const orow = o.data() + head_base + t * dim;
      KSTUDY_ATTENTION_UNROLL
      for (int dd = 0; dd < dq; ++dd) {
        KSTUDY_ATTENTION_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int d = 32 * dd + 4 * cg + e;
          if (d < dim) store_value(orow[d], acc[i][dd][e] * inv);
        }
      }
    }
  }
};

// The host kernel: one thread per team and 64 query rows, any head_dim.
template <class ExecutionSpace, attention_precision P>
struct tiled_host_body {
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
    return std::size_t(4) * tiled_rows * dim + tiled_host_keys + 2 * tiled_rows;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const scratch_floats<ExecutionSpace> scratch(team.team_scratch(level), floats(dim));
    float* const qs = scratch.data();
    float* const os = qs + std::size_t(tiled_rows) * dim;
    float* const kt = os + std::size_t(tiled_rows) * dim;
    float* const vs = kt + std::size_t(tiled_host_keys) * dim;
    float* const sr = vs + std::size_t(tiled_host_keys) * dim;
    float* const row_max = sr + tiled_host_keys;
    float* const row_sum = row_max + tiled_rows;
    const std::int64_t head = team.league_rank() / blocks_per_head;
    const std::int64_t row0 = std::int64_t(team.league_rank() % blocks_per_head) * tiled_rows;
    const int rows = static_cast<int>(tokens - row0 < tiled_rows ? tokens - row0 : tiled_rows);
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
    for (std::int64_t key0 = 0; key0 < tokens; key0 += tiled_host_keys) {
      const int keys = static_cast<int>(tokens - key0 < tiled_host_keys ? tokens - key0 : tiled_host_keys);
      const storage* const kg = k.data() + head_base + key0 * dim;
      const storage* const vg = v.data() + head_base + key0 * dim;
      for (int j = 0; j < keys; ++j)
        for (int d = 0; d < dim; ++d) {
          kt[d * tiled_host_keys + j] = load_value(kg[j * dim + d]);
          vs[j * dim + d] = load_value(vg[j * dim + d]);
        }
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < keys; ++j) sr[j] = 0.0f;
        for (int d = 0; d < dim; ++d) {
          const float qd = qs[r * dim + d];
          const float* const kd = kt + d * tiled_host_keys;
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

template <class ExecutionSpace, attention_precision P>
class attention_kokkos_tiled final : public detail::kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = detail::kokkos_queued_variant<ExecutionSpace>;

 public:
  using storage = storage_t<P>;
  using array_type = typename tiled_host_body<ExecutionSpace, P>::array_type;
  using kokkos_base::on_host;

  attention_kokkos_tiled() : kokkos_base(/*own_stream=*/true) {}
  ~attention_kokkos_tiled() override { m_instance.drain(); }  // queued work ends before the buffers are freed

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = attention_problem(problem, P);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    if (data.tokens() > std::numeric_limits<int>::max() / 2)
      throw std::invalid_argument("attention_kokkos_tiled: tokens beyond 2^30");
    const std::int64_t blocks = (data.tokens() + tiled_rows - 1) / tiled_rows;
    if (data.heads() * blocks > std::numeric_limits<int>::max())
      throw std::invalid_argument("attention_kokkos_tiled: more teams than a Kokkos league holds (2^31 - 1)");
    m_dim = static_cast<int>(data.head_dim());
    if constexpr (on_host) {
      if (data.head_dim() > 65536) throw std::invalid_argument("attention_kokkos_tiled: head_dim beyond 65536");
      m_host_bytes = scratch_floats<ExecutionSpace>::shmem_size(tiled_host_body<ExecutionSpace, P>::floats(m_dim));
      using policy = typename tiled_host_body<ExecutionSpace, P>::policy_type;
      m_level = m_host_bytes <= static_cast<std::size_t>(policy::scratch_size_max(0)) ? 0 : 1;
      if (m_host_bytes > static_cast<std::size_t>(policy::scratch_size_max(m_level)))
        throw std::invalid_argument("attention_kokkos_tiled: head_dim too large for the team scratch");
    } else {
      if (data.head_dim() > tiled_max_head_dim)
        throw std::invalid_argument("attention_kokkos_tiled: head_dim beyond " + std::to_string(tiled_max_head_dim));
      m_dmax = m_dim <= 64 ? 64 : 128;
      if (m_dmax == 64)
        check_device_scratch<64>();
      else
        check_device_scratch<128>();
    }
    m_elements = data.elements();
    const auto n = static_cast<std::size_t>(m_elements);
    const auto alloc = [](const std::string& label) { return Kokkos::view_alloc(label, Kokkos::WithoutInitializing); };
    m_q = array_type(alloc("kstudy::attention::q"), n);
    m_k = array_type(alloc("kstudy::attention::k"), n);
    m_v = array_type(alloc("kstudy::attention::v"), n);
    m_o = array_type(alloc("kstudy::attention::o"), n);
    m_tokens = data.tokens();
    m_blocks_per_head = static_cast<int>(blocks);
    m_scale = data.scale();
    m_teams = static_cast<int>(data.heads() * blocks);
    this->upload(data.streamed_inputs());
  }

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
  void launch() override {
    if constexpr (on_host) {
      using body_type = tiled_host_body<ExecutionSpace, P>;
      body_type body;
      fill(body);
      body.level = m_level;
      typename body_type::policy_type policy(m_space, m_teams, 1);
      policy = policy.set_scratch_size(m_level, Kokkos::PerTeam(m_host_bytes));
      Kokkos::parallel_for("kstudy::attention_kokkos_tiled", policy, body);
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
    body.q = m_q;
    body.k = m_k;
    body.v = m_v;
    body.o = m_o;
    body.tokens = m_tokens;
    body.dim = m_dim;
    body.blocks_per_head = m_blocks_per_head;
    body.scale = m_scale;
  }
  template <int DMAX>
  static std::size_t device_bytes(int level) {
    return scratch_floats<ExecutionSpace>::shmem_size(device_tiles<DMAX>::level_floats(level));
  }
  template <int DMAX>
  static void check_device_scratch() {
    using policy = typename tiled_device_body<ExecutionSpace, P, DMAX>::policy_type;
    for (int level = 0; level < 2; ++level)
      if (device_bytes<DMAX>(level) > static_cast<std::size_t>(policy::scratch_size_max(level)))
        throw std::invalid_argument("attention_kokkos_tiled: the DMAX " + std::to_string(DMAX) + " tiles need " +
                                    std::to_string(device_bytes<DMAX>(level)) + " bytes of level-" +
                                    std::to_string(level) + " team scratch; this Kokkos offers " +
                                    std::to_string(policy::scratch_size_max(level)));
  }
  template <int DMAX>
  void launch_device() {
    using body_type = tiled_device_body<ExecutionSpace, P, DMAX>;
    body_type body;
    fill(body);
    typename body_type::policy_type policy(m_space, m_teams, tiled_threads);
    policy = policy.set_scratch_size(0, Kokkos::PerTeam(device_bytes<DMAX>(0)));
    if constexpr (device_tiles<DMAX>::q_level == 1)
      policy = policy.set_scratch_size(1, Kokkos::PerTeam(device_bytes<DMAX>(1)));
    Kokkos::parallel_for("kstudy::attention_kokkos_tiled", policy, body);
  }

  using kokkos_base::m_instance;
  using kokkos_base::m_space;
  array_type m_q, m_k, m_v, m_o;
  std::int64_t m_elements = 0, m_tokens = 0;
  std::size_t m_host_bytes = 0;
  int m_dim = 0, m_dmax = 64, m_level = 0, m_blocks_per_head = 1, m_teams = 1;
  float m_scale = 1.0f;
};

template <class Space, attention_precision P>
void register_precision() {
  constexpr bool fp32 = P == attention_precision::fp32;
  // Variant ids are unique per backend across operations, so the bf16 one carries the precision in its name.
  auto info = variant_info_for(
      P, fp32 ? "attention_kokkos_fused" : "attention_bf16_kokkos_fused", "attention_kokkos",
      "Kokkos TeamPolicy, one team per (head, block of query rows): K and V tiles staged in team scratch, online "
      "softmax per row (running max and sum, rescaled accumulator); never forms the T x T scores");
  info.rung = 0;
  info.implementation = implementation::kokkos;
  info.fusion = fusion_level::full;
  info.kernels_launched = 1;  // attention_kokkos_fused
  detail::register_kokkos_variant<attention_kokkos_fused<Space, P>>(std::move(info));

  const bool host = detail::is_host_space_v<Space>;
  auto tiled = variant_info_for(
      P, fp32 ? "attention_kokkos_tiled" : "attention_bf16_kokkos_tiled", "attention_kokkos",
      std::string("Kokkos TeamPolicy, one team per (head, 64 query rows), online softmax: ") +
          (host ? "one thread per team, 64-key K tiles transposed in team scratch, vectorised score rows and "
                  "O += p V"
                : "128 threads, Q block and 32-key K/V tiles in padded team scratch, 4 x 4 register tiles of S "
                  "and 4 x 8 (head_dim <= 64) or 4 x 16 of O per thread, quad scratch reads") +
          (fp32 ? "" : "; bf16 widened on the load, O rounded once"));
  tiled.rung = 0;
  tiled.implementation = implementation::kokkos;
  tiled.fusion = fusion_level::full;
  tiled.kernels_launched = 1;  // attention_kokkos_tiled
  detail::register_kokkos_variant<attention_kokkos_tiled<Space, P>>(std::move(tiled));
}

[[maybe_unused]] const int registered = detail::for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  register_precision<space, attention_precision::fp32>();
  register_precision<space, attention_precision::bf16>();
});

}  // namespace
}  // namespace kstudy::attention
