#pragma once
// Resident layout conversion: row-major -> feature-major on the table's own memory space, for the
// transpose break-even study (how many reuses of the faster layout pay for the conversion).
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <stdexcept>

namespace kstudy {

// Tiled transpose through team scratch so that both the reads (along rows) and the writes (along
// columns) are contiguous. Fences `space` before returning.
template <class ExecutionSpace, class SourceView, class DestinationView>
void convert_to_feature_major(const ExecutionSpace& space, const SourceView& source,
                              const DestinationView& destination) {
  static_assert(std::is_same_v<typename DestinationView::array_layout, Kokkos::LayoutLeft>,
                "destination must be feature-major (LayoutLeft)");
  const std::int64_t rows = source.extent(0), features = source.extent(1);
  if (destination.extent(0) != source.extent(0) || destination.extent(1) != source.extent(1))
    throw std::invalid_argument("convert_to_feature_major: source and destination extents differ");
  constexpr int tile = 32;
  const std::int64_t row_tiles = (rows + tile - 1) / tile;
  const std::int64_t feature_tiles = (features + tile - 1) / tile;
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace>;
  using scratch_view = Kokkos::View<float[tile][tile + 1], typename ExecutionSpace::scratch_memory_space,
                                    Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const int team_size = std::is_same_v<typename ExecutionSpace::memory_space, Kokkos::HostSpace> ? 1 : tile;
  const int vector_length = std::is_same_v<typename ExecutionSpace::memory_space, Kokkos::HostSpace> ? 1 : tile;
  policy_type policy(space, static_cast<int>(row_tiles * feature_tiles), team_size, vector_length);
  policy.set_scratch_size(0, Kokkos::PerTeam(scratch_view::shmem_size()));
  Kokkos::parallel_for(
      "kstudy::convert_to_feature_major", policy, KOKKOS_LAMBDA(const typename policy_type::member_type& team) {
        const std::int64_t tile_id = team.league_rank();
        const std::int64_t r0 = (tile_id / feature_tiles) * tile;
        const std::int64_t f0 = (tile_id % feature_tiles) * tile;
        scratch_view buffer(team.team_scratch(0));
        // Read: consecutive lanes walk features of one row (contiguous in row-major).
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tile), [&](const int i) {
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, tile), [&](const int j) {
            if (r0 + i < rows && f0 + j < features) buffer(i, j) = source(r0 + i, f0 + j);
          });
        });
        team.team_barrier();
        // Write: consecutive lanes walk rows of one feature (contiguous in feature-major).
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tile), [&](const int j) {
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, tile), [&](const int i) {
            if (r0 + i < rows && f0 + j < features) destination(r0 + i, f0 + j) = buffer(i, j);
          });
        });
      });
  space.fence();
}

}  // namespace kstudy
