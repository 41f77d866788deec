// Kind `sweep`: the variants of one or more operations over the operations' problem points (and block
// sizes), each variant gated on fresh inputs before any of its timings is accepted, then timed at every
// boundary the experiment asks for:
//   resident      host_wall (host variants) / resident_wall + device_events (device variants)
//   one_shot      host input -> host outputs through upload, run, download, per host memory kind
//   pipelined     the operation's chunked, overlapped one-shot strategy (gated on its own outputs)
//   one_shot_alloc  a fresh instance: allocation, upload, run, download
//   energy        resident calls back to back through one region of at least the energy window
//                 (KSTUDY_ENERGY_WINDOW_MS, default 1000): time and, on a device, NVML energy per call
// in shuffled order per trial; an attribution pass per multi-kernel variant follows the trials. In cache
// mode cold every timed region starts from caches a flush evicted just before it, outside it. A device
// variant's regions are bracketed by readings of the GPU (energy counter, power, SM clock, clocks-event
// reasons), also outside them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include "detail/runner_support.hpp"
#include "kstudy/attribution.hpp"
#include "kstudy/cache_flush.hpp"
#include "kstudy/experiment_fields.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/fault_injection.hpp"
#include "kstudy/gpu_health.hpp"
#include "kstudy/host_io.hpp"
#include "kstudy/platform/stop_signal.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/precision.hpp"
#include "kstudy/probes.hpp"
#include "kstudy/study.hpp"
#include "kstudy/timers.hpp"
#include "kstudy/variant_unavailable.hpp"

namespace kstudy {
namespace {

using detail::stop_if_device_lost;

bool wants(const experiment& e, timer_kind t) {
  return std::find(e.timers.begin(), e.timers.end(), t) != e.timers.end();
}

// The energy window (timer energy): KSTUDY_ENERGY_WINDOW_MS, default 1 s, a positive number of milliseconds up to
// a minute; a malformed value is refused when the experiment is checked, before any measurement. 1 s because the
// H200's total-energy counter moves in steps: over 100 ms windows the power it implied ranged from 0 to 1,034 W
// for the same call (data/h200-2026-12-02-s12/energy_100ms.h5), so a window must span many steps.
double energy_window_seconds() {
  const char* text = std::getenv("KSTUDY_ENERGY_WINDOW_MS");
  if (text == nullptr || *text == '\0') return 1.0;
  char* end = nullptr;
  const double ms = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(ms > 0.0) || ms > 60000.0)
    throw experiment_error(std::string("KSTUDY_ENERGY_WINDOW_MS='") + text +
                           "': expected a number of milliseconds in (0, 60000]");
  return ms / 1000.0;
}

// Calls back to back that span `window` seconds at `one` seconds a call: at least 1, at most 10 million.
std::int64_t calls_for_window(double one, double window) {
  const double calls = std::ceil(window / std::max(one, 1e-9));
  return static_cast<std::int64_t>(std::clamp(calls, 1.0, 1e7));
}

std::int64_t device_bytes_free() {
#ifdef KOKKOS_ENABLE_CUDA
  return probes::device_memory_free();
#else
  return std::numeric_limits<std::int64_t>::max();
#endif
}

// Why a variant cannot be prepared at a point without running out of memory, or "" if it fits. Checked
// before anything of the point is allocated, against what is free now (earlier variants of the point
// are already allocated), keeping 10% in reserve. A device variant is checked against device memory
// first: a point too big for the GPU is skipped for that reason without touching host memory. Its
// footprint (variant_info::footprint, else its traffic model) counts every buffer it allocates.
std::string memory_shortfall(const registered_variant& v, const table_shape& shape, const point_inputs& inputs) {
  const auto& op = inputs.op();
  const std::int64_t own = footprint_bytes(v.info, shape);
  if (v.info.on_device) {
    const std::int64_t free = device_bytes_free();
    if (own > free / 10 * 9) return "needs " + std::to_string(own) + " device bytes, " + std::to_string(free) + " free";
  }
  // Host: the inputs (once per layout), the reference (once per point), the gate's copy of the outputs,
  // and a host variant's own buffers.
  std::int64_t needed = 0;
  for (const auto bytes : op.output_bytes(shape)) needed += bytes;
  if (!inputs.has_data(shape.layout)) needed += op.input_bytes(shape);
  if (!inputs.has_reference()) needed += op.reference_bytes(shape);
  if (!v.info.on_device) needed += own;
  const std::int64_t available = probes::host_memory_available();
  if (needed > available / 10 * 9)
    return "needs " + std::to_string(needed) + " host bytes, " + std::to_string(available) + " available";
  return "";
}

struct prepared_variant {
  const registered_variant* entry = nullptr;
  std::unique_ptr<variant> impl;
  gate_verdict gate = gate_verdict::not_gated;
  table_shape shape;
  std::int64_t bytes = 0;  // its traffic model for one resident run
  // Device memory the prepared and gated variant holds (variant_record::peak_device_bytes); -1 on a host.
  std::int64_t peak_device_bytes = -1;
  // Calls per energy region (timer energy), from one timed call in the variant's first trial at the point.
  std::int64_t energy_calls = 0;
};

// Host arrays of one-shot calls per (layout, memory kind), and the pipelines per (variant, memory kind).
struct one_shot_io {
  host_inputs inputs;
  host_outputs outputs;
};
struct gated_pipeline {
  std::unique_ptr<one_shot_pipeline> pipeline;
  bool passed = false;
};

// One point of a sweep in one replication: prepare and gate, warm up, trials, attribution, write.
class sweep_point_run {
 public:
  sweep_point_run(replication_context& ctx, const sweep_point& point, point_inputs& inputs, cache_flusher& flusher)
      : m_ctx(ctx), m_e(ctx.definition), m_point(point), m_inputs(inputs), m_flusher(flusher) {}

