// fused_kokkos: the whole operation in one Kokkos kernel (one pass over x, no intermediates), for
// every layout and every enabled execution space.
//
// Device mappings:
//  - feature-major (LayoutLeft): one row per thread; at each feature step a warp reads 32 adjacent
//    rows, so every load is coalesced. Features are loaded eight at a time into registers first, so
//    each thread keeps eight independent loads in flight.
//  - row-major (LayoutRight): one thread per row would make a warp's loads stride by the row width
//    (the seed's slow case). Instead a team copies a contiguous tile of whole rows into scratch with
//    flat, coalesced loads (each lane issues its loads before storing any, so they overlap), then
//    team threads reduce one row each with their vector lanes over the features.
//  - padded row-major (LayoutStride): one row per thread, like the seed's padded-stride control.
// Host spaces: rows are split among threads; a feature-major table is walked feature-outer over
// blocks of rows so the inner loop streams contiguous memory.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "detail/fused_kokkos_info.hpp"
#include "detail/scoring_kokkos_variant.hpp"

namespace kstudy {
namespace {

using detail::clamp_nan_through;
using detail::fused_info;  // rung 0 of the family (variant_info::rung's default)
using detail::write_row;

// Rows per block on host spaces for the feature-major walk.
constexpr int host_row_block = 256;
// Device row-major tile: at most this many loads per thread, all issued before any store to scratch.
constexpr int max_loads = 16;
// Device one-row-per-thread kernels (feature-major, padded): 256-thread teams (these variants take no
// block size), built to 64 registers, so four teams share an SM. Built to 48 registers for five (62.5%
// occupancy, as the CUDA kernel) they ran slower on the H200: 327.7 against 318.2 us at 16M x 16.
constexpr int feature_major_team = 256;
constexpr int feature_major_min_teams = 4;
constexpr int feature_major_threads_per_sm = feature_major_team * feature_major_min_teams;

// Width consecutive values moved as one aligned load (16 bytes for four floats).
template <class Value, int Width>
struct alignas(Width * sizeof(Value)) chunk {
  Value v[Width];
};

// score of row r, reading its features eight at a time so each thread has independent loads in flight.
template <class Layout, class MemorySpace, class Value>
KOKKOS_INLINE_FUNCTION Value row_score(const detail::scoring_kernel_args<Layout, MemorySpace, Value>& args,
                                       std::int64_t r, std::int64_t features) {
  Value sum = 0;
  std::int64_t f = 0;
  for (; f + 8 <= features; f += 8) {
    Value v[8];
    for (int k = 0; k < 8; ++k) v[k] = args.x(r, f + k);
    for (int k = 0; k < 8; ++k)
      sum += clamp_nan_through((v[k] - args.mean(f + k)) * args.inv_std(f + k), args.clip) * args.weight(f + k);
  }
  for (; f < features; ++f) sum += args.term(r, f);
  return sum;
}

template <class ExecutionSpace, class Layout, class Value = float>
class fused_kokkos final : public detail::pipelined_scoring_kokkos_variant<ExecutionSpace, Layout, Value> {
  static constexpr bool on_host = is_host_space_v<ExecutionSpace>;

 public:
  // Queues the kernel; its flagged count lands in m_count_host.
  void launch() override {
    if constexpr (on_host) {
      if constexpr (std::is_same_v<Layout, Kokkos::LayoutLeft>)
        run_host_feature_major();
      else
        run_row_per_thread("kstudy::fused_kokkos<row_major,host>");
    } else if constexpr (std::is_same_v<Layout, Kokkos::LayoutRight>) {
      run_device_row_major_tiled();
    } else if constexpr (std::is_same_v<Layout, Kokkos::LayoutLeft>) {
      // Four rows per thread where every column starts on 16 bytes and there are quads enough for every
      // resident thread (else, as at 262,144 x 256, a quarter of the GPU idles); one row per thread otherwise.
      const std::int64_t resident_threads =
          guaranteed_resident_teams(this->m_space, feature_major_team, feature_major_threads_per_sm) *
          feature_major_team;
      if (this->m_shape.rows % 4 == 0 && this->m_x.stride(1) % 4 == 0 && this->m_shape.rows / 4 >= resident_threads)
        run_device_feature_major_quads();
      else
        run_device_row_per_thread("kstudy::fused_kokkos<feature_major>");
    } else {
      run_device_row_per_thread("kstudy::fused_kokkos<padded_row_major>");
    }
  }

