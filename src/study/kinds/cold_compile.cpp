// Kind `cold_compile`: every variant's first call in a fresh process (context creation, module load,
// first launch) beside its warm second call and Kokkos' initialisation, one process per variant per
// trial; and, where the operation has a kernel source compiled at run time in this build
// (operation::has_runtime_compile), its compilation + module load with an empty cache. The child is `kstudy
// __first_call VARIANT EXTENT...` (run_first_call).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "detail/runner_support.hpp"
#include "kstudy/experiment_fields.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/host_io.hpp"
#include "kstudy/platform/stop_signal.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/study.hpp"
#include "kstudy/timers.hpp"
#include "kstudy/variant_unavailable.hpp"

namespace kstudy {

// Padding of the padded layout in a first-call child, which takes no experiment definition.
constexpr std::int64_t k_first_call_row_padding = 3;

int run_first_call(const std::string& variant_id, const std::vector<std::int64_t>& extents, double initialize_seconds) {
  const auto* entry = variant_registry::instance().find(variant_id);
  if (!entry) throw std::invalid_argument("unknown variant '" + variant_id + "'");
  point_inputs inputs(operation_of(*entry), extents, k_first_call_row_padding, protocol{}.seed);
  const auto& data = inputs.data(entry->info.layout);
  inputs.reference();
  std::unique_ptr<variant> impl;
  try {
    impl = entry->make();
    impl->prepare(data, {});
  } catch (const variant_unavailable& ex) {  // this machine cannot run it (a Python rung's framework, no GPU)
    std::cout << nlohmann::json{{"variant", variant_id}, {"unavailable", ex.what()}}.dump() << std::endl;
    return 0;
  }
  impl->poison();
  wall_timer first;
  first.start();
  impl->run();
  const double first_seconds = first.seconds();
  host_outputs outputs(inputs.op(), data.shape());
  inputs.op().poison(outputs.spans());
  impl->download(outputs.spans());
  const auto gate = inputs.op().check(data, inputs.reference(), outputs.spans());
  wall_timer second;
  second.start();
  impl->run();
  const double second_seconds = second.seconds();
  const nlohmann::json r = {{"variant", variant_id},  {"initialize", initialize_seconds},
                            {"first", first_seconds}, {"second", second_seconds},
                            {"gate", gate.passed},    {"message", gate.message}};
  std::cout << r.dump() << std::endl;
  return 0;
}

namespace {

// The first call of each variant at one point, `trials` fresh processes each.
std::vector<sample_record> first_calls(replication_context& ctx, const sweep_point& p, int trial) {
  const auto& e = ctx.definition;
  std::vector<sample_record> samples;
  for (const auto* entry : select_variants(e)) {
    if (entry->info.operation != p.op->info().name) continue;
    const auto shape = p.op->shape(p.extents, entry->info.layout, k_first_call_row_padding);
    sample_record s;
    s.experiment = e.name;
    s.variant = entry->info.id();
    s.layout = std::string(to_string(entry->info.layout));
    s.memory_kind = entry->info.on_device ? "device" : "host";
    s.rows = shape.rows;
    s.features = shape.features;
    s.depth = shape.depth;
    s.point = p.index;
    s.replication = ctx.replication;
    s.trial = trial;
    s.timer = timer_kind::cold;
    if (!entry->info.unavailable.empty()) {  // known at registration: no child to start
      s.status = "skipped: " + entry->info.unavailable;
      samples.push_back(s);
      continue;
    }
    std::vector<std::string> args = {"__first_call", entry->info.id()};
    for (const auto x : p.extents) args.push_back(std::to_string(x));
    try {
      const auto r = detail::run_child_for_json(ctx.self_exe, args);
      if (r.contains("unavailable")) {  // found out in the child: skipped, as the sweep records it
        s.status = "skipped: " + r["unavailable"].get<std::string>();
        samples.push_back(s);
        continue;
      }
      s.gate = r["gate"].get<bool>() ? gate_verdict::passed : gate_verdict::failed;
      s.status = s.gate == gate_verdict::passed ? "ok" : "rejected";
      s.seconds = r["first"].get<double>();
      samples.push_back(s);
      auto warm = s;  // the same process's second call, for contrast
      warm.timer = entry->info.on_device ? timer_kind::resident_wall : timer_kind::host_wall;
      warm.seconds = r["second"].get<double>();
      samples.push_back(warm);
      auto init = s;
      init.variant = "kokkos_initialize";
      init.layout = "";
      init.gate = gate_verdict::not_gated;
      init.status = "ok";
      init.seconds = r["initialize"].get<double>();
      samples.push_back(init);
    } catch (const std::exception& ex) {
      s.status = std::string("failed: ") + ex.what();
      samples.push_back(s);
    }
  }
  return samples;
}

// Run-time compile and module load of the operation's kernel source, empty cache.
void append_runtime_compile(std::vector<sample_record>& samples, const operation& op, const experiment& e,
                            std::int64_t point, int replication, int trial) {
  const auto nvrtc = op.runtime_compile();
  sample_record c;
  c.experiment = e.name;
  c.variant = "nvrtc_" + nvrtc.source;
  c.point = point;
  c.replication = replication;
  c.trial = trial;
  c.timer = timer_kind::compile;
  c.seconds = nvrtc.compile_seconds;
  c.gate = gate_verdict::not_gated;
  c.status = "ok";
  samples.push_back(c);
  c.variant = "module_load_" + nvrtc.source;
  c.seconds = nvrtc.load_seconds;
  samples.push_back(c);
}

void run_cold(replication_context& ctx) {
  const auto& e = ctx.definition;
  if (ctx.replication == 0)
    for (const auto& name : e.operations)
      if (const auto* op = operation_registry::instance().find(name); op && !op->has_runtime_compile())
        std::cerr << "kstudy: " << e.name << ": operation " << name
                  << " has no kernel source compiled at run time in this build; no compile samples for it\n";
  for (const auto& p : sweep_points(e)) {
    if (ctx.done.count(p.index) || platform::stop_requested()) continue;
    auto keys = detail::point_keys(e, ctx.replication, p.index);
    const auto shape = p.op->shape(p.extents, p.op->info().layouts.front(), 0);
    keys.rows = shape.rows;
    keys.features = shape.features;
    keys.depth = shape.depth;
    measure_point(ctx, keys, [&] {
      if (ctx.replication == 0) {
        std::vector<variant_record> described;
        for (const auto* entry : select_variants(e))
          if (entry->info.operation == p.op->info().name)
            described.push_back(
                describe_variant(entry->info, p.op->shape(p.extents, entry->info.layout, k_first_call_row_padding), 0));
        ctx.sink.write_variants(described);
      }
      std::vector<sample_record> samples;
      for (int trial = 0; trial < e.protocol.trials; ++trial) {
        auto calls = first_calls(ctx, p, trial);
        samples.insert(samples.end(), calls.begin(), calls.end());
        if (p.op->has_runtime_compile()) append_runtime_compile(samples, *p.op, e, p.index, ctx.replication, trial);
      }
      ctx.sink.write_samples(samples);
    });
  }
}

experiment_kind cold_compile_kind() {
  experiment_kind kind;
  kind.name = "cold_compile";
  kind.description = "each variant's first call in a fresh process, Kokkos initialisation, NVRTC compile";
  kind.keys = experiment_fields::operation_field_keys();
  kind.takes_operations = true;
  kind.steady_state = false;  // first calls in fresh processes
  kind.parse = [](const nlohmann::json& doc, experiment& e, nlohmann::json& normalised) {
    experiment_fields::parse_operation_fields(doc, e, normalised);
    e.timers = {timer_kind::cold};
    normalised["timers"] = {"cold"};
  };
  kind.point_count = [](const experiment& e) { return std::int64_t(sweep_points(e).size()); };
  kind.check = [](const experiment& e) { select_variants(e); };
  kind.run = run_cold;
  return kind;
}

const experiment_kind_registration register_cold_compile{cold_compile_kind()};

}  // namespace
}  // namespace kstudy
