// Kind `launch`: launch-overhead probes (an empty kernel through each path), one point per probe.
#include "detail/runner_support.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/probes.hpp"

namespace kstudy {
namespace {

void run_launch(replication_context& ctx) {
  const auto& e = ctx.definition;
  std::int64_t point = 0;
  for (const auto& probe : probes::launch_probe_names()) {
    const std::int64_t this_point = point++;
    if (ctx.done.count(this_point)) continue;
    sample_record base;
    base.experiment = e.name;
    base.variant = probe;
    base.point = this_point;
    base.replication = ctx.replication;
    base.timer = timer_kind::launch;
    measure_point(ctx, detail::point_keys(e, ctx.replication, this_point), [&] {
      detail::write_probe_point(ctx.sink, base,
                                probes::time_launch_probe(probe, e.protocol.warmups, e.protocol.trials));
    });
  }
}

experiment_kind launch_kind() {
  experiment_kind kind;
  kind.name = "launch";
  kind.description = "launch overhead: an empty kernel through each launch path";
  kind.parse = [](const nlohmann::json&, experiment& e, nlohmann::json&) { e.timers = {timer_kind::launch}; };
  kind.point_count = [](const experiment&) { return std::int64_t(probes::launch_probe_names().size()); };
  kind.run = run_launch;
  return kind;
}

const experiment_kind_registration register_launch{launch_kind()};

}  // namespace
}  // namespace kstudy