  // Each phase's wall time goes to the point's health row (kstudy::point_phases): the inputs and the reference
  // are made on first use, inside the first variant's preparation, and told apart by point_inputs' own clock.
  void run() {
    const auto made_before = m_inputs.spent();
    const double preparing = seconds_of([&] {
      prepare_variants();
      choose_memory_kinds();
    });
    const auto made = m_inputs.spent();
    const double inputs = made.inputs - made_before.inputs, reference = made.reference - made_before.reference;
    m_ctx.sink.add_phase_seconds(point_phase::inputs, inputs);
    m_ctx.sink.add_phase_seconds(point_phase::reference, reference);
    m_ctx.sink.add_phase_seconds(point_phase::prepare, std::max(0.0, preparing - inputs - reference));
    m_ctx.sink.add_phase_seconds(point_phase::warm_up, seconds_of([&] { warm_up(); }));
    m_ctx.sink.add_phase_seconds(point_phase::trials, seconds_of([&] { run_trials(); }));
    m_ctx.sink.add_phase_seconds(point_phase::recheck, seconds_of([&] { recheck_last_runs(); }));
    // Later replications run no attribution pass: 0 s, not "not timed".
    const bool first = m_ctx.replication == 0;
    m_ctx.sink.add_phase_seconds(point_phase::attribution,
                                 first ? seconds_of([&] { write_first_replication_tables(); }) : 0.0);
    m_ctx.sink.write_samples(m_samples);
    m_ctx.sink.flush();
  }

 private:
  template <class Phase>
  static double seconds_of(Phase&& phase) {
    wall_timer clock;
    clock.start();
    phase();
    return clock.seconds();
  }

  sample_record base_sample(const prepared_variant& v) const {
    sample_record s;
    s.experiment = m_e.name;
    s.variant = v.entry->info.id();
    s.layout = std::string(to_string(v.shape.layout));
    s.rows = v.shape.rows;
    s.features = v.shape.features;
    s.depth = v.shape.depth;
    s.pitch = v.shape.pitch;
    s.block_size = m_point.block_size;
    s.bytes = v.bytes;
    s.point = m_point.index;
    s.replication = m_ctx.replication;
    s.gate = v.gate;
    s.status = v.gate == gate_verdict::passed ? "ok" : "rejected";
    s.occupancy = v.impl ? v.impl->calculated_occupancy() : 0.0;
    s.timer = v.entry->info.on_device ? timer_kind::resident_wall : timer_kind::host_wall;
    s.memory_kind = v.entry->info.on_device ? "device" : "host";
    s.cache = m_point.cache;
    return s;
  }
  run_options options() const { return run_options{static_cast<int>(m_point.block_size)}; }

