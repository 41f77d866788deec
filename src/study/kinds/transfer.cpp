// Kind `transfer`: host<->device copy bandwidth over sizes, directions and host memory kinds (allocation
// excluded); the calibration the one-shot timings are read against. With "pinning", also what making
// each size page-locked costs (cudaHostAlloc, cudaHostRegister of an existing buffer): the price a pinned
// one-shot must earn back. Copy points come first, pinning points after them (stable for --resume).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "detail/runner_support.hpp"
#include "kstudy/experiment_fields.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/platform/stop_signal.hpp"
#include "kstudy/probes.hpp"
#include "kstudy/views/host_memory.hpp"

namespace kstudy {
namespace {

// The kind's own keys (experiment::parameters). Its "memory" is the host buffers copied from and to, read here
// alone: the operation kinds' experiment::memory shares the key, not the field.
struct transfer_parameters {
  std::vector<std::int64_t> sizes_bytes;
  std::vector<std::string> memory{"pageable"}, directions{"h2d", "d2h"};
  std::vector<std::string> pinning;  // page-locking calls timed per size (host_alloc, host_register)
};

void parse_transfer(const nlohmann::json& doc, experiment& e, nlohmann::json& normalised) {
  using namespace experiment_fields;
  transfer_parameters p;
  if (!doc.contains("sizes_bytes")) fail(e.source, "sizes_bytes", "required for kind transfer");
  p.sizes_bytes = integer_axis(doc["sizes_bytes"], e.source, "sizes_bytes");
  if (doc.contains("memory")) p.memory = string_axis(doc["memory"], e.source, "memory", {"pageable", "pinned"});
  if (doc.contains("directions")) p.directions = string_axis(doc["directions"], e.source, "directions", {"h2d", "d2h"});
  if (doc.contains("pinning"))
    p.pinning = string_axis(doc["pinning"], e.source, "pinning", {"host_alloc", "host_register"});
  e.timers = {timer_kind::transfer};
  if (!p.pinning.empty()) e.timers.push_back(timer_kind::pin);
  normalised["sizes_bytes"] = p.sizes_bytes;
  normalised["memory"] = p.memory;
  normalised["directions"] = p.directions;
  if (!p.pinning.empty()) normalised["pinning"] = p.pinning;
  e.set_parameters(std::move(p));
}

std::int64_t copy_points(const transfer_parameters& p) {
  return std::int64_t(p.sizes_bytes.size() * p.memory.size() * p.directions.size());
}

std::int64_t transfer_points(const experiment& e) {
  const auto& p = e.parameters<transfer_parameters>();
  return copy_points(p) + std::int64_t(p.sizes_bytes.size() * p.pinning.size());
}

// One point's samples from a probe's trial times, or one failed sample naming the error.
template <class Probe>
std::vector<sample_record> probe_samples(const sample_record& base, Probe&& probe) {
  std::vector<sample_record> samples;
  try {
    const auto seconds = probe();
    for (std::size_t t = 0; t < seconds.size(); ++t) {
      auto s = base;
      s.trial = static_cast<int>(t);
      s.seconds = seconds[t];
      samples.push_back(s);
    }
  } catch (const std::exception& ex) {
    detail::stop_if_device_lost(base, ex.what());
    auto failed = base;
    failed.status = std::string("failed: ") + ex.what();
    failed.trial = -1;
    samples.push_back(failed);
  }
  return samples;
}

void run_pinning(replication_context& ctx, detail::progress_line& progress) {
  const auto& e = ctx.definition;
  const auto& p = e.parameters<transfer_parameters>();
  std::int64_t point = copy_points(p);
  for (const auto bytes : p.sizes_bytes)
    for (const auto& name : p.pinning) {
      const std::int64_t this_point = point++;
      if (platform::stop_requested()) return;
      if (ctx.done.count(this_point)) continue;
      const auto call = probes::parse_pin_call(name);
      sample_record base;
      base.experiment = e.name;
      base.variant = probes::to_string(call);
      base.memory_kind = "pinned";
      base.bytes = bytes;
      base.point = this_point;
      base.replication = ctx.replication;
      base.timer = timer_kind::pin;
      base.gate = gate_verdict::not_gated;  // nothing computed to check
      base.status = "ok";
      auto keys = detail::point_keys(e, ctx.replication, this_point);
      keys.bytes = bytes;
      keys.memory_kind = "pinned";
      measure_point(ctx, keys, [&] {
        ctx.sink.write_samples(probe_samples(
            base, [&] { return probes::time_pinning(bytes, call, e.protocol.warmups, e.protocol.trials); }));
      });
      progress.step(this_point + 1);
    }
}

void run_transfer(replication_context& ctx) {
  const auto& e = ctx.definition;
  const auto& p = e.parameters<transfer_parameters>();
  std::int64_t index = 0;
  detail::progress_line progress(e.name, transfer_points(e), ctx.quiet);
  for (const auto bytes : p.sizes_bytes)
    for (const auto& memory : p.memory)
      for (const auto& direction : p.directions) {
        const std::int64_t point = index++;
        if (platform::stop_requested()) return;
        if (ctx.done.count(point)) continue;
        sample_record base;
        base.experiment = e.name;
        base.variant = "transfer";
        base.memory_kind = memory;
        base.direction = direction;
        base.bytes = bytes;
        base.point = point;
        base.replication = ctx.replication;
        base.timer = timer_kind::transfer;
        base.gate = gate_verdict::not_gated;  // a copy computes nothing to check
        base.status = "ok";
        auto keys = detail::point_keys(e, ctx.replication, point);
        keys.bytes = bytes;
        keys.memory_kind = memory;
        keys.direction = direction;
        measure_point(ctx, keys, [&] {
          ctx.sink.write_samples(probe_samples(base, [&] {
            return probes::time_transfers(bytes, parse_host_memory(memory), direction == "h2d", e.protocol.warmups,
                                          e.protocol.trials);
          }));
        });
        progress.step(point + 1);
      }
  run_pinning(ctx, progress);
}

experiment_kind transfer_kind() {
  experiment_kind kind;
  kind.name = "transfer";
  kind.description = "host<->device copy bandwidth by size, direction and host memory kind";
  kind.keys = {"sizes_bytes", "memory", "directions", "pinning"};
  kind.parse = parse_transfer;
  kind.point_count = transfer_points;
  kind.run = run_transfer;
  kind.roof = [](const summary_record& point, const std::vector<ceiling_record>& ceilings) {
    // A copy against the probe of its own direction and memory kind (h2d_pinned, d2h_pageable, ...).
    return find_ceiling(ceilings, point.direction + "_" + point.memory_kind, clock_of(point.timer));
  };
  return kind;
}

const experiment_kind_registration register_transfer{transfer_kind()};

}  // namespace
}  // namespace kstudy
