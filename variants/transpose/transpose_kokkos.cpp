// transpose in Kokkos, for every enabled execution space (the portable versions beside the CUDA ladder):
//  - transpose_kokkos_mdrange: what a Kokkos user writes first: one MDRangePolicy<Rank<2>> over
//    (rows, cols), t(c, r) = x(r, c), Kokkos' default iteration order and tiling (one side of the copy is
//    strided whichever order it picks);
//  - transpose_kokkos_team: the shared-tile transpose in portable code: one team per 32 x 32 tile, the tile
//    staged in team scratch padded to [32][33], read from x along rows (coalesced) and written to t along
//    t's rows (coalesced), the padding keeping the column reads of scratch free of bank conflicts. 256
//    threads per team on a device, 1 on a host (where scratch is ordinary memory);
//  - transpose_kokkos_tile64 (family transpose_kokkos_tuned): the shared-tile transpose as the Kokkos team
//    would tune it, the CUDA ladder's rung 4 in portable code: one team per 64 x 64 tile in team scratch
//    of pitch 65, 8 x 32 threads (team_size 8, vector_length 32: TeamThreadRange x ThreadVectorRange), each
//    moving 16 elements per phase with 16-byte float4_t loads of x where cols % 4 == 0 and stores of t
//    where rows % 4 == 0 (else scalar), every load of a phase issued before the first scratch store; on a
//    host, tiles of its own without scratch (transpose_host_tiles);
//  - transpose_kokkos_mdrange_tiled (same family): the MDRangePolicy<Rank<2>> with explicit tiles, the
//    untiled-memory baseline the shared tile is measured against (see its class).
// x and t are flat views (x(r, c) at r * cols + c, t(c, r) at c * rows + r) on the variant's own instance.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "detail/kokkos_float4.hpp"
#include "kstudy/support/kokkos_arrays.hpp"
#include "kstudy/support/kokkos_support.hpp"
#include "transpose/transpose.hpp"

namespace kstudy::transpose {
namespace {

// The buffers (x in, t out), transfers and poisoning are kokkos_array_variant's; a family implements launch().
template <class ExecutionSpace>
class transpose_kokkos_base : public kokkos_array_variant<ExecutionSpace> {
  using array_base = kokkos_array_variant<ExecutionSpace>;

 public:
  using vector_type = typename array_base::view;
  using device_type = typename vector_type::device_type;
  using array_base::on_host;

  transpose_kokkos_base() { this->bind_operation(operation_name); }

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = transpose_problem(problem);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    m_rows = data.rows();
    m_cols = data.cols();
    array_base::prepare(problem, options);
    m_x = this->input(0);
    m_t = this->output(0);
  }

 protected:
  std::int64_t m_rows = 0, m_cols = 0;
  vector_type m_x, m_t;
};

template <class ExecutionSpace>
class transpose_kokkos_mdrange final : public transpose_kokkos_base<ExecutionSpace> {
 public:
  void launch() override {
    using policy = Kokkos::MDRangePolicy<ExecutionSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
    const std::int64_t rows = this->m_rows, cols = this->m_cols;
    const auto x = this->m_x, t = this->m_t;
    Kokkos::parallel_for(
        "kstudy::transpose_mdrange", policy(this->m_space, {std::int64_t(0), std::int64_t(0)}, {rows, cols}),
        KOKKOS_LAMBDA(const std::int64_t r, const std::int64_t c) { t(c * rows + r) = x(r * cols + c); });
  }
};

constexpr int tile = 32;

template <class ExecutionSpace>
class transpose_kokkos_team final : public transpose_kokkos_base<ExecutionSpace> {
  using base = transpose_kokkos_base<ExecutionSpace>;