  // Device, feature-major, four adjacent rows per thread: every load is 16 bytes wide (four rows of one
  // feature), eight features of them in flight per thread, and the four scores and flags are stored as
  // one 16-byte and one 4-byte store. Same resident wave of striding teams as the row-per-thread kernel.
  void run_device_feature_major_quads() {
    using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<1024, 1>>;
    using member_type = typename policy_type::member_type;
    using quad = chunk<Value, 4>;
    using flag_quad = chunk<std::uint8_t, 4>;
    const Value* x = this->m_x.data();
    const std::int64_t column = this->m_x.stride(1);
    const auto mean = this->m_vectors.mean, inv_std = this->m_vectors.inv_std, weight = this->m_vectors.weight;
    quad* score = reinterpret_cast<quad*>(this->m_score.data());
    flag_quad* flag = reinterpret_cast<flag_quad*>(this->m_flag.data());
    const Value clip = this->m_clip, threshold = this->m_threshold;
    const std::int64_t quads = this->m_shape.rows / 4, features = this->m_shape.features;
    const int team_size = feature_major_team;
    const std::int64_t teams =
        balanced_teams((quads + team_size - 1) / team_size,
                       guaranteed_resident_teams(this->m_space, team_size, feature_major_threads_per_sm));
    Kokkos::parallel_reduce(
        "kstudy::fused_kokkos<feature_major,4 rows per thread>",
        light_weight(policy_type(this->m_space, static_cast<int>(teams), team_size)),
        KOKKOS_LAMBDA(const member_type& team, std::int64_t& count) {
          const std::int64_t step = std::int64_t(team.league_size()) * team.team_size();
          for (std::int64_t q = std::int64_t(team.league_rank()) * team.team_size() + team.team_rank(); q < quads;
               q += step) {
            const quad* rows_of = reinterpret_cast<const quad*>(x + 4 * q);
            Value sum[4] = {0, 0, 0, 0};
            std::int64_t f = 0;
            for (; f + 8 <= features; f += 8) {
              quad v[8];
              for (int k = 0; k < 8; ++k) v[k] = rows_of[(f + k) * (column / 4)];
              for (int k = 0; k < 8; ++k) {
                const Value m = mean(f + k), s = inv_std(f + k), w = weight(f + k);
                for (int j = 0; j < 4; ++j) sum[j] += clamp_nan_through((v[k].v[j] - m) * s, clip) * w;
              }
            }
            for (; f < features; ++f) {
              const quad v = rows_of[f * (column / 4)];
              const Value m = mean(f), s = inv_std(f), w = weight(f);
              for (int j = 0; j < 4; ++j) sum[j] += clamp_nan_through((v.v[j] - m) * s, clip) * w;
            }
            quad out;
            flag_quad flags;
            for (int j = 0; j < 4; ++j) {
              out.v[j] = sum[j];
              flags.v[j] = sum[j] > threshold;
              count += flags.v[j];
            }
            score[q] = out;
            flag[q] = flags;
          }
        },
        this->m_count_host);
  }

  // Device, one row per thread: one resident wave of teams whose threads stride over the rows (as the
  // CUDA kernels do). A team per 256 rows instead (one row per thread) ran at 1.0-1.6 TB/s: every
  // thread then paid Kokkos' team reduction for only 16 loads. TeamPolicy, not RangePolicy: Kokkos 3.4
  // caps a RangePolicy reduction's grid at its block size.
  // Built to 64 registers (four teams per SM): built to 32 (eight teams, LaunchBounds<1024, 2>) it ran
  // 1.48x slower at 262,144 x 256 on the H200 (133.8 against 90.6 us; data/h200-2026-11-30-s6).
  void run_device_row_per_thread(const char* label) {
    using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<1024, 1>>;
    using member_type = typename policy_type::member_type;
    const auto args = this->kernel_args();
    const std::int64_t rows = this->m_shape.rows, features = this->m_shape.features;
    const int team_size = feature_major_team;
    const std::int64_t teams =
        balanced_teams((rows + team_size - 1) / team_size,
                       guaranteed_resident_teams(this->m_space, team_size, feature_major_threads_per_sm));
    Kokkos::parallel_reduce(
        label, light_weight(policy_type(this->m_space, static_cast<int>(teams), team_size)),
        KOKKOS_LAMBDA(const member_type& team, std::int64_t& count) {
          const std::int64_t step = std::int64_t(team.league_size()) * team.team_size();
          for (std::int64_t r = std::int64_t(team.league_rank()) * team.team_size() + team.team_rank(); r < rows;
               r += step)
            args.write(r, row_score(args, r, features), count);
        },
        this->m_count_host);
  }

