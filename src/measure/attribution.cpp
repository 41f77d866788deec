#include "kstudy/attribution.hpp"

#include <Kokkos_Core.hpp>

#include <chrono>
#include <map>
#include <string>
#include <unordered_map>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy {
namespace {

using clock_type = std::chrono::steady_clock;

struct kernel_totals {
  std::int64_t calls = 0;
  double seconds = 0.0;
};

// Callback state: Kokkos' callbacks are plain function pointers.
std::map<std::string, kernel_totals>* g_totals = nullptr;
std::unordered_map<std::uint64_t, std::pair<std::string, clock_type::time_point>>* g_open = nullptr;
std::uint64_t g_next_id = 0;

void synchronize_device() {
#ifdef KOKKOS_ENABLE_CUDA
  cudaDeviceSynchronize();
#endif
}

void on_begin(const char* name, const std::uint32_t, std::uint64_t* id) {
  synchronize_device();  // what was queued before belongs to the previous step
  *id = g_next_id++;
  (*g_open)[*id] = {name ? name : "(unnamed)", clock_type::now()};
}

void on_end(const std::uint64_t id) {
  synchronize_device();
  const auto it = g_open->find(id);
  if (it == g_open->end()) return;
  auto& t = (*g_totals)[it->second.first];
  t.calls += 1;
  t.seconds += std::chrono::duration<double>(clock_type::now() - it->second.second).count();
  g_open->erase(it);
}

void set_callbacks(bool on) {
  namespace tools = Kokkos::Tools::Experimental;
  tools::set_begin_parallel_for_callback(on ? on_begin : nullptr);
  tools::set_end_parallel_for_callback(on ? on_end : nullptr);
  tools::set_begin_parallel_reduce_callback(on ? on_begin : nullptr);
  tools::set_end_parallel_reduce_callback(on ? on_end : nullptr);
  tools::set_begin_parallel_scan_callback(on ? on_begin : nullptr);
  tools::set_end_parallel_scan_callback(on ? on_end : nullptr);
}

}  // namespace

std::vector<attribution_record> attribute_kernels(variant& variant, const std::string& experiment,
                                                  const std::string& variant_id, const table_shape& shape, int runs) {
  std::map<std::string, kernel_totals> totals;
  std::unordered_map<std::uint64_t, std::pair<std::string, clock_type::time_point>> open;
  g_totals = &totals;
  g_open = &open;
  variant.run();  // warm: module load and first launches stay out of the breakdown
  synchronize_device();
  set_callbacks(true);
  double total = 0.0;
  try {
    for (int r = 0; r < runs; ++r) {
      const auto start = clock_type::now();
      variant.run();
      synchronize_device();
      total += std::chrono::duration<double>(clock_type::now() - start).count();
    }
  } catch (...) {
    set_callbacks(false);
    throw;
  }
  set_callbacks(false);
  g_totals = nullptr;
  g_open = nullptr;

  std::vector<attribution_record> out;
  double inside = 0.0;
  for (const auto& [label, t] : totals) {
    out.push_back(
        {experiment, variant_id, shape.rows, shape.features, shape.depth, label, t.calls / runs, t.seconds / runs});
    inside += t.seconds;
  }
  out.push_back({experiment, variant_id, shape.rows, shape.features, shape.depth, "(outside Kokkos kernels)", 0,
                 std::max(0.0, total - inside) / runs});
  out.push_back({experiment, variant_id, shape.rows, shape.features, shape.depth, "(whole run)", 1, total / runs});
  return out;
}

}  // namespace kstudy
