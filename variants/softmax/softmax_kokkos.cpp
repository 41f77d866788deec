// Softmax over rows in Kokkos, for every enabled execution space (softmax_kokkos):
// one team per row (TeamPolicy, league = rows). Thread t of a team of T takes columns t, t + T, t + 2T, ...,
// so a device warp reads 32 consecutive floats per load (coalesced). Team reductions: each thread's value
// goes to a slot of team scratch, and a nested parallel_reduce over TeamThreadRange(member, T) with
// Kokkos::Max (or a sum) combines the slots: no atomics, and nothing beyond the API Kokkos 3.4 and 4.x share
// (member.team_reduce(reducer) is missing from the host team member of Kokkos 4).
//  - Rows of at most items_per_thread * T columns stay in registers: each thread loads its (at most 16)
//    elements once, the team reduces the max, the thread turns them into exp(x - max) in place, the team
//    reduces the sum, and the thread writes them divided by it. The row is read from memory once.
//  - Longer rows: an online pass (running max, sum rescaled when the max grows, 8 loads in flight per
//    thread), then a normalising pass that reads the row again (on a GPU usually from L2: the team read it
//    moments before).
// Team size: on a device the smallest power of two in [32, 1024] (capped by team_size_max) that holds the
// row in registers (128 cols: 32; 1,024: 64; 4,096: 256; 16,384: 1,024); on a host 1 (a team is one core,
// and rows beyond 16 columns take the two-pass path, the re-read coming from that core's cache).
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "kstudy/support/kokkos_support.hpp"
#include "softmax/softmax.hpp"
#include "softmax/softmax_kokkos_base.hpp"
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy::softmax {
namespace {

using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

constexpr int items_per_thread = 16;  // register-resident elements per thread
constexpr int chunk = 8;              // loads in flight per thread on the two-pass path

template <class ExecutionSpace>
struct softmax_types {
  using device_type = Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>;
  using matrix_type = Kokkos::View<float*, device_type>;  // row-major rows x cols, flat
  // At most 1,024 threads per team with at most 64 registers each, so a 1,024-thread team can launch.
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<1024, 1>>;
  using member_type = typename policy_type::member_type;
  using slots_type = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, unmanaged>;
};

// The team's maximum (or sum) of one value per thread, on every thread of the team. The slots (one per
// thread, team scratch) are free again when it returns.
template <class Member, class Slots>
KOKKOS_INLINE_FUNCTION float team_max(const Member& member, const Slots& slots, float value) {
  slots(member.team_rank()) = value;
  member.team_barrier();
  float result = -INFINITY;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(member, member.team_size()),
      [&](const int t, float& partial) { partial = partial > slots(t) ? partial : slots(t); },
      Kokkos::Max<float>(result));
  member.team_barrier();
  return result;
}
template <class Member, class Slots>
KOKKOS_INLINE_FUNCTION float team_sum(const Member& member, const Slots& slots, float value) {
  slots(member.team_rank()) = value;
  member.team_barrier();
  float result = 0.0f;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(member, member.team_size()), [&](const int t, float& partial) { partial += slots(t); },
      result);
  member.team_barrier();
  return result;
}

// Rows that fit: read once into registers (see the file's comment).
template <class ExecutionSpace>
struct registers_body {
  using types = softmax_types<ExecutionSpace>;
  typename types::matrix_type x, y;
  std::int64_t cols;

  KOKKOS_INLINE_FUNCTION void operator()(const typename types::member_type& member) const {
    const typename types::slots_type slots(member.team_scratch(0), member.team_size());
    const std::int64_t offset = std::int64_t(member.league_rank()) * cols;
    const int t = member.team_rank(), threads = member.team_size();
    const float minus_infinity = -INFINITY;  // the macro: numeric_limits is host-only in device code
    float v[items_per_thread];
    float m = minus_infinity;
    for (int u = 0; u < items_per_thread; ++u) {
      const std::int64_t c = t + std::int64_t(u) * threads;
      v[u] = c < cols ? x(offset + c) : minus_infinity;
      m = m > v[u] ? m : v[u];
    }
    const float row_max = team_max(member, slots, m);
    float s = 0.0f;
    for (int u = 0; u < items_per_thread; ++u) {
      v[u] = expf(v[u] - row_max);  // 0 for the padding's -inf
      s += v[u];
    }
    const float row_sum = team_sum(member, slots, s);
    for (int u = 0; u < items_per_thread; ++u) {
      const std::int64_t c = t + std::int64_t(u) * threads;
      if (c < cols) y(offset + c) = v[u] / row_sum;
    }
  }
};