  // Each variant is prepared on the point's inputs and gated before anything of it is timed; one that
  // does not fit memory, or throws, gets one sample saying so and is left out of the point.
  void prepare_variants() {
    for (const auto* entry : select_variants(m_e)) {
      if (entry->info.operation != m_point.op->info().name) continue;
      if (m_point.block_size != 0 && !entry->info.tunable_block_size) continue;  // only tunable variants take one
      prepared_variant v;
      v.entry = entry;
      v.shape = m_inputs.shape(entry->info.layout);
      v.bytes = entry->info.traffic(v.shape).total();
      std::string failure;
      const auto shortfall = memory_shortfall(*entry, v.shape, m_inputs);
      if (!shortfall.empty())
        failure = "skipped: " + shortfall;
      else
        failure = gate(v);
      if (!failure.empty()) {
        auto s = base_sample(v);
        s.status = failure;  // gate: not_gated, the variant never got that far
        s.gate = gate_verdict::not_gated;
        s.trial = -1;
        m_samples.push_back(s);
      }
      m_variants.push_back(std::move(v));
    }
  }

  // Returns "" when the variant is ready to be timed (passed or rejected), else why it is not.
  std::string gate(prepared_variant& v) {
    const auto& id = v.entry->info.id();
    try {
      v.impl = v.entry->make();
      if (m_ctx.faults && m_ctx.faults->applies_to(id, m_point.index))
        v.impl = std::make_unique<fault_injecting_variant>(std::move(v.impl), m_ctx.faults->kind, id, *m_point.op,
                                                           m_ctx.faults->slowdown);
      // Earlier variants of the point stay allocated while this one is prepared, so the difference in free
      // device memory is this variant's: its buffers, library workspaces and scratch.
      const bool on_device = v.entry->info.on_device;
      const std::int64_t free_before = on_device ? device_bytes_free() : 0;
      const auto g = prepare_and_gate(*v.impl, *v.entry, m_inputs, options());
      if (on_device) v.peak_device_bytes = std::max<std::int64_t>(0, free_before - device_bytes_free());
      v.gate = g.passed ? gate_verdict::passed : gate_verdict::failed;
      m_gates.push_back({m_e.name, id, std::string(to_string(v.shape.layout)), v.shape.rows, v.shape.features,
                         v.shape.depth, m_point.block_size, g.passed, g.max_abs_error, g.max_relative_error, g.rtol,
                         g.atol, g.value_failures, g.discrete_mismatches, g.ambiguous, g.message});
      if (!g.passed)
        std::cerr << "\nkstudy: gate FAILED for " << id << " at point " << m_point.index << ": " << g.message << "\n";
      return "";
    } catch (const variant_unavailable& ex) {  // this machine cannot run it: not the variant's failure
      v.gate = gate_verdict::not_gated;
      v.impl.reset();
      std::cerr << "\nkstudy: " << id << " skipped at point " << m_point.index << ": " << ex.what() << "\n";
      return std::string("skipped: ") + ex.what();
    } catch (const std::exception& ex) {
      v.gate = gate_verdict::not_gated;
      v.impl.reset();
      stop_if_device_lost(base_sample(v), ex.what());  // before any destructor touches the device
      return std::string("failed: ") + ex.what();
    }
  }

  void choose_memory_kinds() {
    for (const auto& m : m_e.memory) {
      const auto kind = parse_host_memory(m);
      if (kind == host_memory::pinned && !pinned_memory_available()) continue;
      m_memory_kinds.push_back(kind);
    }
  }

  // A variant that throws (its own error or a CUDA error) gets one `failed` sample naming the error and is
  // dropped for the rest of the point, its state being unknown; the other variants go on. Where the CUDA
  // context did not survive, stop_if_device_lost() ends the replication instead.
  void fail_variant(prepared_variant& v, sample_record failed, const std::string& error) {
    failed.status = "failed: " + error;  // gate: still the point's verdict on the variant
    stop_if_device_lost(failed, error);
    std::cerr << "\nkstudy: " << v.entry->info.id() << " failed at point " << m_point.index << " ("
              << to_string(failed.timer) << ", trial " << failed.trial << "): " << error
              << "; the study goes on without it at this point\n";
    m_samples.push_back(std::move(failed));
    v.impl.reset();
  }