  // Public: CUDA extended lambdas may not live in private member functions.
  // One row per work item; features eight at a time so the loads are independent.
  void run_row_per_thread(const char* label) {
    const auto args = this->kernel_args();
    const std::int64_t features = this->m_shape.features;
    Kokkos::parallel_reduce(
        label, Kokkos::RangePolicy<ExecutionSpace>(this->m_space, 0, this->m_shape.rows),
        KOKKOS_LAMBDA(const std::int64_t r, std::int64_t& count) {
          args.write(r, row_score(args, r, features), count);
        },
        this->m_count_host);
  }

  // Host, feature-major: a block of rows at a time, feature-outer, so the inner loop is contiguous.
  void run_host_feature_major() {
    const auto args = this->kernel_args();
    const std::int64_t rows = this->m_shape.rows, features = this->m_shape.features;
    const std::int64_t blocks = (rows + host_row_block - 1) / host_row_block;
    Kokkos::parallel_reduce(
        "kstudy::fused_kokkos<feature_major,host>", Kokkos::RangePolicy<ExecutionSpace>(this->m_space, 0, blocks),
        [=](const std::int64_t block, std::int64_t& count) {
          const std::int64_t r0 = block * host_row_block;
          const std::int64_t n = std::min<std::int64_t>(host_row_block, rows - r0);
          Value acc[host_row_block] = {};
          for (std::int64_t f = 0; f < features; ++f) {
            const Value m = args.mean(f), s = args.inv_std(f), w = args.weight(f);
            const Value* column = &args.x(r0, f);
            for (std::int64_t i = 0; i < n; ++i) acc[i] += clamp_nan_through((column[i] - m) * s, args.clip) * w;
          }
          for (std::int64_t i = 0; i < n; ++i) args.write(r0 + i, acc[i], count);
        },
        this->m_count_host);
  }

  // Device, row-major: the CUDA tiled kernel's plan (kstudy_plan_tile) in Kokkos. A team copies a
  // contiguous tile of whole rows into scratch with flat, coalesced loads -- 16-byte chunks when rows are
  // whole chunks; each thread issues all its loads before storing any, so they overlap -- then a group of
  // G vector lanes reduces each row from scratch (Kokkos' vector reduction: shuffles on a GPU). The tile's
  // row pitch in chunks is G mod 2G so the lanes of one shared-memory wavefront hit distinct banks, and
  // the feature vectors sit in scratch as chunks too. One resident wave of teams strides over the tiles.
  void run_device_row_major_tiled() {
    const std::int64_t features = this->m_shape.features;
    const int threads = this->m_options.block_size > 0 ? this->m_options.block_size : 256;
    // x's allocation is aligned far beyond 16 bytes; a tile then starts on a chunk when rows are whole chunks.
    if (features % 4 == 0 && run_tiles<4>(threads)) return;
    if (run_tiles<1>(threads)) return;
    run_device_row_major_direct(std::max(1, threads / 32), 32);  // rows wider than a tile
  }

