#pragma once
// What the study's kinds share inside a replication process: the room check before every archive write,
// a progress line, the stop on a lost CUDA context, point keys and probe points, and starting children.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kstudy/experiment.hpp"
#include "kstudy/gpu_health.hpp"
#include "kstudy/records.hpp"
#include "kstudy/sink.hpp"
#include "kstudy/timers.hpp"

namespace kstudy::detail {

// HDF5 cannot recover from a write that fails half way (a full disk or a file-size limit leaves the
// file truncated and unreadable), so every write is preceded by a check that the archive's file system
// and the process's file-size limit leave room for it plus a margin; short of room, the run stops
// cleanly before the write and --resume completes it later.
class out_of_room : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
void ensure_room(const std::string& archive, std::int64_t bytes);

constexpr int exit_out_of_room = 75;  // EX_TEMPFAIL: try again when there is room
// A sticky CUDA error (illegal address, device-side trap) destroyed the replication's CUDA context: the
// finished points are in the archive, the run stopped (EX_UNAVAILABLE: the device is not usable).
constexpr int exit_device_lost = 69;

// The archive sink with the room check in front of every write.
class room_checked_sink : public result_sink {
 public:
  room_checked_sink(result_sink& inner, std::string path) : m_inner(inner), m_path(std::move(path)) {}
  void begin(const run_metadata& m) override { m_inner.begin(m); }
  void begin_experiment(const experiment_record& e) override { m_inner.begin_experiment(e); }
  void flush() override { m_inner.flush(); }
  void end_experiment(const std::string& name) override { m_inner.end_experiment(name); }
  void finish() override { m_inner.finish(); }

 protected:
  // A record takes well under 1 KiB even with its strings, and so does an attribute; HDF5 allocates whole
  // chunks besides.
  void do_write(const record_batch& batch) override {
    ensure_room(m_path, std::int64_t(batch.size() + batch.attributes().size()) * 1024);
    m_inner.write(batch);
  }

 private:
  result_sink& m_inner;
  std::string m_path;
};

class progress_line {
 public:
  progress_line(std::string label, std::int64_t total, bool quiet);
  void step(std::int64_t done) const;

 private:
  std::string m_label;
  std::int64_t m_total;
  bool m_quiet;
  wall_timer m_timer;
};

// A lost CUDA context. Nothing that owns device memory may be destroyed afterwards (Kokkos fences in
// destructors throw, and a destructor that throws terminates the process), so the replication does not
// unwind: it records the fault, closes the archive and exits at once. The replication registers the
// archive it writes here first.
void set_open_archive(health_guarded_sink* sink, const std::string& path, const std::string& experiment);
// After an exception from device work: returns if the CUDA context survived, else records an `aborted`
// row for the point (--resume runs it again) and ends the process with exit_device_lost.
void stop_if_device_lost(const sample_record& where, const std::string& error);

// The identity of a point, for its health row.
health_record point_keys(const experiment& e, int replication, std::int64_t point);
// One accepted, ungated sample per measured trial of a calibration probe, written and flushed as a point.
void write_probe_point(result_sink& sink, sample_record base, const std::vector<double>& seconds);

// Starts `exe args` as a fresh process on every CPU, dying with this one, and waits for it; with
// `output`, captures its stdout.
int spawn_and_wait(const std::string& exe, const std::vector<std::string>& args, std::string* output = nullptr);
// Runs a child that prints one JSON line last, and parses that line.
nlohmann::json run_child_for_json(const std::string& exe, const std::vector<std::string>& args);

}  // namespace kstudy::detail