  void warm_up() {
    for (auto& v : m_variants) {
      if (!v.impl) continue;
      try {
        for (int w = 0; w < m_e.protocol.warmups; ++w) v.impl->run();
      } catch (const std::exception& ex) {
        auto failed = base_sample(v);
        failed.trial = -1;  // a warm-up
        fail_variant(v, failed, ex.what());
        continue;
      }
      // An injected fault fires in the first timed run, after the gate and the warm-ups.
      if (auto* injector = dynamic_cast<fault_injecting_variant*>(v.impl.get())) injector->arm();
    }
  }

  void run_trials() {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < m_variants.size(); ++i)
      if (m_variants[i].impl) order.push_back(i);
    std::mt19937_64 rng(m_e.protocol.seed ^ (std::uint64_t(m_ctx.replication) << 32) ^ std::uint64_t(m_point.index));
    const auto& protocol = m_e.protocol;
    // Adaptive sampling (kstudy/precision.hpp): past the exploration replications, trials go on past the least
    // until this replication's own samples are precise enough (or shown out of reach) or its share of the
    // point's wall time is spent.
    const bool extends = protocol.adaptive() && m_ctx.replication >= exploration_replications(protocol);
    const int most = extends ? protocol.max_trials : protocol.trials;
    const auto start = std::chrono::steady_clock::now();
    for (int trial = 0; trial < most; ++trial) {
      if (protocol.shuffle) std::shuffle(order.begin(), order.end(), rng);
      for (const auto i : order) run_trial(i, trial);
      if (extends && trial + 1 >= protocol.trials &&
          trials_done(m_samples, m_point.index, protocol,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()))
        break;
    }
  }

  // Every timing boundary the experiment asks for, for one variant in one trial.
  void run_trial(std::size_t i, int trial) {
    auto& v = m_variants[i];
    if (!v.impl) return;  // failed earlier at this point
    auto base = base_sample(v);
    base.trial = trial;
    sample_record current = base;  // what was being timed when an exception came, for the failed sample
    // A variant that times itself (a Python rung's worker) has no energy region (this process would read the
    // energy of the round trips between its calls too) and no one_shot_alloc (a fresh instance is a fresh
    // worker process); its one-shot calls come from the memory its worker keeps, pageable.
    const bool own_clocks = v.impl->times_itself();
    try {
      time_resident(v, base);
      if (wants(m_e, timer_kind::energy) && !own_clocks) time_energy(v, base);
      if (!v.entry->info.on_device) return;
      for (const auto kind : m_memory_kinds) {
        if (own_clocks && kind != host_memory::pageable) continue;
        current.memory_kind = std::string(to_string(kind));
        if (wants(m_e, timer_kind::one_shot)) time_one_shot(v, base, kind, current);
        if (wants(m_e, timer_kind::pipelined) && v.impl->queues_asynchronously())
          time_pipelined(i, base, kind, current);
        if (wants(m_e, timer_kind::one_shot_alloc) && !own_clocks) time_one_shot_alloc(v, base, kind, current);
      }
    } catch (const std::exception& ex) {
      fail_variant(v, current, ex.what());
    }
  }

  // Cold: the caches the region reads through are evicted now, just before it and outside it: the device's L2
  // for a device variant, the host's caches for a host variant and for the host side of a one-shot call.
  void flush_if_cold(const prepared_variant& v, sample_record& s, bool host_io) {
    if (m_point.cache != cache_mode::cold) return;
    const bool device = v.entry->info.on_device;
    const auto flushed = m_flusher.flush(!device || host_io, device, v.impl->stream());
    s.flush_bytes = flushed.bytes;
    s.flush_seconds = flushed.seconds;
  }
  // The GPU's readings around a device variant's timed region (outside it): energy, power, clocks, reasons.
  void open_gpu_window(const prepared_variant& v) {
    if (v.entry->info.on_device) m_ctx.sink.open_window();
  }
  void close_gpu_window(const prepared_variant& v, sample_record& s) {
    if (v.entry->info.on_device) record_window(s, m_ctx.sink.close_window());
  }

  void add_sample(sample_record s, timer_kind timer, std::string memory_kind, double seconds) {
    s.timer = timer;
    s.memory_kind = std::move(memory_kind);
    s.seconds = seconds;
    m_samples.push_back(std::move(s));
  }

