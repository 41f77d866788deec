// LayerNorm and residual + LayerNorm in Kokkos, for every enabled execution space (portable, rung 0):
//  - layernorm_kokkos: a TeamPolicy with one team per row. The team copies its row into team scratch with a
//    TeamThreadRange (consecutive threads take consecutive elements: coalesced on a GPU), then computes the
//    mean and the variance by two team reductions over the scratch copy (two-pass numerics, no atomics) and
//    writes y from it: x is read from global memory once. A row larger than the space's level-0 team
//    scratch (Kokkos 3.4: 40 KB on CUDA, 32 KB on hosts) is read from global memory in each of the three
//    passes instead.
//  - residual_layernorm_kokkos_fused: the same kernel staging h = x + r, which it also writes to h: reads x
//    and r once and writes h and y once (4 passes).
//  - residual_layernorm_kokkos_unfused: a RangePolicy add kernel writing h, then the layernorm_kokkos kernel
//    on h (5 passes).
// On a device the statistics accumulate in float: chunks of hidden / team size per thread, then Kokkos'
// team tree (within the gate's u (sqrt(n) + log2 n) model). On a host backend a team is one thread, and a
// float sum of a whole row sequentially loses the small squares next to outliers (swamping: an error growing
// like n u, past the gate at n = 4,096), so host teams accumulate in double, as PyTorch's CPU kernels do.
// Every variant runs on its own execution-space instance (its own stream on CUDA).
#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "kstudy/support/kokkos_support.hpp"
#include "layernorm/layernorm.hpp"
#include "layernorm/layernorm_kokkos_base.hpp"

namespace kstudy::layernorm {
namespace {

using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

// Threads per team on a device: every thread keeps at least ~8 elements of a long row in flight.
constexpr int device_team_size(std::int64_t hidden) { return hidden >= 2048 ? 256 : 128; }

template <class ExecutionSpace>
using scratch_row = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, unmanaged>;

// The space's level-0 team scratch limit. Kokkos 4 asks the device for it through a Cuda instance, which aborts
// before Kokkos is started (`kstudy list` of a cuda build on a machine without a GPU): there the traffic model
// takes Kokkos 3.4's fixed device limit, 40 KiB.
template <class ExecutionSpace>
std::size_t level0_scratch_max() {
  if (!is_host_space_v<ExecutionSpace> && !Kokkos::is_initialized()) return std::size_t{40} * 1024;
  return static_cast<std::size_t>(Kokkos::TeamPolicy<ExecutionSpace>::scratch_size_max(0));
}

// Whether a row of `hidden` floats fits the space's level-0 team scratch (the kernel then reads it once).
template <class ExecutionSpace>
bool stages_row(std::int64_t hidden) {
  return scratch_row<ExecutionSpace>::shmem_size(static_cast<std::size_t>(hidden)) <=
         level0_scratch_max<ExecutionSpace>();
}

// Normalises the rows of v (v = x, or x + r when `residual`, also written to h) into y: one team per row.
// Public helper of the variants below (nvcc refuses extended lambdas in private member functions).
template <class ExecutionSpace, bool Residual, class Matrix, class Vector>
void launch_rows(const ExecutionSpace& space, const Matrix& x, const Matrix& r, const Vector& gamma, const Vector& beta,
                 const Matrix& y, const Matrix& h, std::int64_t rows, std::int64_t hidden) {
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace>;
  using member_type = typename policy_type::member_type;
  using scratch_view = scratch_row<ExecutionSpace>;
  constexpr bool on_host = is_host_space_v<ExecutionSpace>;
  const int team_size = on_host ? 1 : device_team_size(hidden);
  const bool staged = stages_row<ExecutionSpace>(hidden);
  policy_type policy(space, static_cast<int>(rows), team_size);
  if (staged) policy = policy.set_scratch_size(0, Kokkos::PerTeam(scratch_view::shmem_size(hidden)));
  const int n = static_cast<int>(hidden);
  using accumulator = std::conditional_t<on_host, double, float>;
  const float eps = epsilon;
  Kokkos::parallel_for(
      Residual ? "kstudy::residual_layernorm_rows" : "kstudy::layernorm_rows", policy,
      KOKKOS_LAMBDA(const member_type& team) {
        const std::int64_t base = std::int64_t(team.league_rank()) * hidden;
        scratch_view row;
        if (staged) row = scratch_view(team.team_scratch(0), n);
        // Pass 1: the row's sum; v staged in scratch (and h written) on the way.
        accumulator sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, n),
            [&](const int j, accumulator& s) {
              float v = x(base + j);
              if (Residual) {
                v += r(base + j);
                h(base + j) = v;
              }
              if (staged) row(j) = v;
              s += v;
            },
            sum);
        team.team_barrier();  // the staged row (or h) is complete before any thread reads another's element
        const float mean = static_cast<float>(sum / accumulator(hidden));
        // The value of element j in passes 2 and 3: from scratch, or again from global memory.
        auto value = [&](const int j) { return staged ? row(j) : (Residual ? h(base + j) : x(base + j)); };
        accumulator squares = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, n),
            [&](const int j, accumulator& s) {
              const float d = value(j) - mean;
              s += d * d;
            },
            squares);
        const float rstd = 1.0f / sqrtf(static_cast<float>(squares / accumulator(hidden)) + eps);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n),
                             [&](const int j) { y(base + j) = (value(j) - mean) * rstd * gamma(j) + beta(j); });
      });
}