  // False when a row does not fit the tile.
  template <int Width>
  bool run_tiles(int threads) {
    // Bounds for 1,024-thread teams: the compiler keeps the kernel within 64 registers, so every block
    // size a study asks for can launch, and half the GPU's thread slots hold resident teams.
    using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<1024, 1>>;
    using member_type = typename policy_type::member_type;
    using chunk_type = chunk<Value, Width>;
    constexpr int lane_chunks = max_loads / Width;  // chunks a lane keeps in flight while copying
    constexpr int scratch_floats = 8192;            // 32 KiB, leaving Kokkos room for its reduction in shared memory
    const std::int64_t rows = this->m_shape.rows, features = this->m_shape.features;
    const int row_chunks = static_cast<int>(features / Width);
    int group = 1;  // lanes per row: each takes at most lane_chunks chunks of it
    while (group < 32 && group * lane_chunks < row_chunks) group *= 2;
    int pitch = row_chunks;  // chunks between tile rows in scratch
    if (group < 32 / Width)
      while (pitch % (2 * group) != group) ++pitch;
    const std::int64_t free_floats = scratch_floats - 3 * (features + Width);
    std::int64_t tile_rows = std::int64_t(threads) * lane_chunks / row_chunks;
    tile_rows = std::min<std::int64_t>(tile_rows, free_floats > 0 ? free_floats / (std::int64_t(pitch) * Width) : 0);
    if (tile_rows < 1 || features >= scratch_floats) return false;
    const int rows_per_team = static_cast<int>(tile_rows);
    const int team_size = threads / group;
    const std::int64_t tiles = (rows + rows_per_team - 1) / rows_per_team;
    const std::int64_t teams = balanced_teams(tiles, guaranteed_resident_teams(this->m_space, threads, 1024));
    const Value* x = this->m_x.data();
    const Value *mean_g = this->m_vectors.mean.data(), *inv_std_g = this->m_vectors.inv_std.data(),
                *weight_g = this->m_vectors.weight.data();
    const auto score = this->m_score;
    const auto flag = this->m_flag;
    const Value clip = this->m_clip, threshold = this->m_threshold;
    const int vector_chunks = row_chunks + 1;  // room for a partial chunk never read
    const std::size_t scratch_bytes = std::size_t(3 * vector_chunks + rows_per_team * pitch) * sizeof(chunk_type);
    const auto body = KOKKOS_LAMBDA(const member_type& team, std::int64_t& count) {
      // Aligned for 16-byte chunk stores: plain get_shmem gave an 8-byte-aligned address after Kokkos'
      // own reduction space (compute-sanitizer: misaligned __shared__ writes).
      chunk_type* smem =
          static_cast<chunk_type*>(team.team_shmem().get_shmem_aligned(scratch_bytes, alignof(chunk_type)));
      chunk_type* mean = smem;
      chunk_type* inv_std = smem + vector_chunks;
      chunk_type* weight = smem + 2 * vector_chunks;
      chunk_type* tile = smem + 3 * vector_chunks;
      const int rank = team.team_rank();
      Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, group), [&](const int lane) {
        const int t = rank * group + lane, block = team_size * group;
        for (int f = t; f < features; f += block) {
          reinterpret_cast<Value*>(mean)[f] = mean_g[f];
          reinterpret_cast<Value*>(inv_std)[f] = inv_std_g[f];
          reinterpret_cast<Value*>(weight)[f] = weight_g[f];
        }
      });
      for (std::int64_t tile_index = team.league_rank(); tile_index < tiles; tile_index += team.league_size()) {
        const std::int64_t r0 = tile_index * rows_per_team;
        const int n_rows = rows - r0 < rows_per_team ? static_cast<int>(rows - r0) : rows_per_team;
        const int n = n_rows * row_chunks;  // the tile is contiguous in a row-major table
        const chunk_type* source = reinterpret_cast<const chunk_type*>(x + r0 * features);
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, group), [&](const int lane) {
          // Flat chunk c = t + k * block of the tile is (row q, column m); tracked without a division per chunk.
          const int t = rank * group + lane, block = team_size * group;
          chunk_type v[lane_chunks];
          for (int k = 0; k < lane_chunks; ++k)
            if (t + k * block < n) v[k] = source[t + k * block];
          int q = t / row_chunks, m = t - q * row_chunks;
          const int dq = block / row_chunks, dm = block - dq * row_chunks;
          for (int k = 0; k < lane_chunks; ++k) {
            if (t + k * block < n) tile[q * pitch + m] = v[k];
            q += dq;
            m += dm;
            if (m >= row_chunks) {
              m -= row_chunks;
              ++q;
            }
          }
        });
        team.team_barrier();  // also publishes the feature vectors on the first tile
        if (group == 1) {
          // One thread per row: a plain loop. Kokkos' vector reduction and single() recompute a lane mask
          // (an integer division) around every row, which made this kernel issue-bound.
          for (int i = rank; i < n_rows; i += team_size) {
            const chunk_type* row = tile + i * pitch;
            Value sum = 0;
#ifdef __CUDA_ARCH__
#pragma unroll 1  // a rolled loop: the kernel is issue-bound, unrolling only adds registers
#endif
            for (int c = 0; c < row_chunks; ++c) {
              const chunk_type xv = row[c], mv = mean[c], sv = inv_std[c], wv = weight[c];
              for (int j = 0; j < Width; ++j) sum += clamp_nan_through((xv.v[j] - mv.v[j]) * sv.v[j], clip) * wv.v[j];
            }
            write_row(score, r0 + i, sum, threshold, flag, count);
          }
        } else {
          // A uniform trip count: every lane of a warp takes part in each vector reduction's shuffles.
          for (int base = 0; base < n_rows; base += team_size) {
            const int i = base + rank;
            const chunk_type* row = tile + i * pitch;
            Value sum = 0;
            Kokkos::parallel_reduce(
                Kokkos::ThreadVectorRange(team, i < n_rows ? row_chunks : 0),
                [&](const int c, Value& partial) {
                  const chunk_type xv = row[c], mv = mean[c], sv = inv_std[c], wv = weight[c];
                  for (int j = 0; j < Width; ++j)
                    partial += clamp_nan_through((xv.v[j] - mv.v[j]) * sv.v[j], clip) * wv.v[j];
                },
                sum);
            if (i < n_rows)
              Kokkos::single(Kokkos::PerThread(team), [&]() { write_row(score, r0 + i, sum, threshold, flag, count); });
          }
        }
        team.team_barrier();  // the next tile overwrites this one
      }
    };
    auto policy = light_weight(policy_type(this->m_space, static_cast<int>(teams), team_size, group));
    policy.set_scratch_size(0, Kokkos::PerTeam(scratch_bytes + alignof(chunk_type)));  // room to align
    // The kernel's registers may not allow the largest blocks; Kokkos would refuse them.
    const int allowed = policy.team_size_max(body, Kokkos::ParallelReduceTag());
    if (team_size > allowed)
      throw std::invalid_argument("block size " + std::to_string(threads) + " exceeds the " +
                                  std::to_string(allowed * group) + " threads this kernel's registers allow");
    Kokkos::parallel_reduce("kstudy::fused_kokkos<row_major>", policy, body, this->m_count_host);
    return true;
  }

  // Rows wider than a tile: vector lanes stride over the features of one row in global memory.
  void run_device_row_major_direct(int team_size, int vector_length) {
    using policy_type = Kokkos::TeamPolicy<ExecutionSpace>;
    using member_type = typename policy_type::member_type;
    const auto args = this->kernel_args();
    const std::int64_t rows = this->m_shape.rows, features = this->m_shape.features;
    const std::int64_t teams = (rows + team_size - 1) / team_size;
    Kokkos::parallel_reduce(
        "kstudy::fused_kokkos<row_major,wide>",
        light_weight(policy_type(this->m_space, static_cast<int>(teams), team_size, vector_length)),
        KOKKOS_LAMBDA(const member_type& team, std::int64_t& count) {
          const std::int64_t r = std::int64_t(team.league_rank()) * team.team_size() + team.team_rank();
          if (r >= rows) return;
          Value sum = 0;
          Kokkos::parallel_reduce(
              Kokkos::ThreadVectorRange(team, features),
              [&](const std::int64_t f, Value& partial) { partial += args.term(r, f); }, sum);
          Kokkos::single(Kokkos::PerThread(team), [&]() { args.write(r, sum, count); });
        },
        this->m_count_host);
  }
};

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  register_kokkos_variant<fused_kokkos<space, Kokkos::LayoutLeft>>(
      fused_info("fused_kokkos_feature_major", table_layout::feature_major,
                 "one kernel, one row per thread, coalesced across rows"));
  auto row_major = fused_info("fused_kokkos_row_major", table_layout::row_major,
                              "one kernel; device: coalesced tile copy to team scratch + vector-lane row reduction");
  row_major.tunable_block_size = !is_host_space_v<space>;  // the team size of the tile kernel
  register_kokkos_variant<fused_kokkos<space, Kokkos::LayoutRight>>(row_major);
  register_kokkos_variant<fused_kokkos<space, Kokkos::LayoutStride>>(fused_info(
      "fused_kokkos_padded", table_layout::padded_row_major, "one kernel, one row per thread over a padded row pitch"));
});

}  // namespace
}  // namespace kstudy