 public:
  void launch() override {
    using policy_type = Kokkos::TeamPolicy<ExecutionSpace>;
    using member_type = typename policy_type::member_type;
    using scratch_tile = Kokkos::View<float**, Kokkos::LayoutRight, typename ExecutionSpace::scratch_memory_space,
                                      Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    const std::int64_t rows = this->m_rows, cols = this->m_cols;
    const std::int64_t tile_rows = (rows + tile - 1) / tile, tile_cols = (cols + tile - 1) / tile;
    if (tile_rows * tile_cols > std::numeric_limits<int>::max())
      throw std::invalid_argument("transpose_kokkos_team: more than 2^31 - 1 tiles");
    const int team_size = base::on_host ? 1 : 256;
    const auto policy = policy_type(this->m_space, static_cast<int>(tile_rows * tile_cols), team_size)
                            .set_scratch_size(0, Kokkos::PerTeam(scratch_tile::shmem_size(tile, tile + 1)));
    const auto x = this->m_x, t = this->m_t;
    Kokkos::parallel_for(
        "kstudy::transpose_team", policy, KOKKOS_LAMBDA(const member_type& team) {
          const std::int64_t r0 = std::int64_t(team.league_rank() / tile_cols) * tile;
          const std::int64_t c0 = std::int64_t(team.league_rank() % tile_cols) * tile;
          scratch_tile block(team.team_scratch(0), tile, tile + 1);
          // Consecutive threads take consecutive columns of one row of x.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tile * tile), [&](const int i) {
            const std::int64_t r = r0 + i / tile, c = c0 + i % tile;
            if (r < rows && c < cols) block(i / tile, i % tile) = x(r * cols + c);
          });
          team.team_barrier();
          // Consecutive threads take consecutive columns of one row of t (consecutive rows of x).
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tile * tile), [&](const int i) {
            const std::int64_t c = c0 + i / tile, r = r0 + i % tile;
            if (r < rows && c < cols) t(c * rows + r) = block(i % tile, i / tile);
          });
        });
  }
};

// ---------------------------------------------------------------------------------------------------------
// transpose_kokkos_tuned

using detail::float4_t;

// The MDRange transpose with explicit tiles. On CUDA a Rank<2> tile is the block: dimension 0 (r) runs
// along threadIdx.x, dimension 1 (c) along threadIdx.y, whatever the Iterate order (which only orders the
// tiles). A 32 x 8 tile makes a warp write 32 consecutive floats of one row of t (coalesced) and read one
// float from each of 32 rows of x, the block's 8 warps reading the 8 consecutive floats of each row: one
// 32-byte sector per row, served from L1 after the first warp. On a host, 32 x 32 tiles with the inner
// loop along a row of x (Iterate::Right): 4 KiB of x and of t per tile, inside L1.
template <class ExecutionSpace>
class transpose_kokkos_mdrange_tiled final : public transpose_kokkos_base<ExecutionSpace> {
  using base = transpose_kokkos_base<ExecutionSpace>;

 public:
  void launch() override {
    using policy =
        Kokkos::MDRangePolicy<ExecutionSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>,
                              Kokkos::IndexType<std::int64_t>>;
    const std::int64_t tile_r = 32, tile_c = base::on_host ? 32 : 8;
    const std::int64_t rows = this->m_rows, cols = this->m_cols;
    const auto x = this->m_x, t = this->m_t;
    Kokkos::parallel_for(
        "kstudy::transpose_mdrange_tiled",
        policy(this->m_space, {std::int64_t(0), std::int64_t(0)}, {rows, cols}, {tile_r, tile_c}),
        KOKKOS_LAMBDA(const std::int64_t r, const std::int64_t c) { t(c * rows + r) = x(r * cols + c); });
  }
};

// The 64 x 64 tile (see the top of the file). A phase is 64 / V row groups x 2 halves = 128 / V slabs of 32
// lanes; slab s holds V rows of (32 / V) vectors of V floats, so a warp (one team thread's 32 vector lanes on
// CUDA) loads V rows x 128 bytes, and with the 65-float pitch its scratch accesses, element k of every
// lane's vector at (row, column) = (V (s / 2) + l / (32 / V), V ((s % 2) (32 / V) + l % (32 / V)) + k),
// fall on 32 distinct banks (row + column mod 32 covers 0..31). The store phase is the same over t's rows
// (the tile's columns) with W. Each of the 8 groups takes every 8th slab: 16 / V loads per lane, all in
// flight before the first scratch store.
constexpr int tile64 = 64, tile64_pitch = tile64 + 1, tile64_groups = 8, tile64_lanes = 32;

