#include "kstudy/study.hpp"

#include <Kokkos_Core.hpp>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "kstudy/archive.hpp"
#include "kstudy/attribution.hpp"
#include "kstudy/ceilings.hpp"
#include "kstudy/environment.hpp"
#include "kstudy/fault_injection.hpp"
#include "kstudy/gate.hpp"
#include "kstudy/gpu_health.hpp"
#include "kstudy/pipeline.hpp"
#include "kstudy/platform/process.hpp"
#include "kstudy/platform/stop_signal.hpp"
#include "kstudy/probes.hpp"
#include "kstudy/sink.hpp"
#include "kstudy/timers.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/views/data_generator.hpp"
#include "kstudy/views/host_buffers.hpp"
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
#include "kstudy/cuda_escape.hpp"
#endif

namespace kstudy {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// HDF5 cannot recover from a write that fails half way (a full disk or a file-size limit leaves the
// file truncated and unreadable), so every write is preceded by a check that the archive's file system
// and the process's file-size limit leave room for it plus a margin; short of room, the run stops
// cleanly before the write and --resume completes it later.
class out_of_room : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr int exit_out_of_room = 75;  // EX_TEMPFAIL: try again when there is room
// A sticky CUDA error (illegal address, device-side trap) destroyed the replication's CUDA context: the
// finished points are in the archive, the run stopped (EX_UNAVAILABLE: the device is not usable).
constexpr int exit_device_lost = 69;

void ensure_room(const std::string& archive, std::int64_t bytes) {
  static const std::int64_t margin = [] {
    const char* env = std::getenv("KSTUDY_WRITE_MARGIN_BYTES");  // tests shrink it
    return env ? std::atoll(env) : std::int64_t(16) << 20;
  }();
  const std::int64_t needed = bytes + margin;
  std::error_code ec;
  const auto directory = fs::absolute(archive, ec).parent_path();
  struct statvfs st {};
  if (statvfs(directory.c_str(), &st) == 0) {
    const std::int64_t available = std::int64_t(st.f_bavail) * std::int64_t(st.f_frsize);
    if (available < needed)
      throw out_of_room(directory.string() + " has " + std::to_string(available) + " bytes free; the next write needs " +
                        std::to_string(needed) + " (with margin)");
  }
  struct rlimit limit {};
  if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const auto size = fs::file_size(archive, ec);
    const std::int64_t current = ec ? 0 : std::int64_t(size);
    if (current + needed > std::int64_t(limit.rlim_cur))
      throw out_of_room("the process's file-size limit (" + std::to_string(limit.rlim_cur) + " bytes) would not hold " +
                        archive + " (" + std::to_string(current) + " bytes) plus the next write");
  }
}

// The archive sink with the room check in front of every write.
class room_checked_sink : public result_sink {
 public:
  room_checked_sink(result_sink& inner, std::string path) : m_inner(inner), m_path(std::move(path)) {}
  void begin(const run_metadata& m) override { m_inner.begin(m); }
  void begin_experiment(const experiment_record& e) override { m_inner.begin_experiment(e); }
  void write_samples(const std::vector<sample_record>& r) override {
    check(r.size());
    m_inner.write_samples(r);
  }
  void write_gates(const std::vector<gate_record>& r) override {
    check(r.size());
    m_inner.write_gates(r);
  }
  void write_ceilings(const std::vector<ceiling_record>& r) override {
    check(r.size());
    m_inner.write_ceilings(r);
  }
  void write_summaries(const std::vector<summary_record>& r) override {
    check(r.size());
    m_inner.write_summaries(r);
  }
  void write_attribution(const std::vector<attribution_record>& r) override {
    check(r.size());
    m_inner.write_attribution(r);
  }
  void write_health(const std::vector<health_record>& r) override {
    check(r.size());
    m_inner.write_health(r);
  }
  void write_variants(const std::vector<variant_record>& r) override {
    check(r.size());
    m_inner.write_variants(r);
  }
  void write_profile(const std::vector<profile_record>& r,
                     const std::map<std::string, std::string>& attributes) override {
    check(r.size() + 1);  // the attributes take about a record's room
    m_inner.write_profile(r, attributes);
  }
  void flush() override { m_inner.flush(); }
  void end_experiment(const std::string& name) override { m_inner.end_experiment(name); }
  void finish() override { m_inner.finish(); }

 private:
  // A record takes well under 1 KiB even with its strings; HDF5 allocates whole chunks besides.
  void check(std::size_t records) { ensure_room(m_path, std::int64_t(records) * 1024); }
  result_sink& m_inner;
  std::string m_path;
};

// Padding of the padded layout in a first-call (cold) child, which takes no experiment definition.
constexpr std::int64_t k_first_call_row_padding = 3;

bool wants(const experiment& e, timer_kind t) { return std::find(e.timers.begin(), e.timers.end(), t) != e.timers.end(); }


// Device bytes a variant needs for a shape: its traffic model counts every buffer it touches.
std::int64_t device_bytes_needed(const registered_variant& v, const table_shape& shape) {
  const auto t = v.info.traffic(shape);
  return t.total();
}

std::int64_t device_bytes_free() {
#ifdef KOKKOS_ENABLE_CUDA
  return probes::device_memory_free();
#else
  return std::numeric_limits<std::int64_t>::max();
#endif
}

// Host bytes of the generated input table of a shape (x and the three feature vectors).
std::int64_t dataset_bytes(const table_shape& shape) {
  return (shape.allocated_elements() + 3 * shape.features) * std::int64_t(sizeof(float));
}

// Why a variant cannot be prepared at a point without running out of memory, or "" if it fits. Checked
// before anything of the point is allocated, against what is free now (earlier variants of the point
// are already allocated), keeping 10% in reserve. A device variant is checked against device memory
// first: a point too big for the GPU is skipped for that reason without touching host memory.
std::string memory_shortfall(const registered_variant& v, const table_shape& shape, bool dataset_allocated,
                             bool reference_computed) {
  if (v.info.on_device) {
    const std::int64_t needed = device_bytes_needed(v, shape), free = device_bytes_free();
    if (needed > free / 10 * 9)
      return "needs " + std::to_string(needed) + " device bytes, " + std::to_string(free) + " free";
  }
  // Host: the input table (once per layout), the float64 reference (score, magnitude, flag per row, once
  // per point), the gate's copy of the outputs, and a host variant's own buffers.
  std::int64_t needed = shape.rows * std::int64_t(sizeof(float) + 1);
  if (!dataset_allocated) needed += dataset_bytes(shape);
  if (!reference_computed) needed += shape.rows * std::int64_t(2 * sizeof(double) + 1);
  if (!v.info.on_device) needed += device_bytes_needed(v, shape);
  const std::int64_t available = probes::host_memory_available();
  if (needed > available / 10 * 9)
    return "needs " + std::to_string(needed) + " host bytes, " + std::to_string(available) + " available";
  return "";
}