// layernorm_kokkos (K plain) and residual_layernorm_kokkos_fused (K residual): the team kernel on x, or on
// x + r (writing h). The plain kernel reads neither r nor h, so x and y stand in for them.
template <class ExecutionSpace, layernorm_kind K>
class layernorm_kokkos final : public layernorm_kokkos_base<ExecutionSpace, K> {
 public:
  void launch() override {
    constexpr bool residual = has_residual(K);
    launch_rows<ExecutionSpace, residual>(this->m_space, this->m_x, residual ? this->m_r : this->m_x, this->m_gamma,
                                          this->m_beta, this->m_y, residual ? this->m_h : this->m_y, this->m_rows,
                                          this->m_hidden);
  }
};

template <class ExecutionSpace>
class residual_layernorm_kokkos_unfused final : public layernorm_kokkos_base<ExecutionSpace, layernorm_kind::residual> {
 public:
  void launch() override {
    const auto x = this->m_x, r = this->m_r, h = this->m_h;
    Kokkos::parallel_for(
        "kstudy::residual_add",
        Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(this->m_space, 0,
                                                                             this->m_rows * this->m_hidden),
        KOKKOS_LAMBDA(const std::int64_t i) { h(i) = x(i) + r(i); });
    launch_rows<ExecutionSpace, false>(this->m_space, h, h, this->m_gamma, this->m_beta, this->m_y, this->m_y,
                                       this->m_rows, this->m_hidden);
  }
};

// Matrix passes of the team kernel: 1 read when the row fits level-0 scratch, else 3 (one per pass).
template <class Space>
int team_kernel_reads(std::int64_t hidden) {
  return stages_row<Space>(hidden) ? 1 : 3;
}

template <class Space>
void register_space() {
  const std::string team =
      "TeamPolicy, one team per row; row staged in team scratch, mean and variance by two team "
      "reductions over it (two-pass), own instance";
  auto plain = variant_info_for(layernorm_kind::plain, "layernorm_kokkos", "layernorm_kokkos", team, 1, 1);
  plain.traffic = [](const table_shape& s) {
    return pass_traffic(s.rows, s.features, team_kernel_reads<Space>(s.features), 1);
  };
  plain.kernels_launched = 1;  // layernorm_rows
  register_kokkos_variant<layernorm_kokkos<Space, layernorm_kind::plain>>(std::move(plain));

  auto fused =
      variant_info_for(layernorm_kind::residual, "residual_layernorm_kokkos_fused", "residual_layernorm_kokkos",
                       "one TeamPolicy kernel: h = x + r staged in team scratch "
                       "and written, y from the staged row (4 passes)",
                       2, 2);
  fused.traffic = [](const table_shape& s) {
    // Long rows re-read h (written by the same kernel) in passes 2 and 3.
    const int extra = team_kernel_reads<Space>(s.features) == 1 ? 0 : 2;
    return pass_traffic(s.rows, s.features, 2 + extra, 2);
  };
  fused.fusion = fusion_level::full;
  fused.kernels_launched = 1;  // residual_layernorm_rows
  register_kokkos_variant<layernorm_kokkos<Space, layernorm_kind::residual>>(std::move(fused));

  auto unfused =
      variant_info_for(layernorm_kind::residual, "residual_layernorm_kokkos_unfused", "residual_layernorm_kokkos",
                       "RangePolicy add kernel writing h, then the "
                       "layernorm_kokkos team kernel on h (5 passes)",
                       3, 2);
  unfused.traffic = [](const table_shape& s) {
    return pass_traffic(s.rows, s.features, 2 + team_kernel_reads<Space>(s.features), 2);
  };
  unfused.fusion = fusion_level::none;
  unfused.kernels_launched = 2;  // residual_add, layernorm_rows
  register_kokkos_variant<residual_layernorm_kokkos_unfused<Space>>(std::move(unfused));
}

[[maybe_unused]] const int registered =
    for_each_enabled_space([](auto tag) { register_space<typename decltype(tag)::type>(); });

}  // namespace
}  // namespace kstudy::layernorm