[[maybe_unused]] KOKKOS_INLINE_FUNCTION float lane_of(const float4_t& v, int k) {
  return k == 0 ? v.x : (k == 1 ? v.y : (k == 2 ? v.z : v.w));
}

template <int V, int W, class ExecutionSpace, class In, class Out, class InQuads, class OutQuads>
void queue_tile64(const ExecutionSpace& space, const In& x, const Out& t, const InQuads& x4, const OutQuads& t4,
                  std::int64_t rows, std::int64_t cols) {
  static_assert((V == 1 || V == 4) && (W == 1 || W == 4), "scalar or float4_t accesses");
  // A device team is 8 x 32 threads; LaunchBounds<256, 4>: at most 64 registers, 4 teams per multiprocessor
  // (66 KiB of the tiles' scratch).
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<tile64_groups * tile64_lanes, 4>>;
  using member_type = typename policy_type::member_type;
  using scratch_tile = Kokkos::View<float**, Kokkos::LayoutRight, typename ExecutionSpace::scratch_memory_space,
                                    Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  constexpr bool host = is_host_space_v<ExecutionSpace>;
  constexpr int load_lanes = tile64_lanes / V, store_lanes = tile64_lanes / W;  // lanes along one tile row
  constexpr int load_slabs = 16 / V, store_slabs = 16 / W;                      // per group and lane
  const std::int64_t tile_rows = (rows + tile64 - 1) / tile64, tile_cols = (cols + tile64 - 1) / tile64;
  if (tile_rows * tile_cols > std::numeric_limits<int>::max())
    throw std::invalid_argument("transpose_kokkos_tile64: more than 2^31 - 1 tiles");
  auto policy = light_weight(
      policy_type(space, static_cast<int>(tile_rows * tile_cols), host ? 1 : tile64_groups, host ? 1 : tile64_lanes));
  policy.set_scratch_size(0, Kokkos::PerTeam(scratch_tile::shmem_size(tile64, tile64_pitch)));
  const std::int64_t cols4 = cols / 4, rows4 = rows / 4;  // quads per row of x (V = 4) and of t (W = 4)
  Kokkos::parallel_for(
      "kstudy::transpose_tile64", policy, KOKKOS_LAMBDA(const member_type& team) {
        (void)x;  // nvcc: an extended lambda may not first capture a variable inside if constexpr
        (void)t;
        (void)x4;
        (void)t4;
        (void)cols4;
        (void)rows4;
        const std::int64_t r0 = (team.league_rank() / tile_cols) * tile64;
        const std::int64_t c0 = (team.league_rank() % tile_cols) * tile64;
        scratch_tile tile(team.team_scratch(0), tile64, tile64_pitch);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tile64_groups), [&](const int g) {
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, tile64_lanes), [&](const int l) {
            float4_t v[load_slabs] = {};
            KSTUDY_FLOAT4_UNROLL
            for (int k = 0; k < load_slabs; ++k) {
              const int s = g + tile64_groups * k;
              const int tr = V * (s / 2) + l / load_lanes, tc = V * ((s % 2) * load_lanes + l % load_lanes);
              const std::int64_t r = r0 + tr, c = c0 + tc;
              if (r < rows && c < cols) {  // V = 4: cols % 4 == 0, so the whole quad is in the row
                if constexpr (V == 4)
                  v[k] = x4(r * cols4 + c / 4);
                else
                  v[k].x = x(r * cols + c);
              }
            }
            KSTUDY_FLOAT4_UNROLL
            for (int k = 0; k < load_slabs; ++k) {
              const int s = g + tile64_groups * k;
              const int tr = V * (s / 2) + l / load_lanes, tc = V * ((s % 2) * load_lanes + l % load_lanes);
              if (r0 + tr < rows && c0 + tc < cols) {
                KSTUDY_FLOAT4_UNROLL
                for (int e = 0; e < V; ++e) tile(tr, tc + e) = lane_of(v[k], e);
              }
            }
          });
        });
        team.team_barrier();
        // Row c of t is column c of the tile: lanes along it read down a column of scratch.
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tile64_groups), [&](const int g) {
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, tile64_lanes), [&](const int l) {
            KSTUDY_FLOAT4_UNROLL
            for (int k = 0; k < store_slabs; ++k) {
              const int s = g + tile64_groups * k;
              const int tc = W * (s / 2) + l / store_lanes, tr = W * ((s % 2) * store_lanes + l % store_lanes);
              const std::int64_t r = r0 + tr, c = c0 + tc;
              if (r < rows && c < cols) {  // W = 4: rows % 4 == 0, so the whole quad is in the row of t
                if constexpr (W == 4)
                  t4(c * rows4 + r / 4) = float4_t{tile(tr, tc), tile(tr + 1, tc), tile(tr + 2, tc), tile(tr + 3, tc)};
                else
                  t(c * rows + r) = tile(tr, tc);
              }
            }
          });
        });
      });
}