class progress_line {
 public:
  progress_line(std::string label, std::int64_t total, bool quiet) : m_label(std::move(label)), m_total(total), m_quiet(quiet) {
    m_timer.start();
  }
  void step(std::int64_t done) const {
    if (m_quiet) return;
    const double elapsed = m_timer.seconds();
    const double eta = done > 0 ? elapsed / double(done) * double(m_total - done) : 0.0;
    std::fprintf(stderr, "\r%s: point %lld of %lld, %.1f s elapsed, ~%.0f s left   ", m_label.c_str(),
                 static_cast<long long>(done), static_cast<long long>(m_total), elapsed, eta);
    if (done == m_total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  std::string m_label;
  std::int64_t m_total;
  bool m_quiet;
  wall_timer m_timer;
};

// ------------------------------------------------------------------------------------------------
// One replication of a scoring experiment (runs in its own process).

struct prepared_variant {
  const registered_variant* entry;
  std::unique_ptr<scoring_variant> impl;
  gate_verdict gate = gate_verdict::not_gated;
  std::string failure;  // non-empty: no samples can be taken
  table_shape shape;
  std::int64_t bytes = 0;
};

sample_record base_sample(const experiment& e, const point_spec& p, const prepared_variant& v, int replication) {
  sample_record s;
  s.experiment = e.name;
  s.variant = v.entry->info.id();
  s.layout = std::string(to_string(v.shape.layout));
  s.rows = p.rows;
  s.features = p.features;
  s.pitch = v.shape.pitch;
  s.block_size = p.block_size;
  s.bytes = v.bytes;
  s.point = p.index;
  s.replication = replication;
  s.gate = v.gate;
  s.status = v.gate == gate_verdict::passed ? "ok" : "rejected";
  s.occupancy = v.impl ? v.impl->calculated_occupancy() : 0.0;
  return s;
}

// ------------------------------------------------------------------------------------------------
// A lost CUDA context. Nothing that owns device memory may be destroyed afterwards (Kokkos fences in
// destructors throw, and a destructor that throws terminates the process), so the replication does not
// unwind: it records the fault, closes the archive and exits at once.

struct open_archive {
  health_guarded_sink* sink = nullptr;
  std::string path;
  std::string experiment;
};
open_archive g_open_archive;

// The point being run is not finished: its held records are dropped and one `aborted` row (trial -1)
// records the fault; skipped_points() does not count it, so --resume runs the point again.
[[noreturn]] void stop_for_lost_device(sample_record marker, const std::string& lost, const std::string& error) {
  marker.status = "aborted: CUDA context lost (" + lost + "): " + error;
  marker.trial = -1;
  marker.gate = gate_verdict::not_gated;  // the point's gate rows are dropped with its other records
  try {
    if (auto* sink = g_open_archive.sink) {
      sink->discard_point_records();
      sink->write_samples({marker});
      sink->flush();
      sink->end_experiment(g_open_archive.experiment);
      sink->finish();
    }
  } catch (const std::exception& ex) {
    std::cerr << "\nkstudy: the fault could not be recorded in the archive: " << ex.what() << "\n";
  }
  std::cerr << "\nkstudy: " << marker.variant << " at point " << marker.point << ": the CUDA context was lost (" << lost
            << ": " << error << "). The run stops; finished points are in " << g_open_archive.path
            << ". Check the GPU (nvidia-smi), then complete the archive with kstudy run --resume.\n";
  std::fflush(nullptr);
  std::_Exit(exit_device_lost);
}

// After an exception from device work: returns if the CUDA context survived, else stops the replication.
void stop_if_device_lost(const sample_record& where, const std::string& error) {
  std::string lost;
  if (probes::device_context_lost(lost)) stop_for_lost_device(where, lost, error);
}

// The generated inputs of one table shape and their float64 reference, kept while consecutive points
// share the shape (the block-size axis varies fastest), so a 4 GiB table is generated once, not once
// per block size. Other layouts are copies of the first one generated.
struct shape_inputs {
  std::int64_t rows = -1, features = -1;
  std::map<table_layout, std::unique_ptr<host_dataset>> datasets;
  std::unique_ptr<reference_result> reference;

  void keep_only(std::int64_t r, std::int64_t f) {
    if (r == rows && f == features) return;
    datasets.clear();
    reference.reset();
    rows = r;
    features = f;
  }
};

void run_scoring_point(const experiment& e, const point_spec& p, int replication, result_sink& sink,
                       const std::optional<fault_plan>& faults, shape_inputs& inputs) {
  const auto selected = select_variants(e);
  dataset_options data_options;
  data_options.seed = e.protocol.seed;
  inputs.keep_only(p.rows, p.features);
  auto& datasets = inputs.datasets;
  const auto dataset_for = [&](table_layout layout) -> const host_dataset& {
    auto& slot = datasets[layout];
    if (!slot) {
      const auto shape = make_shape(p.rows, p.features, layout, e.row_padding);
      const auto other = std::find_if(datasets.begin(), datasets.end(), [](const auto& d) { return d.second != nullptr; });
      slot = other != datasets.end() ? std::make_unique<host_dataset>(other->second->with_layout(layout, e.row_padding))
                                     : std::make_unique<host_dataset>(shape, data_options);
    }
    return *slot;
  };
  auto& reference = inputs.reference;

  std::vector<sample_record> samples;
  std::vector<gate_record> gates;
  std::vector<prepared_variant> variants;
  for (const auto* entry : selected) {
    if (p.block_size != 0 && !entry->info.tunable_block_size) continue;  // a block-size axis only applies to tunable variants
    prepared_variant v{entry, nullptr};
    v.shape = make_shape(p.rows, p.features, entry->info.layout, e.row_padding);
    v.bytes = entry->info.traffic(v.shape).total();
    const auto shortfall = memory_shortfall(*entry, v.shape, datasets.count(entry->info.layout) && datasets.at(entry->info.layout),
                                            reference != nullptr);
    if (!shortfall.empty()) {
      v.failure = "skipped: " + shortfall;
    } else {
      try {
        const auto& data = dataset_for(entry->info.layout);
        if (!reference) reference = std::make_unique<reference_result>(compute_reference(data.problem()));
        v.impl = entry->make();
        if (faults && faults->applies_to(entry->info.id(), p.index))
          v.impl = std::make_unique<fault_injecting_variant>(std::move(v.impl), faults->kind, entry->info.id());
        v.impl->prepare(data.problem(), run_options{static_cast<int>(p.block_size)});
        v.impl->poison();
        v.impl->run();
        scoring_results out;
        out.resize(p.rows);
        v.impl->download(out.score.data(), out.flag.data());
        const auto g = check_results(data.problem(), *reference, out.score.data(), out.flag.data(), v.impl->flagged_count());
        v.gate = g.passed ? gate_verdict::passed : gate_verdict::failed;
        gates.push_back({e.name, entry->info.id(), std::string(to_string(v.shape.layout)), p.rows, p.features, p.block_size,
                         g.passed, g.max_abs_error, g.max_relative_error, g.rtol, g.atol, g.score_failures,
                         g.flag_mismatches, g.ambiguous_rows, g.message});
        if (!g.passed) std::cerr << "\nkstudy: gate FAILED for " << entry->info.id() << " at " << p.rows << "x" << p.features << ": " << g.message << "\n";
      } catch (const std::exception& ex) {
        v.failure = std::string("failed: ") + ex.what();
        auto where = base_sample(
            e, p, prepared_variant{entry, nullptr, gate_verdict::not_gated, "", v.shape, v.bytes}, replication);
        where.timer = entry->info.on_device ? timer_kind::resident_wall : timer_kind::host_wall;
        stop_if_device_lost(where, ex.what());  // before any destructor touches the device
        v.impl.reset();
      }
    }
    if (!v.failure.empty()) {
      auto s = base_sample(e, p, v, replication);
      s.status = v.failure;  // gate: not_gated, the variant never got that far
      s.trial = -1;
      samples.push_back(s);
    }
    variants.push_back(std::move(v));
  }

  // Host buffers for one-shot timers, per (layout, memory kind): input table and outputs, reused.
  struct one_shot_buffers {
    host_buffer x, score, flag;
  };
  std::map<std::pair<table_layout, host_memory>, one_shot_buffers> host_io;
  const auto buffers_for = [&](const prepared_variant& v, host_memory kind) -> one_shot_buffers& {
    auto& b = host_io[{v.shape.layout, kind}];
    if (b.x.bytes() == 0) {
      const auto& data = dataset_for(v.shape.layout);
      b.x = host_buffer(kind, std::int64_t(data.x().size() * sizeof(float)));
      std::copy(data.x().begin(), data.x().end(), b.x.as<float>());
      b.score = host_buffer(kind, p.rows * std::int64_t(sizeof(float)));
      b.flag = host_buffer(kind, p.rows);
    }
    return b;
  };
  std::vector<host_memory> memory_kinds;
  for (const auto& m : e.memory) {
    const auto kind = parse_host_memory(m);
    if (kind == host_memory::pinned && !pinned_memory_available()) continue;
    memory_kinds.push_back(kind);
  }

  // Pipelined one-shot per (variant, memory kind): prepared and gated once, untimed, on first use.
  struct gated_pipeline {
    std::unique_ptr<pipelined_one_shot> pipeline;
    bool passed = false;
  };
  std::map<std::pair<std::size_t, host_memory>, gated_pipeline> pipelines;
  const auto pipeline_for = [&](std::size_t i, host_memory kind) -> gated_pipeline& {
    auto& g = pipelines[{i, kind}];
    if (!g.pipeline) {
      const auto& v = variants[i];
      const auto& data = dataset_for(v.shape.layout);
      auto& b = buffers_for(v, kind);
      g.pipeline = std::make_unique<pipelined_one_shot>(*v.entry, data.problem(), kind,
                                                        run_options{static_cast<int>(p.block_size)});
      std::fill(b.score.as<float>(), b.score.as<float>() + p.rows, std::numeric_limits<float>::quiet_NaN());
      std::fill(b.flag.as<std::uint8_t>(), b.flag.as<std::uint8_t>() + p.rows, std::uint8_t(0xAB));
      const auto flagged = g.pipeline->run(b.x.as<float>(), b.score.as<float>(), b.flag.as<std::uint8_t>());
      g.passed = check_results(data.problem(), *reference, b.score.as<float>(), b.flag.as<std::uint8_t>(), flagged).passed;
      if (!g.passed) std::cerr << "\nkstudy: gate FAILED for the pipelined one-shot of " << v.entry->info.id() << "\n";
    }
    return g;
  };

  // A variant that throws (its own error or a CUDA error) gets one `failed` sample naming the error and
  // is dropped for the rest of the point, its state being unknown; the other variants go on. Where the
  // CUDA context did not survive, stop_if_device_lost() ends the replication instead.
  const auto fail_variant = [&](prepared_variant& v, sample_record failed, const std::string& error) {
    failed.status = "failed: " + error;  // gate: still the point's verdict on the variant
    stop_if_device_lost(failed, error);
    std::cerr << "\nkstudy: " << v.entry->info.id() << " failed at " << p.rows << "x" << p.features << " ("
              << to_string(failed.timer) << ", trial " << failed.trial << "): " << error
              << "; the study goes on without it at this point\n";
    samples.push_back(std::move(failed));
    v.impl.reset();
  };

  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < variants.size(); ++i)
    if (variants[i].impl) order.push_back(i);
  for (auto i : order) {
    auto& v = variants[i];
    try {
      for (int w = 0; w < e.protocol.warmups; ++w) v.impl->run();
    } catch (const std::exception& ex) {
      auto failed = base_sample(e, p, prepared_variant{v.entry, nullptr, v.gate, "", v.shape, v.bytes}, replication);
      failed.trial = -1;  // a warm-up
      failed.timer = v.entry->info.on_device ? timer_kind::resident_wall : timer_kind::host_wall;
      fail_variant(v, failed, ex.what());
      continue;
    }
    // An injected fault fires in the first timed run, after the gate and the warm-ups.
    if (auto* injector = dynamic_cast<fault_injecting_variant*>(v.impl.get())) injector->arm();
  }

  std::mt19937_64 rng(e.protocol.seed ^ (std::uint64_t(replication) << 32) ^ std::uint64_t(p.index));
  for (int trial = 0; trial < e.protocol.trials; ++trial) {
    if (e.protocol.shuffle) std::shuffle(order.begin(), order.end(), rng);
    for (const auto i : order) {
      auto& v = variants[i];
      if (!v.impl) continue;  // failed earlier at this point
      auto base = base_sample(e, p, v, replication);
      base.trial = trial;
      const bool device = v.entry->info.on_device;
      // What was being timed when an exception came, for the failed sample.
      sample_record current = base;
      current.timer = device ? timer_kind::resident_wall : timer_kind::host_wall;
      current.memory_kind = device ? "device" : "host";
      try {
        // Resident: host clock through the fence, CUDA events on the variant's stream around the same run.
        v.impl->poison();
        device_event_timer events(device, v.impl->stream());
        wall_timer wall;
        wall.start();
        run_between_events(*v.impl, events);
        const double wall_seconds = wall.seconds();
        if (!device && wants(e, timer_kind::host_wall)) {
          auto s = base;
          s.timer = timer_kind::host_wall;
          s.memory_kind = "host";
          s.seconds = wall_seconds;
          samples.push_back(s);
        }
        if (device && wants(e, timer_kind::resident_wall)) {
          auto s = base;
          s.timer = timer_kind::resident_wall;
          s.memory_kind = "device";
          s.seconds = wall_seconds;
          samples.push_back(s);
        }
        if (device && events.available() && wants(e, timer_kind::device_events)) {
          auto s = base;
          s.timer = timer_kind::device_events;
          s.memory_kind = "device";
          s.seconds = events.seconds();
          samples.push_back(s);
        }
        if (!device) continue;
        // One-shot: host input -> host-visible scores and flags, from each host memory kind.
        for (const auto kind : memory_kinds) {
          current.memory_kind = std::string(to_string(kind));
          if (wants(e, timer_kind::one_shot)) {
            current.timer = timer_kind::one_shot;
            auto& b = buffers_for(v, kind);
            v.impl->poison();
            wall_timer t;
            t.start();
            v.impl->upload(b.x.as<float>());
            v.impl->run();
            v.impl->download(b.score.as<float>(), b.flag.as<std::uint8_t>());
            auto s = base;
            s.timer = timer_kind::one_shot;
            s.memory_kind = std::string(to_string(kind));
            s.seconds = t.seconds();
            s.bytes = v.bytes + std::int64_t(dataset_for(v.shape.layout).x().size() * sizeof(float)) + p.rows * 5;
            samples.push_back(s);
          }
          if (wants(e, timer_kind::pipelined) && v.impl->queues_asynchronously()) {
            current.timer = timer_kind::pipelined;
            auto& g = pipeline_for(i, kind);
            auto& b = buffers_for(v, kind);
            wall_timer t;
            t.start();
            g.pipeline->run(b.x.as<float>(), b.score.as<float>(), b.flag.as<std::uint8_t>());
            auto s = base;
            s.timer = timer_kind::pipelined;
            s.memory_kind = std::string(to_string(kind));
            s.seconds = t.seconds();
            s.bytes = v.bytes + std::int64_t(dataset_for(v.shape.layout).x().size() * sizeof(float)) + p.rows * 5;
            s.gate = v.gate == gate_verdict::passed && g.passed ? gate_verdict::passed : gate_verdict::failed;
            s.status = s.gate == gate_verdict::passed ? "ok" : "rejected";
            samples.push_back(s);
          }
          if (wants(e, timer_kind::one_shot_alloc)) {
            current.timer = timer_kind::one_shot_alloc;
            auto& b = buffers_for(v, kind);
            auto problem = dataset_for(v.shape.layout).problem();
            problem.x = b.x.as<float>();
            wall_timer t;
            t.start();
            {
              auto fresh = v.entry->make();
              fresh->prepare(problem, run_options{static_cast<int>(p.block_size)});
              fresh->run();
              fresh->download(b.score.as<float>(), b.flag.as<std::uint8_t>());
            }
            auto s = base;
            s.timer = timer_kind::one_shot_alloc;
            s.memory_kind = std::string(to_string(kind));
            s.seconds = t.seconds();
            samples.push_back(s);
          }
        }
      } catch (const std::exception& ex) {
        fail_variant(v, current, ex.what());
      }
    }
  }
  // Attribution pass, after (never among) the timed trials: per-kernel cost of multi-kernel variants.
  if (replication == 0) {
    std::vector<attribution_record> attribution;
    for (const auto& v : variants)
      if (v.impl && v.entry->info.kernels_launched > 1) {
        try {
          auto rows = attribute_kernels(*v.impl, e.name, v.entry->info.id(), v.shape, std::max(1, e.protocol.trials));
          attribution.insert(attribution.end(), rows.begin(), rows.end());
        } catch (const std::exception& ex) {
          auto where = base_sample(e, p, prepared_variant{v.entry, nullptr, v.gate, "", v.shape, v.bytes}, replication);
          where.trial = -1;
          stop_if_device_lost(where, ex.what());
          std::cerr << "\nkstudy: the attribution pass of " << v.entry->info.id() << " failed (" << ex.what()
                    << "); no attribution rows for it at this point\n";
        }
      }
    sink.write_attribution(attribution);
  }
  if (replication == 0) {
    sink.write_gates(gates);
    std::vector<variant_record> described;
    for (const auto& v : variants) described.push_back(describe_variant(v.entry->info, v.shape, p.block_size));
    sink.write_variants(described);
  }
  sink.write_samples(samples);
  sink.flush();
}

// The identity of a point, for its health row.
health_record point_keys(const experiment& e, int replication, std::int64_t point) {
  health_record keys;
  keys.experiment = e.name;
  keys.point = point;
  keys.replication = replication;
  return keys;
}

// Host<->device copies of one size from one memory kind; allocation excluded.
void run_transfer_points(const experiment& e, int replication, health_guarded_sink& sink,
                         const std::set<std::int64_t>& done, bool quiet) {
  std::int64_t index = 0;
  const std::int64_t total = std::int64_t(e.sizes_bytes.size() * e.memory.size() * e.directions.size());
  progress_line progress(e.name, total, quiet);
  for (const auto bytes : e.sizes_bytes)
    for (const auto& memory : e.memory)
      for (const auto& direction : e.directions) {
        const std::int64_t point = index++;
        if (platform::stop_requested()) return;
        if (done.count(point)) continue;
        std::vector<sample_record> samples;
        sample_record base;
        base.experiment = e.name;
        base.variant = "transfer";
        base.memory_kind = memory;
        base.direction = direction;
        base.bytes = bytes;
        base.point = point;
        base.replication = replication;
        base.timer = timer_kind::transfer;
        base.gate = gate_verdict::not_gated;  // a copy computes no scores
        base.status = "ok";
        auto keys = point_keys(e, replication, point);
        keys.bytes = bytes;
        keys.memory_kind = memory;
        keys.direction = direction;
        sink.begin_point(keys);
        try {
          const auto seconds = probes::time_transfers(bytes, parse_host_memory(memory), direction == "h2d",
                                                      e.protocol.warmups, e.protocol.trials);
          for (std::size_t t = 0; t < seconds.size(); ++t) {
            auto s = base;
            s.trial = static_cast<int>(t);
            s.seconds = seconds[t];
            samples.push_back(s);
          }
        } catch (const std::exception& ex) {
          stop_if_device_lost(base, ex.what());
          base.status = std::string("failed: ") + ex.what();
          base.trial = -1;
          samples.push_back(base);
        }
        sink.write_samples(samples);
        sink.flush();
        progress.step(point + 1);
      }
}

// One accepted sample per measured trial of a calibration probe (no scores, so nothing to gate), written
// and flushed as one point.
void write_probe_point(result_sink& sink, sample_record base, const std::vector<double>& seconds) {
  base.gate = gate_verdict::not_gated;
  base.status = "ok";
  std::vector<sample_record> samples;
  for (std::size_t t = 0; t < seconds.size(); ++t) {
    base.trial = static_cast<int>(t);
    base.seconds = seconds[t];
    samples.push_back(base);
  }
  sink.write_samples(samples);
  sink.flush();
}

void run_launch_points(const experiment& e, int replication, health_guarded_sink& sink,
                       const std::set<std::int64_t>& done) {
  std::int64_t point = 0;
  for (const auto& probe : probes::launch_probe_names()) {
    const std::int64_t this_point = point++;
    if (done.count(this_point)) continue;
    sample_record base;
    base.experiment = e.name;
    base.variant = probe;
    base.point = this_point;
    base.replication = replication;
    base.timer = timer_kind::launch;
    sink.begin_point(point_keys(e, replication, this_point));
    write_probe_point(sink, base, probes::time_launch_probe(probe, e.protocol.warmups, e.protocol.trials));
  }
}

void run_transpose_points(const experiment& e, int replication, health_guarded_sink& sink,
                          const std::set<std::int64_t>& done) {
  std::int64_t point = 0;
  for (const auto rows : e.rows)
    for (const auto features : e.features) {
      const std::int64_t this_point = point++;
      if (done.count(this_point)) continue;
      sample_record base;
      base.experiment = e.name;
      base.variant = "convert_to_feature_major";
      base.layout = "row_major";
      base.memory_kind = "device";
      base.rows = rows;
      base.features = features;
      base.bytes = 2 * rows * features * std::int64_t(sizeof(float));
      base.point = this_point;
      base.replication = replication;
      base.timer = timer_kind::transpose;
      auto keys = point_keys(e, replication, this_point);
      keys.rows = rows;
      keys.features = features;
      keys.bytes = base.bytes;
      sink.begin_point(keys);
      write_probe_point(sink, base, probes::time_transpose(rows, features, e.protocol.warmups, e.protocol.trials));
    }
}

json run_child_for_json(const std::string& exe, const std::vector<std::string>& args);

std::string g_self_exe;

// Cold start: every variant's first call in a fresh process (one process per variant per trial), and
// NVRTC compilation of the CUDA escape-path source with an empty cache.
void run_cold_points(const experiment& e, int replication, health_guarded_sink& sink,
                     const std::set<std::int64_t>& done) {
  std::int64_t point = 0;
  for (const auto rows : e.rows)
    for (const auto features : e.features) {
      const std::int64_t this_point = point++;
      if (done.count(this_point) || platform::stop_requested()) continue;
      auto keys = point_keys(e, replication, this_point);
      keys.rows = rows;
      keys.features = features;
      sink.begin_point(keys);
      if (replication == 0) {
        std::vector<variant_record> described;
        for (const auto* entry : select_variants(e))
          described.push_back(describe_variant(
              entry->info, make_shape(rows, features, entry->info.layout, k_first_call_row_padding), 0));
        sink.write_variants(described);
      }
      std::vector<sample_record> samples;
      for (int trial = 0; trial < e.protocol.trials; ++trial) {
        for (const auto* entry : select_variants(e)) {
          sample_record s;
          s.experiment = e.name;
          s.variant = entry->info.id();
          s.layout = std::string(to_string(entry->info.layout));
          s.memory_kind = entry->info.on_device ? "device" : "host";
          s.rows = rows;
          s.features = features;
          s.point = this_point;
          s.replication = replication;
          s.trial = trial;
          s.timer = timer_kind::cold;
          try {
            const auto r = run_child_for_json(g_self_exe, {"__first_call", entry->info.id(), std::to_string(rows),
                                                           std::to_string(features)});
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
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
        const auto nvrtc = cuda_escape::nvrtc_compile_and_load(cuda_escape::device_compute_capability());
        sample_record c;
        c.experiment = e.name;
        c.variant = "nvrtc_fused_cuda_kernels";
        c.point = this_point;
        c.replication = replication;
        c.trial = trial;
        c.timer = timer_kind::compile;
        c.seconds = nvrtc.compile_seconds;
        c.gate = gate_verdict::not_gated;
        c.status = "ok";
        samples.push_back(c);
        c.variant = "module_load_fused_cuda_kernels";
        c.seconds = nvrtc.load_seconds;
        samples.push_back(c);
#endif
      }
      sink.write_samples(samples);
      sink.flush();
    }
}

// Points this replication skips: those already in the archive (a resumed run) and those of other shards.
// A point aborted by a lost CUDA context left only its `aborted` row: it is not finished.
std::set<std::int64_t> skipped_points(const std::string& archive, const experiment& e, int replication,
                                      const shard_spec& shard) {
  std::set<std::int64_t> skip;
  for (const auto& s : read_samples(archive, e.name))
    if (s.replication == replication && s.status.rfind("aborted", 0) != 0) skip.insert(s.point);
  for (std::int64_t p = 0, n = point_count(e); p < n; ++p)
    if (!in_shard(shard, p, replication, e.protocol.replications)) skip.insert(p);
  return skip;
}

std::string write_definition_file(const experiment& e, const shard_spec& shard) {
  char path[] = "/tmp/kstudy-definition-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw std::runtime_error("cannot create a temporary file for the experiment definition");
  close(fd);
  json doc;
  doc["definition"] = json::parse(e.definition_json);
  doc["source"] = e.source;
  doc["shard"] = {{"index", shard.index}, {"count", shard.count}};
  std::ofstream(path) << doc.dump();
  return path;
}

experiment read_definition_file(const std::string& path, shard_spec& shard) {
  std::ifstream in(path);
  const auto doc = json::parse(in);
  shard.index = doc["shard"]["index"].get<int>();
  shard.count = doc["shard"]["count"].get<int>();
  auto e = parse_experiment(doc["definition"].dump(), doc["source"].get<std::string>());
  return e;
}

// Starts `exe args` as a fresh process from every CPU and waits for it; with `output`, captures its
// stdout. The child dies with this process: a kill -9 of `kstudy run` must not leave a replication
// computing and holding the archive, which the next --resume then could not open.
int spawn_and_wait(const std::string& exe, const std::vector<std::string>& args, std::string* output = nullptr) {
  platform::spawn_options options;
  options.argv.push_back(exe);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  if (output) options.stdout_target = platform::stream_target::capture;
  options.reset_affinity = true;
  options.die_with_parent = true;
  auto result = platform::run_process(options);
  if (output) *output = std::move(result.output);
  return result.status();
}

// Runs a __first_call child and parses the one JSON line it prints.
json run_child_for_json(const std::string& exe, const std::vector<std::string>& args) {
  std::string out;
  const int status = spawn_and_wait(exe, args, &out);
  const auto brace = out.rfind('{');
  if (status != 0 || brace == std::string::npos)
    throw std::runtime_error("first-call process failed (status " + std::to_string(status) + "): " + out);
  return json::parse(out.substr(brace));
}

// The archive's content as one JSON document (same records, read back from the archive).
void write_json_copy(const std::string& archive, const std::string& path) {
  json_sink sink(path);
  sink.begin(read_metadata(archive));
  for (const auto& name : list_experiments(archive)) {
    sink.begin_experiment(read_experiment(archive, name));
    sink.write_ceilings(read_ceilings(archive, name));
    sink.write_gates(read_gates(archive, name));
    sink.write_samples(read_samples(archive, name));
    sink.write_summaries(read_summaries(archive, name));
    sink.write_attribution(read_attribution(archive, name));
    sink.write_health(read_health(archive, name));
    sink.write_variants(read_variants(archive, name));
    sink.end_experiment(name);
  }
  sink.finish();
}

}  // namespace

// The variants-table row of a variant at a point: its identity and the models of what it moves and
// computes at this shape (the shape it ran, padding included).
variant_record describe_variant(const variant_info& info, const table_shape& shape, std::int64_t block_size) {
  variant_record r;
  r.variant = info.id();
  r.operation = to_string(info.operation);
  r.family = info.implementation;
  r.fusion_level = info.fusion_level;
  r.layout = to_string(info.layout);
  r.backend = info.backend;
  r.on_device = info.on_device;
  r.kernels_launched = info.kernels_launched;
  r.rows = shape.rows;
  r.features = shape.features;
  r.block_size = block_size;
  const auto modelled = info.traffic(shape);
  r.modelled_bytes_read = modelled.bytes_read;
  r.modelled_bytes_written = modelled.bytes_written;
  r.essential_bytes = essential_traffic(shape).total();
  r.essential_flops = essential_flops(shape);
  return r;
}

void check_experiment(const experiment& e) {
  point_count(e);  // an unknown kind
  select_variants(e);
}

std::string shard_spec::text() const { return std::to_string(index) + "/" + std::to_string(count); }

shard_spec parse_shard(const std::string& text) {
  const auto fail = [&]() -> shard_spec {
    throw std::invalid_argument("--shard '" + text + "': expected K/N with 0 <= K < N (e.g. 2/8)");
  };
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) return fail();
  const auto digits = [](const std::string& t) {
    return !t.empty() && t.size() <= 6 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const auto k = text.substr(0, slash), n = text.substr(slash + 1);
  if (!digits(k) || !digits(n)) return fail();
  shard_spec shard{std::stoi(k), std::stoi(n)};
  if (shard.count < 1 || shard.index >= shard.count) return fail();
  return shard;
}

bool in_shard(const shard_spec& shard, std::int64_t point, int replication, int replications) {
  if (!shard.sharded()) return true;
  return (point * replications + replication) % shard.count == shard.index;
}

// Must enumerate points exactly as the run_*_points functions above number them.
std::int64_t point_count(const experiment& e) {
  const auto n = [](const auto& axis) { return static_cast<std::int64_t>(axis.size()); };
  if (e.kind == "scoring") return n(e.table_shapes()) * n(e.block_sizes);
  if (e.kind == "transfer") return n(e.sizes_bytes) * n(e.memory) * n(e.directions);
  if (e.kind == "launch") return n(probes::launch_probe_names());
  if (e.kind == "cold_compile" || e.kind == "transpose") return n(e.rows) * n(e.features);
  throw experiment_error(e.source + ": kind '" + e.kind + "' is not run by this build");
}

std::int64_t shard_units(const experiment& e, const shard_spec& shard) {
  std::int64_t units = 0;
  for (std::int64_t p = 0, n = point_count(e); p < n; ++p)
    for (int r = 0; r < e.protocol.replications; ++r) units += in_shard(shard, p, r, e.protocol.replications);
  return units;
}

// Variants an experiment names that this build provides; names this build lacks but another flavour
// has (fused_cuda_* on a CPU build) are reported and skipped, unknown names are an error.
std::vector<const registered_variant*> select_variants(const experiment& e) {
  auto& registry = variant_registry::instance();
  std::vector<const registered_variant*> out;
  std::set<std::string> seen;
  for (const auto& pattern : e.variants) {
    auto matches = pattern == "all" ? registry.all() : registry.match(pattern);
    if (matches.empty()) {
      // A known variant on a backend this build lacks (CUDA variants on a CPU build, OpenMP ones on a
      // Serial-only Kokkos) is skipped with a note: one experiment file serves every build.
      const std::string base = pattern.substr(0, pattern.find('@'));
      if (base.rfind("fused_cuda", 0) == 0 || !registry.match(base).empty()) {
        static std::set<std::string> reported;
        if (reported.insert(pattern).second)
          std::cerr << "kstudy: " << e.source << ": variant '" << pattern << "' is not in this build; skipped here\n";
        continue;
      }
      throw experiment_error(e.source + ": field 'variants': unknown variant '" + pattern + "' (see `kstudy list`)");
    }
    for (const auto* v : matches)
      if (seen.insert(v->info.id()).second) out.push_back(v);
  }
  return out;
}

std::vector<point_spec> scoring_points(const experiment& e) {
  std::vector<point_spec> points;
  std::int64_t i = 0;
  for (const auto& [rows, features] : e.table_shapes())
    for (const auto block : e.block_sizes) points.push_back({i++, rows, features, block});
  return points;
}

experiment prepare_experiment(const std::string& name_or_path, const run_request& request) {
  const auto path = resolve_experiment_path(name_or_path);
  auto e = load_experiment(path);
  if (request.trials <= 0 && request.replications <= 0 && request.warmups < 0 && request.variants.empty()) return e;
  auto doc = json::parse(e.definition_json);
  if (request.trials > 0) doc["protocol"]["trials"] = request.trials;
  if (request.replications > 0) doc["protocol"]["replications"] = request.replications;
  if (request.warmups >= 0) doc["protocol"]["warmups"] = request.warmups;
  if (!request.variants.empty()) doc["variants"] = request.variants;
  return parse_experiment(doc.dump(), path);
}

std::vector<summary_record> summarise(const std::vector<sample_record>& samples, const std::vector<ceiling_record>& ceilings) {
  // bytes is part of the point: transfer calibration varies the copy size at a fixed (empty) shape.
  using key = std::tuple<std::string, std::string, std::string, std::string, std::string, std::int64_t, std::int64_t,
                         std::int64_t, int, std::int64_t>;
  std::map<key, std::vector<const sample_record*>> groups;
  for (const auto& s : samples)
    if (summarised(s))
      groups[{s.experiment, s.variant, s.layout, s.memory_kind, s.direction, s.rows, s.features, s.block_size,
              static_cast<int>(s.timer), s.bytes}]
          .push_back(&s);
  std::vector<summary_record> out;
  for (const auto& [k, group] : groups) {
    std::vector<double> t;
    for (const auto* s : group) t.push_back(s->seconds);
    std::sort(t.begin(), t.end());
    const auto quantile = [&](double q) {
      const double pos = q * double(t.size() - 1);
      const std::size_t lo = static_cast<std::size_t>(pos);
      const std::size_t hi = std::min(lo + 1, t.size() - 1);
      return t[lo] + (pos - double(lo)) * (t[hi] - t[lo]);
    };
    const auto* first = group.front();
    summary_record r;
    r.experiment = first->experiment;
    r.variant = first->variant;
    r.layout = first->layout;
    r.memory_kind = first->memory_kind;
    r.direction = first->direction;
    r.rows = first->rows;
    r.features = first->features;
    r.block_size = first->block_size;
    r.timer = first->timer;
    r.samples = static_cast<std::int64_t>(t.size());
    r.median = quantile(0.5);
    r.min = t.front();
    r.max = t.back();
    r.q1 = quantile(0.25);
    r.q3 = quantile(0.75);
    r.bytes_per_second = r.median > 0 ? double(first->bytes) / r.median : 0.0;
    r.occupancy = first->occupancy;
    const ceiling_record* roof = nullptr;
    if (r.timer == timer_kind::resident_wall || r.timer == timer_kind::device_events) roof = roof_for(ceilings, true);
    else if (r.timer == timer_kind::host_wall) roof = roof_for(ceilings, false);
    else if (r.timer == timer_kind::transfer)
      roof = find_ceiling(ceilings, r.direction + "_" + r.memory_kind);
    else if (r.timer == timer_kind::transpose) roof = find_ceiling(ceilings, "device_copy");
    if (roof && roof->bytes_per_second > 0) r.fraction_of_roof = r.bytes_per_second / roof->bytes_per_second;
    out.push_back(r);
  }
  return out;
}

int run_first_call(const std::string& variant_id, std::int64_t rows, std::int64_t features, double initialize_seconds) {
  const auto* entry = variant_registry::instance().find(variant_id);
  if (!entry) throw std::invalid_argument("unknown variant '" + variant_id + "'");
  dataset_options options;
  const host_dataset data(make_shape(rows, features, entry->info.layout, k_first_call_row_padding), options);
  auto variant = entry->make();
  variant->prepare(data.problem(), {});
  variant->poison();
  wall_timer first;
  first.start();
  variant->run();
  const double first_seconds = first.seconds();
  scoring_results out;
  out.resize(rows);
  variant->download(out.score.data(), out.flag.data());
  const auto gate = check_results(data.problem(), compute_reference(data.problem()), out.score.data(), out.flag.data(),
                                  variant->flagged_count());
  wall_timer second;
  second.start();
  variant->run();
  const double second_seconds = second.seconds();
  json r = {{"variant", variant_id},     {"initialize", initialize_seconds}, {"first", first_seconds},
            {"second", second_seconds}, {"gate", gate.passed},               {"message", gate.message}};
  std::cout << r.dump() << std::endl;
  return 0;
}

int run_replication(const std::string& archive, const std::string& definition_file, int replication) {
  platform::install_stop_handlers();
  std::error_code ec;
  g_self_exe = fs::read_symlink("/proc/self/exe", ec).string();
  shard_spec shard;
  const auto e = read_definition_file(definition_file, shard);
  const auto faults = fault_plan_from_environment();
  const auto done = skipped_points(archive, e, replication, shard);
  hdf5_sink archive_sink(archive, open_mode::append);
  room_checked_sink checked(archive_sink, archive);
  // Every point is written through the health guard: GPU state before and after, throttled samples flagged.
  const auto health = make_gpu_health_source();
  health_guarded_sink sink(checked, *health);
  g_open_archive = {&sink, archive, e.name};
  sink.begin_experiment({e.name, e.definition_json, "", e.fingerprint()});
  const bool quiet = std::getenv("KSTUDY_QUIET") != nullptr;
  try {
    if (e.kind == "scoring") {
      const auto points = scoring_points(e);
      progress_line progress(e.name + " rep " + std::to_string(replication), std::int64_t(points.size()), quiet);
      shape_inputs inputs;
      for (const auto& p : points) {
        if (platform::stop_requested()) break;
        if (!done.count(p.index)) {
          auto keys = point_keys(e, replication, p.index);
          keys.rows = p.rows;
          keys.features = p.features;
          keys.block_size = p.block_size;
          sink.begin_point(keys);
          run_scoring_point(e, p, replication, sink, faults, inputs);
        }
        progress.step(p.index + 1);
      }
    } else if (e.kind == "transfer") {
      run_transfer_points(e, replication, sink, done, quiet);
    } else if (e.kind == "launch") {
      run_launch_points(e, replication, sink, done);
    } else if (e.kind == "cold_compile") {
      run_cold_points(e, replication, sink, done);
    } else if (e.kind == "transpose") {
      run_transpose_points(e, replication, sink, done);
    } else {
      throw experiment_error(e.source + ": kind '" + e.kind + "' is not run by this build");
    }
  } catch (const out_of_room& room) {
    g_open_archive = {};
    sink.finish();
    std::cerr << "\nkstudy: stopping before a write that might not fit: " << room.what() << ". Finished points are in "
              << archive << "; free space, then complete it with kstudy run --resume.\n";
    return exit_out_of_room;
  } catch (const std::exception& ex) {
    // An error outside a variant (a probe, the NVRTC compile): the point it interrupted is not written.
    if (sink.in_point()) {
      const auto& keys = sink.current_point();
      sample_record where;
      where.experiment = keys.experiment;
      where.variant = e.kind;
      where.point = keys.point;
      where.replication = keys.replication;
      where.rows = keys.rows;
      where.features = keys.features;
      where.bytes = keys.bytes;
      stop_if_device_lost(where, ex.what());
    }
    g_open_archive = {};
    throw;
  }
  g_open_archive = {};
  sink.end_experiment(e.name);
  sink.finish();
  if (platform::stop_requested()) {
    std::cerr << "kstudy: stopped by signal " << platform::stop_requested()
              << " after the current point; finished points are in " << archive << " (kstudy run --resume completes it)\n";
    return 130;
  }
  return 0;
}

int run_study(const run_request& request, const std::string& self_exe, int argc, char** argv) {
  platform::install_stop_handlers();
  g_self_exe = self_exe;
  // Everything that can be wrong with the request is found before any measurement.
  std::vector<experiment> experiments;
  for (const auto& name : request.experiments) experiments.push_back(prepare_experiment(name, request));
  for (const auto& e : experiments) check_experiment(e);
  fault_plan_from_environment();  // a malformed KSTUDY_INJECT_FAULT is refused here, not in every child
  const bool exists = fs::exists(request.out);
  if (exists && !request.resume && !request.overwrite)
    throw std::runtime_error(request.out + " already exists: pass --resume to complete it or --overwrite to replace it");
  if (!exists || request.overwrite) hdf5_sink::check_writable(request.out);
  if (request.resume && exists) {
    // A shard archive is completed only as the same shard: another slice would mix two shardings.
    const auto root = read_metadata(request.out).root;
    const auto index = root.find("shard_index"), count = root.find("shard_count");
    const std::string had = count == root.end() ? "not sharded" : "shard " + index->second + "/" + count->second;
    const std::string wants = request.shard.sharded() ? "shard " + request.shard.text() : "not sharded";
    if (had != wants)
      throw std::runtime_error(request.out + " is " + had + " but this run is " + wants + "; refusing to resume it");
  }
  try {
    ensure_room(request.out, std::int64_t(64) << 10);  // metadata and ceilings
  } catch (const out_of_room& room) {
    throw std::runtime_error(std::string("not starting: ") + room.what());
  }

  std::vector<ceiling_record> ceilings;
  {
    auto metadata = collect_metadata(argc, argv);
    if (request.shard.sharded()) {
      metadata.root["shard_index"] = std::to_string(request.shard.index);
      metadata.root["shard_count"] = std::to_string(request.shard.count);
    }
    if (request.resume && exists) {
      for (const auto& e : experiments) {
        hdf5_sink check(request.out, open_mode::append);
        check.begin_experiment({e.name, e.definition_json, "", e.fingerprint()});  // refuses a different definition
        check.finish();
        if (ceilings.empty()) ceilings = read_ceilings(request.out, e.name);
      }
    } else {
      if (!request.quiet) std::cerr << "kstudy: measuring ceilings (device read/copy, host read, transfers)\n";
      ceiling_options options;
      if (const char* small = std::getenv("KSTUDY_CEILING_BYTES")) {
        options.device_bytes = options.host_bytes = std::atoll(small);
        options.transfer_bytes = std::min<std::int64_t>(options.transfer_bytes, std::atoll(small));
      }
      ceilings = measure_ceilings(options);
      hdf5_sink sink(request.out, request.overwrite ? open_mode::overwrite : open_mode::create);
      sink.begin(metadata);
      for (const auto& e : experiments) {
        json protocol = json::parse(e.definition_json)["protocol"];
        sink.begin_experiment({e.name, e.definition_json, protocol.dump(), e.fingerprint()});
        sink.write_ceilings(ceilings);
        sink.end_experiment(e.name);
      }
      sink.finish();
    }
  }

  int rc = 0;
  for (const auto& e : experiments) {
    const auto definition = write_definition_file(e, request.shard);
    const auto points = point_count(e);
    for (int r = 0; r < e.protocol.replications && !platform::stop_requested(); ++r) {
      bool any = false;  // a replication with no point in this shard needs no process
      for (std::int64_t p = 0; p < points && !any; ++p) any = in_shard(request.shard, p, r, e.protocol.replications);
      if (!any) continue;
      const int threads = std::min<int>(e.protocol.threads, std::max(1u, std::thread::hardware_concurrency()));
#if KOKKOS_VERSION >= 30700
      const std::string threads_flag = "--kokkos-num-threads=" + std::to_string(threads);
#else
      const std::string threads_flag = "--kokkos-threads=" + std::to_string(threads);
#endif
      const int child = spawn_and_wait(self_exe, {"__replicate", request.out, definition, std::to_string(r), threads_flag});
      if (child != 0) {
        std::cerr << "kstudy: replication " << r << " of " << e.name << " exited with " << child << "\n";
        rc = child;
        if (child >= 128 || child == exit_out_of_room || child == exit_device_lost || platform::stop_requested()) break;
      }
    }
    std::remove(definition.c_str());
    if (platform::stop_requested() || rc >= 128 || rc == exit_out_of_room || rc == exit_device_lost) break;
  }

  // Summaries over everything the archive holds for these experiments, written once: an interrupted
  // run leaves none (its resume writes them), and a completed archive keeps the ones it has.
  std::vector<summary_record> all_summaries;
  for (const auto& e : experiments) {
    const auto samples = read_samples(request.out, e.name);
    auto summaries = summarise(samples, ceilings);
    all_summaries.insert(all_summaries.end(), summaries.begin(), summaries.end());
    if (platform::stop_requested() || rc != 0 || !read_summaries(request.out, e.name).empty()) continue;
    hdf5_sink archive_sink(request.out, open_mode::append);
    room_checked_sink sink(archive_sink, request.out);
    sink.begin_experiment({e.name, e.definition_json, "", e.fingerprint()});
    try {
      sink.write_summaries(summaries);
    } catch (const out_of_room& room) {
      sink.finish();
      std::cerr << "kstudy: the summary of " << e.name << " was not written (" << room.what()
                << "); every sample is in the archive and kstudy run --resume writes it\n";
      rc = exit_out_of_room;
      continue;
    }
    sink.end_experiment(e.name);
    sink.finish();
  }
  // Marks the archive complete (every point of every experiment run, summaries written), so that
  // `kstudy submit --resume` and `kstudy merge` can tell a finished shard from an interrupted one.
  if (rc == 0 && !platform::stop_requested()) {
    try {
      ensure_room(request.out, 4096);
      hdf5_sink archive_sink(request.out, open_mode::append);
      archive_sink.write_root_attribute("complete", "true");
      archive_sink.finish();
    } catch (const out_of_room& room) {
      std::cerr << "kstudy: the archive was not marked complete (" << room.what() << "); kstudy run --resume does it\n";
      rc = exit_out_of_room;
    }
  }
  if (!request.quiet) {
    console_sink console(std::cout);
    for (const auto& e : experiments) {
      console.begin_experiment({e.name, e.definition_json, "", e.fingerprint()});
      std::vector<summary_record> mine;
      for (const auto& s : all_summaries)
        if (s.experiment == e.name) mine.push_back(s);
      console.write_ceilings(ceilings);
      console.write_gates(read_gates(request.out, e.name));
      console.write_samples(read_samples(request.out, e.name));
      console.write_health(read_health(request.out, e.name));
      console.write_summaries(mine);
      console.end_experiment(e.name);
    }
    console.finish();
  }
  if (!request.json_out.empty()) write_json_copy(request.out, request.json_out);
  std::cout << "results: " << fs::absolute(request.out).string() << "\n";
  if (platform::stop_requested()) {
    std::cerr << "kstudy: interrupted; finished points are kept. Complete with: kstudy run --resume --out " << request.out
              << " ...\n";
    return 130;
  }
  if (rc == exit_device_lost)
    std::cerr << "kstudy: stopped: the GPU's CUDA context was lost (see above); finished points are kept. Check the GPU "
                 "(nvidia-smi), then complete with: kstudy run --resume --out "
              << request.out << " ...\n";
  return rc;
}

}  // namespace kstudy
