// The toy experiment kind of docs/extending.md: `host_fill` times std::fill of a host buffer of each
// size in "sizes_bytes" (a calibration probe: nothing to gate). Its parameters, their validation, its points and
// its runner are here, registered beside them; nothing under src/ lists it.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kstudy/experiment_fields.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/gpu_health.hpp"
#include "kstudy/timers.hpp"

namespace toy {
namespace {

// The kind's own keys, declared beside it: the parser sets them on the experiment, the point count and the runner
// read them back (kstudy::experiment::parameters).
struct host_fill_parameters {
  std::vector<std::int64_t> sizes_bytes;
};

void parse_host_fill(const nlohmann::json& doc, kstudy::experiment& e, nlohmann::json& normalised) {
  using namespace kstudy::experiment_fields;
  if (!doc.contains("sizes_bytes")) fail(e.source, "sizes_bytes", "required for kind host_fill");
  host_fill_parameters p;
  p.sizes_bytes = integer_axis(doc["sizes_bytes"], e.source, "sizes_bytes");
  e.timers = {kstudy::timer_kind::host_wall};
  normalised["sizes_bytes"] = p.sizes_bytes;  // the normalised definition: what the fingerprint hashes
  e.set_parameters(std::move(p));
}

void run_host_fill(kstudy::replication_context& ctx) {
  const auto& e = ctx.definition;
  const auto& sizes = e.parameters<host_fill_parameters>().sizes_bytes;
  for (std::int64_t point = 0; point < std::int64_t(sizes.size()); ++point) {
    if (ctx.done.count(point)) continue;
    const auto bytes = sizes[std::size_t(point)];
    kstudy::health_record keys;
    keys.experiment = e.name;
    keys.point = point;
    keys.replication = ctx.replication;
    keys.bytes = bytes;
    kstudy::measure_point(ctx, keys, [&] {
      std::vector<unsigned char> buffer(static_cast<std::size_t>(bytes));
      std::vector<kstudy::sample_record> samples;
      for (int trial = -e.protocol.warmups; trial < e.protocol.trials; ++trial) {
        kstudy::wall_timer t;
        t.start();
        std::fill(buffer.begin(), buffer.end(), static_cast<unsigned char>(trial));
        const double seconds = t.seconds();
        if (trial < 0) continue;  // a warm-up
        kstudy::sample_record s;
        s.experiment = e.name;
        s.variant = "host_fill";
        s.memory_kind = "host";
        s.bytes = bytes;
        s.point = point;
        s.replication = ctx.replication;
        s.trial = trial;
        s.timer = kstudy::timer_kind::host_wall;
        s.seconds = seconds;
        s.gate = kstudy::gate_verdict::not_gated;  // a probe computes nothing to check
        s.status = "ok";
        samples.push_back(s);
      }
      ctx.sink.write_samples(samples);
    });
  }
}

kstudy::experiment_kind host_fill_kind() {
  kstudy::experiment_kind kind;
  kind.name = "host_fill";
  kind.description = "std::fill of a host buffer per size (the toy kind of docs/extending.md)";
  kind.keys = {"sizes_bytes"};
  kind.parse = parse_host_fill;
  kind.point_count = [](const kstudy::experiment& e) {
    return std::int64_t(e.parameters<host_fill_parameters>().sizes_bytes.size());
  };
  kind.run = run_host_fill;
  return kind;
}

const kstudy::experiment_kind_registration register_host_fill{host_fill_kind()};

}  // namespace
}  // namespace toy