// Hosts: no scratch and no team. One index of a RangePolicy per host tile of 64 rows x 256 columns of x,
// t's rows written 256 floats (1 KiB) at a time from a column of the tile; its 64 rows of x (64 KiB) stay in
// the core's L2 while the tile is read down its columns. The tiles of a band of 256 columns follow each
// other down x (a static schedule gives each thread whole bands), so each of the band's 256 rows of t grows
// contiguously, tile after tile, and x is read in 1 KiB runs of 64 rows: streams a hardware prefetcher
// follows. The 64 x 64 tiles taken row band by row band (the device order) write 64 new rows of t every
// tile and reached a quarter of the host read roof; 64 x 256 in this order measured 2x that on a 2-core host.
constexpr std::int64_t host_tile_rows = 64, host_tile_cols = 256;

struct transpose_host_tiles {
  const float* x = nullptr;
  float* t = nullptr;
  std::int64_t rows = 0, cols = 0, row_tiles = 0;

  void operator()(const std::int64_t tile) const {
    const std::int64_t r0 = (tile % row_tiles) * host_tile_rows, c0 = (tile / row_tiles) * host_tile_cols;
    const std::int64_t r1 = r0 + host_tile_rows < rows ? r0 + host_tile_rows : rows;
    const std::int64_t c1 = c0 + host_tile_cols < cols ? c0 + host_tile_cols : cols;
    const float* const __restrict__ in = x;
    float* const __restrict__ out = t;
    for (std::int64_t c = c0; c < c1; ++c) {
#pragma omp simd
      for (std::int64_t r = r0; r < r1; ++r) out[c * rows + r] = in[r * cols + c];
    }
  }
};

template <class ExecutionSpace>
class transpose_kokkos_tile64 final : public transpose_kokkos_base<ExecutionSpace> {
  using base = transpose_kokkos_base<ExecutionSpace>;
  using device_type = typename base::device_type;
  using const_vector = Kokkos::View<const float*, device_type>;

 public:
  // Quad views where the rows of x (of t) are whole quads and the data 16-byte aligned.
  void prepare(const problem_data& problem, const run_options& options) override {
    base::prepare(problem, options);
    const std::int64_t elements = this->m_rows * this->m_cols;
    m_load4 = this->m_cols % 4 == 0 && detail::quad_aligned(this->m_x);
    m_store4 = this->m_rows % 4 == 0 && detail::quad_aligned(this->m_t);
    m_x4 = detail::quads_of(const_vector(this->m_x), m_load4 ? elements / 4 : 0);
    m_t4 = detail::quads_of(this->m_t, m_store4 ? elements / 4 : 0);
  }