  // The gate once more, on what the variant's last timed run left (its device outputs; every timed run
  // poisons them first): a variant that passed its gated run but goes wrong later (a race that shows
  // under repetition, state one run leaves for the next, a fault injected after the gate) has every sample
  // of the point rejected, like a variant that failed its gate. Untimed, after the trials.
  void recheck_last_runs() {
    for (auto& v : m_variants) {
      if (!v.impl || v.gate != gate_verdict::passed) continue;
      const auto& id = v.entry->info.id();
      gate_result g;
      try {
        host_outputs outputs(m_inputs.op(), v.shape);
        m_inputs.op().poison(outputs.spans());
        v.impl->download(outputs.spans());
        g = m_inputs.op().check(m_inputs.data(v.shape.layout), m_inputs.reference(), outputs.spans());
      } catch (const std::exception& ex) {
        auto failed = base_sample(v);
        failed.trial = -1;
        fail_variant(v, failed, std::string("re-checking the last timed run: ") + ex.what());
        continue;
      }
      if (g.passed) continue;
      v.gate = gate_verdict::failed;
      std::int64_t rejected = 0;
      for (auto& s : m_samples) {
        if (s.variant != id || s.status != "ok") continue;
        s.gate = gate_verdict::failed;
        s.status = "rejected";
        ++rejected;
      }
      std::cerr << "\nkstudy: gate FAILED for " << id << " at point " << m_point.index
                << " on the output of its last timed run (" << rejected << " samples rejected): " << g.message << "\n";
    }
  }

  // Resident: host clock through the fence, CUDA events on the variant's stream around the same run.
  void time_resident(prepared_variant& v, sample_record base) {
    const bool device = v.entry->info.on_device;
    v.impl->poison();  // before the flush: poisoning writes the outputs, which would leave them cached
    flush_if_cold(v, base, false);
    device_event_timer events(device && !v.impl->times_itself(), v.impl->stream());
    open_gpu_window(v);
    wall_timer wall;
    wall.start();
    run_between_events(*v.impl, events);
    double wall_seconds = wall.seconds();
    close_gpu_window(v, base);
    double event_seconds = events.available() ? events.seconds() : std::numeric_limits<double>::quiet_NaN();
    if (v.impl->times_itself()) {  // its own clocks, without the round trip to its worker
      const auto own = v.impl->last_call_seconds();
      wall_seconds = own.wall;
      event_seconds = own.device;
    }
    if (!device && wants(m_e, timer_kind::host_wall)) add_sample(base, timer_kind::host_wall, "host", wall_seconds);
    if (device && wants(m_e, timer_kind::resident_wall))
      add_sample(base, timer_kind::resident_wall, "device", wall_seconds);
    if (device && !std::isnan(event_seconds) && wants(m_e, timer_kind::device_events))
      add_sample(base, timer_kind::device_events, "device", event_seconds);
  }

  // Energy: NVML's total-energy counter advances in steps of milliseconds, far coarser than one call (a region of
  // 30 us saw it move in 10 of 288 samples on the H200), so one region holds enough calls back to back to span
  // the energy window, and the sample is the region's wall time and energy divided by its calls. The outputs
  // are poisoned once before the region (cold mode: flushed once), and the last call's outputs are re-checked
  // after the trials like every timed run's.
  void time_energy(prepared_variant& v, sample_record base) {
    if (v.energy_calls == 0) {
      wall_timer once;
      once.start();
      v.impl->run();
      v.energy_calls = calls_for_window(once.seconds(), energy_window_seconds());
    }
    v.impl->poison();
    flush_if_cold(v, base, false);
    open_gpu_window(v);
    wall_timer wall;
    wall.start();
    for (std::int64_t c = 0; c < v.energy_calls; ++c) v.impl->run();
    const double seconds = wall.seconds();
    close_gpu_window(v, base);
    const auto calls = static_cast<double>(v.energy_calls);
    base.energy_joules /= calls;  // NaN stays NaN: a host variant, or no energy counter
    add_sample(base, timer_kind::energy, v.entry->info.on_device ? "device" : "host", seconds / calls);
  }

  one_shot_io& io_for(const prepared_variant& v, host_memory kind) {
    auto& io = m_io[{v.shape.layout, kind}];
    if (io.inputs.spans().empty()) {
      io.inputs = host_inputs(m_inputs.data(v.shape.layout), kind);
      io.outputs = host_outputs(m_inputs.op(), v.shape, kind);
    }
    return io;
  }
  // Bytes crossing a one-shot call: the resident traffic plus the streamed inputs and the outputs.
  std::int64_t one_shot_bytes(const prepared_variant& v, one_shot_io& io) const {
    std::int64_t bytes = v.bytes + io.inputs.bytes();
    for (const auto& o : io.outputs.spans()) bytes += o.bytes;
    return bytes;
  }