// Longer rows: online max and sum, then a normalising pass that reads the row again.
template <class ExecutionSpace>
struct two_pass_body {
  using types = softmax_types<ExecutionSpace>;
  typename types::matrix_type x, y;
  std::int64_t cols;

  KOKKOS_INLINE_FUNCTION void operator()(const typename types::member_type& member) const {
    const typename types::slots_type slots(member.team_scratch(0), member.team_size());
    const std::int64_t offset = std::int64_t(member.league_rank()) * cols;
    const int t = member.team_rank(), threads = member.team_size();
    const float minus_infinity = -INFINITY;  // the macro: numeric_limits is host-only in device code
    float m = minus_infinity, s = 0.0f;
    for (std::int64_t base = t; base < cols; base += std::int64_t(chunk) * threads) {
      float v[chunk];
      float chunk_max = minus_infinity;
      for (int u = 0; u < chunk; ++u) {
        const std::int64_t c = base + std::int64_t(u) * threads;
        v[u] = c < cols ? x(offset + c) : minus_infinity;
        chunk_max = chunk_max > v[u] ? chunk_max : v[u];
      }
      if (chunk_max > m) {
        s *= expf(m - chunk_max);  // 0 * 0 while m is still -inf
        m = chunk_max;
      }
      for (int u = 0; u < chunk; ++u) s += expf(v[u] - m);
    }
    const float row_max = team_max(member, slots, m);
    // A thread without columns (T > cols) has m = -inf and s = 0: it adds nothing.
    const float row_sum = team_sum(member, slots, m == minus_infinity ? 0.0f : s * expf(m - row_max));
    for (std::int64_t base = t; base < cols; base += std::int64_t(chunk) * threads) {
      float v[chunk];
      for (int u = 0; u < chunk; ++u) {
        const std::int64_t c = base + std::int64_t(u) * threads;
        v[u] = c < cols ? x(offset + c) : 0.0f;
      }
      for (int u = 0; u < chunk; ++u) {
        const std::int64_t c = base + std::int64_t(u) * threads;
        if (c < cols) y(offset + c) = expf(v[u] - row_max) / row_sum;
      }
    }
  }
};

template <class ExecutionSpace>
class softmax_kokkos final : public softmax_kokkos_base<ExecutionSpace> {
  using base = softmax_kokkos_base<ExecutionSpace>;

 public:
  using policy_type = typename softmax_types<ExecutionSpace>::policy_type;
  using slots_type = typename softmax_types<ExecutionSpace>::slots_type;
  using base::on_host;

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = this->prepare_arrays(problem, options, "softmax_kokkos");
    m_team = team_size();
    this->upload(data.streamed_inputs());
  }

  void launch() override {
    const policy_type policy = policy_type(m_space, static_cast<int>(m_rows), m_team)
                                   .set_scratch_size(0, Kokkos::PerTeam(slots_type::shmem_size(m_team)));
    if (fits_registers(m_team))
      Kokkos::parallel_for("kstudy::softmax_kokkos_registers", policy,
                           registers_body<ExecutionSpace>{m_x, m_y, m_cols});
    else
      Kokkos::parallel_for("kstudy::softmax_kokkos_two_pass", policy, two_pass_body<ExecutionSpace>{m_x, m_y, m_cols});
  }

 private:
  bool fits_registers(int team) const { return m_cols <= std::int64_t(items_per_thread) * team; }

  int team_size() const {
    if constexpr (on_host) {
      return 1;
    } else {
      const policy_type probe(m_space, 1, 1);
      const int limit =
          std::min(probe.team_size_max(registers_body<ExecutionSpace>{m_x, m_y, m_cols}, Kokkos::ParallelForTag()),
                   probe.team_size_max(two_pass_body<ExecutionSpace>{m_x, m_y, m_cols}, Kokkos::ParallelForTag()));
      int team = 32;
      while (team < 1024 && !fits_registers(team)) team *= 2;
      while (team > 32 && team > limit) team /= 2;
      return team;
    }
  }

  using base::m_cols;
  using base::m_rows;
  using base::m_space;
  using base::m_x;
  using base::m_y;
  int m_team = 1;
};

[[maybe_unused]] const int registered = for_each_enabled_space([](auto tag) {
  using space = typename decltype(tag)::type;
  auto info = variant_info_for(
      "kokkos", "softmax_kokkos",
      "Kokkos TeamPolicy, one team per row: the row in registers (16 per thread, up to 1,024 threads on a "
      "device) with team max and sum reductions; longer rows online max/sum then a normalising pass");
  info.kernels_launched = 1;  // the team kernel (register-resident or two-pass)
  register_kokkos_variant<softmax_kokkos<space>>(std::move(info));
});

}  // namespace
}  // namespace kstudy::softmax
