// kstudy_bench: Google Benchmark targets for every registered variant at the reference shapes,
// resident (inputs already in the variant's memory), timed with CUDA events on the variant's own stream
// for device variants (manual time) and the host clock for host variants. Every variant passes the
// correctness gate on the same data before it is timed; a failing one is reported as an error, never a
// time. Ceilings are measured first in the same process; each result carries
//   GB/s      essential bytes (x read once, score + flag written once) per second, the same for all
//   roof      that bandwidth as a fraction of the measured read roof of its memory (device or host)
//
//   kstudy_bench [--shapes=1048576x16,16777216x16,262144x256] [google-benchmark flags]
#include <Kokkos_Core.hpp>
#include <benchmark/benchmark.h>

#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>
#include <string>
#include <vector>

#include "kstudy/ceilings.hpp"
#include "kstudy/gate.hpp"
#include "kstudy/timers.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/views/data_generator.hpp"

namespace {

struct shape_arg {
  std::int64_t rows, features;
};

std::vector<shape_arg> parse_shapes(const std::string& text) {
  std::vector<shape_arg> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto x = item.find('x');
    if (x == std::string::npos) throw std::invalid_argument("--shapes: '" + item + "' is not ROWSxFEATURES");
    out.push_back({std::stoll(item.substr(0, x)), std::stoll(item.substr(x + 1))});
  }
  return out;
}

// Data and reference per (shape, layout), shared by the variants that use that layout.
struct data_cache {
  std::map<std::tuple<std::int64_t, std::int64_t, int>, std::unique_ptr<kstudy::host_dataset>> datasets;
  std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<kstudy::reference_result>> references;

  const kstudy::host_dataset& get(std::int64_t rows, std::int64_t features, kstudy::table_layout layout) {
    auto& slot = datasets[{rows, features, static_cast<int>(layout)}];
    if (!slot) slot = std::make_unique<kstudy::host_dataset>(kstudy::make_shape(rows, features, layout, 3));
    return *slot;
  }
  const kstudy::reference_result& reference(const kstudy::host_dataset& data) {
    auto& slot = references[{data.shape().rows, data.shape().features}];
    if (!slot) slot = std::make_unique<kstudy::reference_result>(kstudy::compute_reference(data.problem()));
    return *slot;
  }
};

struct prepared {
  std::unique_ptr<kstudy::scoring_variant> variant;
  kstudy::gate_result gate;
};

data_cache g_data;
std::map<std::string, prepared> g_prepared;
std::vector<kstudy::ceiling_record> g_ceilings;

void bench_variant(benchmark::State& state, const kstudy::registered_variant* entry, shape_arg shape) {
  const std::string key = entry->info.id() + "/" + std::to_string(shape.rows) + "x" + std::to_string(shape.features);
  auto& p = g_prepared[key];
  const auto& data = g_data.get(shape.rows, shape.features, entry->info.layout);
  if (!p.variant) {
    try {
      p.variant = entry->make();
      p.variant->prepare(data.problem(), {});
      p.variant->poison();
      p.variant->run();
      kstudy::scoring_results out;
      out.resize(shape.rows);
      p.variant->download(out.score.data(), out.flag.data());
      p.gate = kstudy::check_results(data.problem(), g_data.reference(data), out.score.data(), out.flag.data(),
                                     p.variant->flagged_count());
    } catch (const std::exception& e) {
      p.gate.passed = false;
      p.gate.message = e.what();
    }
  }
  if (!p.gate.passed) {
    state.SkipWithError(("correctness gate failed: " + p.gate.message).c_str());
    return;
  }
  const bool device = entry->info.on_device;
  kstudy::device_event_timer events(device, p.variant->stream());
  for (auto _ : state) {
    kstudy::wall_timer wall;
    wall.start();
    kstudy::run_between_events(*p.variant, events);
    const double host_seconds = wall.seconds();
    state.SetIterationTime(events.available() ? events.seconds() : host_seconds);
  }
  const auto essential = kstudy::essential_traffic(data.shape()).total();
  state.counters["GB/s"] = benchmark::Counter(double(essential) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  if (const auto* roof = kstudy::roof_for(g_ceilings, device); roof && roof->bytes_per_second > 0)
    state.counters["roof"] =
        benchmark::Counter(double(essential) / roof->bytes_per_second, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["modelled_MB"] = double(entry->info.traffic(data.shape()).total()) / 1e6;
  state.SetLabel(entry->info.fusion_level + ", " + std::to_string(entry->info.kernels_launched) + " kernel(s)");
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::string shapes_text = "1048576x16,16777216x16,262144x256";
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--shapes=", 9) == 0) shapes_text = argv[i] + 9;
    else rest.push_back(argv[i]);
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  std::vector<shape_arg> shapes;
  try {
    shapes = parse_shapes(shapes_text);
  } catch (const std::exception& e) {
    std::cerr << "kstudy_bench: " << e.what() << "\n";
    return 2;
  }

  kstudy::ceiling_options options;
  if (const char* small = std::getenv("KSTUDY_CEILING_BYTES"))
    options.device_bytes = options.host_bytes = options.transfer_bytes = std::atoll(small);
  g_ceilings = kstudy::measure_ceilings(options);
  for (const auto& c : g_ceilings) {
    benchmark::AddCustomContext("ceiling_" + c.name + "_GBps", std::to_string(c.bytes_per_second / 1e9));
    std::cerr << "ceiling " << c.name << ": " << c.bytes_per_second / 1e9 << " GB/s (" << c.bytes << " B in "
              << c.seconds * 1e6 << " us)\n";
  }
  for (const auto& shape : shapes)
    for (const auto* entry : kstudy::variant_registry::instance().all()) {
      const std::string name = entry->info.id() + "/" + std::to_string(shape.rows) + "x" + std::to_string(shape.features);
      benchmark::RegisterBenchmark(name.c_str(), bench_variant, entry, shape)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond)
          ->Repetitions(7)
          ->DisplayAggregatesOnly(true);
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_prepared.clear();  // free device buffers before Kokkos finalises
  return 0;
}