  // One-shot: host inputs -> host-visible outputs, from one host memory kind.
  void time_one_shot(prepared_variant& v, sample_record base, host_memory kind, sample_record& current) {
    current.timer = timer_kind::one_shot;
    auto& io = io_for(v, kind);
    const auto inputs = io.inputs.spans(), outputs = io.outputs.spans();
    v.impl->poison();
    flush_if_cold(v, base, true);
    open_gpu_window(v);
    double seconds = 0.0;
    if (v.impl->times_itself()) {  // the sum of its three calls on its own clock
      v.impl->upload(inputs);
      seconds += v.impl->last_call_seconds().wall;
      v.impl->run();
      seconds += v.impl->last_call_seconds().wall;
      v.impl->download(outputs);
      seconds += v.impl->last_call_seconds().wall;
    } else {
      wall_timer t;
      t.start();
      v.impl->upload(inputs);
      v.impl->run();
      v.impl->download(outputs);
      seconds = t.seconds();
    }
    close_gpu_window(v, base);
    base.bytes = one_shot_bytes(v, io);
    add_sample(base, timer_kind::one_shot, std::string(to_string(kind)), seconds);
  }

  // The operation's pipelined strategy: built and gated once per (variant, memory kind), untimed.
  gated_pipeline& pipeline_for(std::size_t i, host_memory kind) {
    auto& g = m_pipelines[{i, kind}];
    if (!g.pipeline) {
      const auto& v = m_variants[i];
      const auto& data = m_inputs.data(v.shape.layout);
      g.pipeline = m_inputs.op().make_pipeline(*v.entry, data, kind, options());
      if (!g.pipeline) return g;
      auto& io = io_for(v, kind);
      m_inputs.op().poison(io.outputs.spans());
      g.pipeline->run(io.inputs.spans(), io.outputs.spans());
      g.passed = m_inputs.op().check(data, m_inputs.reference(), io.outputs.spans()).passed;
      if (!g.passed) std::cerr << "\nkstudy: gate FAILED for the pipelined one-shot of " << v.entry->info.id() << "\n";
    }
    return g;
  }

  void time_pipelined(std::size_t i, sample_record base, host_memory kind, sample_record& current) {
    current.timer = timer_kind::pipelined;
    auto& v = m_variants[i];
    auto& g = pipeline_for(i, kind);
    if (!g.pipeline) return;  // the operation has no pipelined strategy
    auto& io = io_for(v, kind);
    const auto inputs = io.inputs.spans(), outputs = io.outputs.spans();  // built outside the timed region
    flush_if_cold(v, base, true);
    open_gpu_window(v);
    wall_timer t;
    t.start();
    g.pipeline->run(inputs, outputs);
    const double seconds = t.seconds();
    close_gpu_window(v, base);
    base.bytes = one_shot_bytes(v, io);
    base.gate = v.gate == gate_verdict::passed && g.passed ? gate_verdict::passed : gate_verdict::failed;
    base.status = base.gate == gate_verdict::passed ? "ok" : "rejected";
    add_sample(base, timer_kind::pipelined, std::string(to_string(kind)), seconds);
  }

  // A fresh instance: allocation, the inputs' one upload (prepare copies them from the generated inputs, which
  // live in pageable memory), run and download. Timed from pageable memory only: prepare takes its inputs from
  // the problem, so a second upload from page-locked buffers would time two copies instead of one.
  void time_one_shot_alloc(prepared_variant& v, sample_record base, host_memory kind, sample_record& current) {
    if (kind != host_memory::pageable) return;
    current.timer = timer_kind::one_shot_alloc;
    auto& io = io_for(v, kind);
    const auto& data = m_inputs.data(v.shape.layout);
    const auto outputs = io.outputs.spans();  // built outside the timed region
    flush_if_cold(v, base, true);
    open_gpu_window(v);
    wall_timer t;
    t.start();
    {
      auto fresh = v.entry->make();
      fresh->prepare(data, options());
      fresh->run();
      fresh->download(outputs);
    }
    const double seconds = t.seconds();
    close_gpu_window(v, base);
    base.bytes = one_shot_bytes(v, io);
    add_sample(base, timer_kind::one_shot_alloc, std::string(to_string(kind)), seconds);
  }

