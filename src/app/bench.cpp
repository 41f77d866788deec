// kstudy_bench: Google Benchmark targets for every registered variant of every operation at the
// operation's reference points, resident (inputs already in the variant's memory), timed with CUDA events
// on the variant's own stream for device variants (manual time) and the host clock for host variants.
// Every variant passes the correctness gate on the same data before it is timed; a failing one is
// reported as an error, never a time. Ceilings are measured first in the same process; each result carries
//   GB/s      the operation's essential bytes per second (the same model for every variant of it)
//   roof      that bandwidth as a fraction of the measured read roof of its memory (device or host)
//
//   kstudy_bench [--operations=scoring,stream_triad] [--shapes=1048576x16,262144x256]
//                [google-benchmark flags]
// --shapes replaces the reference points of every selected operation with as many axes as a shape has.
// The JSON output's `context` names the build (kstudy_version, flavour, git_commit, git_dirty and, for a dirty
// tree, git_diff_sha256: the same provenance an archive's root attributes carry) and the ceilings.
#include <Kokkos_Core.hpp>
#include <benchmark/benchmark.h>

#include <cstring>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/build_info.hpp"
#include "kstudy/ceilings.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/runner/kokkos_session.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/timers.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/variant_unavailable.hpp"

namespace {

using extents_t = std::vector<std::int64_t>;

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, separator);)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<extents_t> parse_shapes(const std::string& text) {
  std::vector<extents_t> out;
  for (const auto& item : split(text, ',')) {
    extents_t extents;
    for (const auto& x : split(item, 'x')) {
      std::size_t used = 0;
      const long long v = std::stoll(x, &used);
      if (used != x.size() || v < 1) throw std::invalid_argument("--shapes: '" + item + "' is not EXTENTxEXTENT...");
      extents.push_back(v);
    }
    out.push_back(extents);
  }
  return out;
}

std::string extents_text(const extents_t& extents) {
  std::string text;
  for (const auto x : extents) text += (text.empty() ? "" : "x") + std::to_string(x);
  return text;
}

// Inputs and reference per (operation, point), shared by the variants at that point.
std::map<std::pair<const kstudy::operation*, extents_t>, std::unique_ptr<kstudy::point_inputs>> g_inputs;

struct prepared {
  std::unique_ptr<kstudy::variant> variant;
  kstudy::gate_result gate;
  std::string unavailable;  // why this machine cannot run it at all (kstudy::variant_unavailable), else empty
};
std::map<std::string, prepared> g_prepared;
std::vector<kstudy::ceiling_record> g_ceilings;

kstudy::point_inputs& inputs_for(const kstudy::operation& op, const extents_t& extents) {
  auto& slot = g_inputs[{&op, extents}];
  if (!slot) slot = std::make_unique<kstudy::point_inputs>(op, extents, 3, kstudy::protocol{}.seed);
  return *slot;
}

// Benchmarks run in registration order (operation, point, variant; a benchmark's repetitions in a row), so only
// the variant being timed keeps its device buffers and only its point keeps its host inputs: every prepared
// variant of a run at once does not fit (all operations' bench points ran the H200's 141 GB out of memory).
// With --benchmark_enable_random_interleaving a variant is prepared and gated again each time it comes back.
void keep_only(const kstudy::operation& op, const extents_t& extents, const std::string& variant) {
  if (g_prepared.size() == 1 && g_prepared.count(variant)) return;
  g_prepared.clear();
  for (auto it = g_inputs.begin(); it != g_inputs.end();)
    it = it->first == std::make_pair(&op, extents) ? std::next(it) : g_inputs.erase(it);
}

