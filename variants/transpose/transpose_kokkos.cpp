// transpose in Kokkos, for every enabled execution space (the portable versions beside the CUDA ladder):
//  - transpose_kokkos_mdrange: what a Kokkos user writes first: one MDRangePolicy<Rank<2>> over
//    (rows, cols), t(c, r) = x(r, c), Kokkos' default iteration order and tiling (one side of the copy is
//    strided whichever order it picks);
//  - transpose_kokkos_team: the shared-tile transpose in portable code: one team per 32 x 32 tile, the tile
//    staged in team scratch padded to [32][33], read from x along rows (coalesced) and written to t along
//    t's rows (coalesced), the padding keeping the column reads of scratch free of bank conflicts. 256
//    threads per team on a device, 1 on a host (where scratch is ordinary memory).
// x and t are flat views (x(r, c) at r * cols + c, t(c, r) at c * rows + r) on the variant's own instance.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kstudy/support/kokkos_support.hpp"
#include "transpose/transpose.hpp"

namespace kstudy::transpose {
namespace {

using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

template <class ExecutionSpace>
class transpose_kokkos_base : public detail::kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = detail::kokkos_queued_variant<ExecutionSpace>;

 public:
  using memory_space = typename ExecutionSpace::memory_space;
  using device_type = Kokkos::Device<ExecutionSpace, memory_space>;
  using vector_type = Kokkos::View<float*, device_type>;
  using kokkos_base::on_host;

  transpose_kokkos_base() : kokkos_base(/*own_stream=*/true) {}
  ~transpose_kokkos_base() override { m_instance.drain(); }  // queued work ends before the buffers go

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = transpose_problem(problem);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    m_rows = data.rows();
    m_cols = data.cols();
    const auto n = static_cast<std::size_t>(data.elements());
    m_x = vector_type(Kokkos::view_alloc("kstudy::transpose::x", Kokkos::WithoutInitializing), n);
    m_t = vector_type(Kokkos::view_alloc("kstudy::transpose::t", Kokkos::WithoutInitializing), n);
    this->upload(data.streamed_inputs());
  }

  void poison() override {
    Kokkos::deep_copy(m_space, m_t, std::numeric_limits<float>::quiet_NaN());
    m_space.fence();
  }

  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != 1) throw std::invalid_argument("transpose: expected one input array");
    Kokkos::deep_copy(m_space, m_x,
                      Kokkos::View<const float*, Kokkos::HostSpace, unmanaged>(inputs[0].as<const float>(),
                                                                               m_x.extent(0)));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    Kokkos::deep_copy(m_space, Kokkos::View<float*, Kokkos::HostSpace, unmanaged>(t_output(outputs), m_t.extent(0)),
                      m_t);
  }
 protected:
  using kokkos_base::m_instance;
  using kokkos_base::m_space;
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

[[maybe_unused]] const int registered = detail::for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  auto mdrange = variant_info_for("kokkos_mdrange", "transpose_kokkos_mdrange",
                                  "Kokkos MDRangePolicy<Rank<2>> over (rows, cols), t(c, r) = x(r, c), default "
                                  "iteration order and tiling");
  mdrange.kernels_launched = 1;  // the parallel_for
  detail::register_kokkos_variant<transpose_kokkos_mdrange<space>>(std::move(mdrange));
  auto team = variant_info_for("kokkos_team", "transpose_kokkos_team",
                               "Kokkos TeamPolicy, one team per 32 x 32 tile staged in team scratch padded to "
                               "[32][33] (256 threads per team on a device, 1 on a host)");
  team.kernels_launched = 1;  // the parallel_for
  detail::register_kokkos_variant<transpose_kokkos_team<space>>(std::move(team));
});

}  // namespace
}  // namespace kstudy::transpose