  // After (never among) the timed trials: per-kernel cost of multi-kernel variants; then the gates and
  // the variants table, once per point.
  void write_first_replication_tables() {
    std::vector<attribution_record> attribution;
    for (auto& v : m_variants) {
      if (!v.impl || v.entry->info.kernels_launched <= 1) continue;
      try {
        auto rows = attribute_kernels(*v.impl, m_e.name, v.entry->info.id(), v.shape, std::max(1, m_e.protocol.trials));
        attribution.insert(attribution.end(), rows.begin(), rows.end());
      } catch (const std::exception& ex) {
        auto where = base_sample(v);
        where.trial = -1;
        stop_if_device_lost(where, ex.what());
        std::cerr << "\nkstudy: the attribution pass of " << v.entry->info.id() << " failed (" << ex.what()
                  << "); no attribution rows for it at this point\n";
      }
    }
    m_ctx.sink.write_attribution(attribution);
    m_ctx.sink.write_gates(m_gates);
    std::vector<variant_record> described;
    for (const auto& v : m_variants) {
      auto r = describe_variant(v.entry->info, v.shape, m_point.block_size);
      r.peak_device_bytes = v.peak_device_bytes;
      if (v.impl)
        for (const auto& [name, value] : v.impl->tuned_parameters())
          r.tuned_parameters += (r.tuned_parameters.empty() ? "" : ",") + name + "=" + std::to_string(value);
      described.push_back(std::move(r));
    }
    m_ctx.sink.write_variants(described);
  }

  replication_context& m_ctx;
  const experiment& m_e;
  const sweep_point& m_point;
  point_inputs& m_inputs;
  cache_flusher& m_flusher;
  std::vector<prepared_variant> m_variants;
  std::vector<sample_record> m_samples;
  std::vector<gate_record> m_gates;
  std::vector<host_memory> m_memory_kinds;
  std::map<std::pair<table_layout, host_memory>, one_shot_io> m_io;
  std::map<std::pair<std::size_t, host_memory>, gated_pipeline> m_pipelines;
};

void run_sweep(replication_context& ctx) {
  const auto& e = ctx.definition;
  const auto points = sweep_points(e);
  detail::progress_line progress(e.name + " rep " + std::to_string(ctx.replication), std::int64_t(points.size()),
                                 ctx.quiet);
  // The inputs of one problem point, kept while consecutive points share it (the block-size axis varies
  // fastest), so a 4 GiB table is generated once, not once per block size.
  std::unique_ptr<point_inputs> inputs;
  cache_flusher flusher;  // its buffers are allocated at the first cold point and kept for the rest
  for (const auto& p : points) {
    if (platform::stop_requested()) break;
    if (!ctx.done.count(p.index)) {
      if (!inputs || &inputs->op() != p.op || inputs->extents() != p.extents)
        inputs = std::make_unique<point_inputs>(*p.op, p.extents, e.row_padding, e.protocol.seed);
      auto keys = detail::point_keys(e, ctx.replication, p.index);
      const auto shape = p.op->shape(p.extents, p.op->info().layouts.front(), 0);
      keys.rows = shape.rows;
      keys.features = shape.features;
      keys.depth = shape.depth;
      keys.block_size = p.block_size;
      measure_point(ctx, keys, [&] { sweep_point_run(ctx, p, *inputs, flusher).run(); });
    }
    progress.step(p.index + 1);
  }
}

experiment_kind sweep_kind() {
  experiment_kind kind;
  kind.name = "sweep";
  kind.description = "the variants of one or more operations over their problem axes, gated, at every timing boundary";
  kind.keys = experiment_fields::operation_field_keys();
  kind.keys.insert("cache");
  kind.takes_operations = true;
  kind.parse = [](const nlohmann::json& doc, experiment& e, nlohmann::json& normalised) {
    experiment_fields::parse_operation_fields(doc, e, normalised);
    experiment_fields::parse_cache_field(doc, e, normalised);
  };
  kind.point_count = [](const experiment& e) { return std::int64_t(sweep_points(e).size()); };
  kind.check = [](const experiment& e) {
    select_variants(e);
    if (wants(e, timer_kind::energy)) energy_window_seconds();  // refuses a malformed window before measuring
  };
  kind.run = run_sweep;
  return kind;
}

const experiment_kind_registration register_sweep{sweep_kind()};

}  // namespace
}  // namespace kstudy