void bench_variant(benchmark::State& state, const kstudy::registered_variant* entry, extents_t extents) {
  const auto& op = kstudy::operation_of(*entry);
  const std::string key = entry->info.id() + "/" + extents_text(extents);
  keep_only(op, extents, key);
  auto& inputs = inputs_for(op, extents);
  const auto shape = inputs.shape(entry->info.layout);
  auto& p = g_prepared[key];
  if (!p.variant) {
    try {
      p.variant = entry->make();
      p.gate = kstudy::prepare_and_gate(*p.variant, *entry, inputs, {});
    } catch (const kstudy::variant_unavailable& e) {  // a GPU too old for it, a missing library: not a failure
      p.gate.passed = false;
      p.unavailable = e.what();
    } catch (const std::exception& e) {
      p.gate.passed = false;
      p.gate.message = e.what();
    }
  }
  if (!p.unavailable.empty()) {
    state.SkipWithError(("not run on this machine: " + p.unavailable).c_str());
    return;
  }
  if (!p.gate.passed) {
    state.SkipWithError(("correctness gate failed: " + p.gate.message).c_str());
    return;
  }
  const bool device = entry->info.on_device;
  kstudy::device_event_timer events(device, p.variant->stream());
  // The roofs this time is quoted against were timed on the same clock (kstudy/ceilings.hpp).
  const auto clock = events.available() ? kstudy::timer_kind::device_events : kstudy::timer_kind::host_wall;
  std::vector<double> seconds;
  for (auto _ : state) {
    kstudy::wall_timer wall;
    wall.start();
    kstudy::run_between_events(*p.variant, events);
    const double host_seconds = wall.seconds();
    seconds.push_back(events.available() ? events.seconds() : host_seconds);
    state.SetIterationTime(seconds.back());
  }
  const double median_seconds = kstudy::median(seconds);
  std::string label = std::string(kstudy::to_string(entry->info.fusion)) + ", " +
                      std::to_string(entry->info.kernels_launched) + " kernel(s)";
  // A gated variant faster than a roof of the same run and clock: the roof is understated, and the share
  // above 100% means nothing. Said on the line, never printed as a fraction alone.
  const auto exceeded = [&](double rate, const kstudy::ceiling_record& roof, double roof_rate) {
    if (median_seconds > 0 && kstudy::roof_exceeded(rate / median_seconds / roof_rate)) {
      state.counters["roof_exceeded"] = 1;
      label += "; " + roof.name + " roof exceeded: the roof is understated";
    }
  };
  const auto essential = op.essential_traffic(shape).total();
  state.counters["GB/s"] = benchmark::Counter(double(essential) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  // On the host, the roof of the cache level the benchmark's traffic fits (kstudy/ceilings.hpp).
  const auto* roof =
      device ? kstudy::roof_for(g_ceilings, true, clock) : kstudy::host_roof_for(g_ceilings, double(essential), clock);
  if (roof && roof->bytes_per_second > 0) {
    state.counters["roof"] =
        benchmark::Counter(double(essential) / roof->bytes_per_second, benchmark::Counter::kIsIterationInvariantRate);
    exceeded(double(essential), *roof, roof->bytes_per_second);
  }
  // A compute-bound operation is quoted in flops against its measured compute ceiling too.
  if (const auto& name = op.info().compute_ceiling; !name.empty()) {
    const double flops = double(op.essential_flops(shape));
    state.counters["TFLOP/s"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
    if (const auto* roof = kstudy::find_ceiling(g_ceilings, name, clock); roof && roof->flops_per_second > 0) {
      state.counters["compute_roof"] =
          benchmark::Counter(flops / roof->flops_per_second, benchmark::Counter::kIsIterationInvariantRate);
      exceeded(flops, *roof, roof->flops_per_second);
    }
  }
  state.counters["modelled_MB"] = double(entry->info.traffic(shape).total()) / 1e6;
  state.SetLabel(label);
}

}  // namespace

int main(int argc, char** argv) {
  // Before Kokkos: a cuda build's Kokkos throws, uncaught, on a machine without a GPU.
  if (const auto reason = kstudy::kokkos_unavailable_reason(); !reason.empty()) {
    std::cerr << "kstudy_bench: no GPU is visible (" << reason
              << "); this cuda build cannot start Kokkos without one, not even for host variants, so nothing was run "
                 "or written; the cpu flavour's kstudy_bench times the host variants\n";
    return kstudy::exit_no_gpu;
  }
  kstudy::kokkos_session guard(argc, argv);
  std::string shapes_text, operations_text;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--shapes=", 9) == 0)
      shapes_text = argv[i] + 9;
    else if (std::strncmp(argv[i], "--operations=", 13) == 0)
      operations_text = argv[i] + 13;
    else
      rest.push_back(argv[i]);
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  std::vector<extents_t> shapes;
  std::vector<const kstudy::operation*> operations;
  try {
    shapes = parse_shapes(shapes_text);
    for (const auto& name : split(operations_text, ',')) {
      const auto* op = kstudy::operation_registry::instance().find(name);
      if (op == nullptr)
        throw std::invalid_argument("--operations: unknown operation '" + name + "' (see kstudy list)");
      operations.push_back(op);
    }
    if (operations.empty()) operations = kstudy::operation_registry::instance().all();
  } catch (const std::exception& e) {
    std::cerr << "kstudy_bench: " << e.what() << "\n";
    return 2;
  }

  // Build provenance in the JSON `context`, as an archive records it (src/measure/environment.cpp).
  // benchmark::AddCustomContext (google/benchmark PR 1137, 1.5.4 and later) is in Debian 12's 1.7.1 and in
  // the device's 1.8.3.
  benchmark::AddCustomContext("kstudy_version", kstudy::build_info::version);
  benchmark::AddCustomContext("flavour", kstudy::build_info::flavour);
  // The Kokkos this binary was built against (KOKKOS_VERSION is major * 10000 + minor * 100 + patch in 3.x and
  // 4.x): two builds of one commit are told apart by it, not by the folder their JSON was put in.
  benchmark::AddCustomContext("kokkos_version", std::to_string(KOKKOS_VERSION / 10000) + "." +
                                                    std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
                                                    std::to_string(KOKKOS_VERSION % 100));
  benchmark::AddCustomContext("git_commit", kstudy::build_info::git_commit);
  benchmark::AddCustomContext("git_dirty", kstudy::build_info::git_dirty);
  if (std::string(kstudy::build_info::git_dirty) == "true")
    benchmark::AddCustomContext("git_diff_sha256", kstudy::build_info::git_diff_sha256);
  kstudy::ceiling_options options;
  if (const char* small = std::getenv("KSTUDY_CEILING_BYTES"))
    options.device_bytes = options.host_bytes = options.transfer_bytes = std::atoll(small);
  g_ceilings = kstudy::measure_ceilings(options);
  // Context keys name the roof and its clock (a device roof is timed on both: CUDA events for what the
  // benchmark times with events, the host clock for what it times on the host).
  for (const auto& c : g_ceilings) {
    const std::string key = "ceiling_" + c.name + "_" + kstudy::to_string(c.clock);
    if (c.flops > 0) {  // a compute roof
      benchmark::AddCustomContext(key + "_TFLOPs", std::to_string(c.flops_per_second / 1e12));
      std::cerr << "ceiling " << c.name << " (" << kstudy::to_string(c.clock) << "): " << c.flops_per_second / 1e12
                << " TFLOP/s (" << c.flops << " flop in " << c.seconds * 1e6 << " us)\n";
      continue;
    }
    benchmark::AddCustomContext(key + "_GBps", std::to_string(c.bytes_per_second / 1e9));
    std::cerr << "ceiling " << c.name << " (" << kstudy::to_string(c.clock) << "): " << c.bytes_per_second / 1e9
              << " GB/s (" << c.bytes << " B in " << c.seconds * 1e6 << " us)\n";
  }
  for (const auto* op : operations) {
    std::vector<extents_t> points;
    for (const auto& s : shapes)
      if (s.size() == op->info().axes.size()) points.push_back(s);
    if (shapes.empty()) points = op->info().bench_points;
    for (const auto& extents : points)
      for (const auto* entry : kstudy::variant_registry::instance().of_operation(op->info().name)) {
        const std::string name = entry->info.id() + "/" + extents_text(extents);
        benchmark::RegisterBenchmark(name.c_str(), bench_variant, entry, extents)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->Repetitions(7)
            ->DisplayAggregatesOnly(true);
      }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_prepared.clear();  // free device buffers before Kokkos finalises
  g_inputs.clear();
  return 0;
}