  void launch() override {
    if constexpr (base::on_host) {
      const std::int64_t row_tiles = (this->m_rows + host_tile_rows - 1) / host_tile_rows;
      const std::int64_t col_tiles = (this->m_cols + host_tile_cols - 1) / host_tile_cols;
      Kokkos::parallel_for(
          "kstudy::transpose_tile64_host",
          Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(this->m_space, 0, row_tiles * col_tiles),
          transpose_host_tiles{this->m_x.data(), this->m_t.data(), this->m_rows, this->m_cols, row_tiles});
    } else if (m_load4 && m_store4) {
      queue<4, 4>();
    } else if (m_load4) {
      queue<4, 1>();
    } else if (m_store4) {
      queue<1, 4>();
    } else {
      queue<1, 1>();
    }
  }

 private:
  template <int V, int W>
  void queue() {
    queue_tile64<V, W>(this->m_space, const_vector(this->m_x), this->m_t, m_x4, m_t4, this->m_rows, this->m_cols);
  }

  bool m_load4 = false, m_store4 = false;
  Kokkos::View<const float4_t*, device_type, detail::quad_traits> m_x4;
  Kokkos::View<float4_t*, device_type, detail::quad_traits> m_t4;
};

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  auto mdrange = variant_info_for("kokkos_mdrange", "transpose_kokkos_mdrange",
                                  "Kokkos MDRangePolicy<Rank<2>> over (rows, cols), t(c, r) = x(r, c), default "
                                  "iteration order and tiling");
  mdrange.kernels_launched = 1;  // the parallel_for
  register_kokkos_variant<transpose_kokkos_mdrange<space>>(std::move(mdrange));
  auto team = variant_info_for("kokkos_team", "transpose_kokkos_team",
                               "Kokkos TeamPolicy, one team per 32 x 32 tile staged in team scratch padded to "
                               "[32][33] (256 threads per team on a device, 1 on a host)");
  team.kernels_launched = 1;  // the parallel_for
  register_kokkos_variant<transpose_kokkos_team<space>>(std::move(team));
  // rung 0, as every portable variant: the reports take rung > 0 for the handwritten CUDA ladder, and count
  // only rung 0 Kokkos variants as the portable side of the comparison.
  auto tile64 = variant_info_for("kokkos_tile64", "transpose_kokkos_tuned",
                                 "Kokkos TeamPolicy<LaunchBounds<256, 4>> (HintLightWeight), one team per 64 x 64 "
                                 "tile in team scratch of pitch 65 (set_scratch_size PerTeam), 8 x 32 threads by "
                                 "TeamThreadRange x ThreadVectorRange, 16 elements per thread per "
                                 "phase, float4_t loads where cols % 4 == 0 and stores where rows % 4 == 0 through "
                                 "unmanaged Restrict Views, team_barrier between the phases; on a host a "
                                 "RangePolicy over 64 x 256 tiles taken down each band of columns, no scratch");
  tile64.rung = 1;              // the portable ladder: transpose_kokkos_team / _mdrange (0) are the first attempt
  tile64.kernels_launched = 1;  // the parallel_for
  register_kokkos_variant<transpose_kokkos_tile64<space>>(std::move(tile64));
  auto tiled = variant_info_for("kokkos_mdrange_tiled", "transpose_kokkos_tuned",
                                "Kokkos MDRangePolicy<Rank<2>> over (rows, cols) with explicit 32 x 8 tiles on a "
                                "device (a warp writes 32 consecutive floats of t, the block reads whole sectors "
                                "of x), 32 x 32 on a host; no scratch");
  tiled.rung = 1;
  tiled.kernels_launched = 1;  // the parallel_for
  register_kokkos_variant<transpose_kokkos_mdrange_tiled<space>>(std::move(tiled));
});

}  // namespace
}  // namespace kstudy::transpose
