#include "detail/runner_support.hpp"

#include <sys/resource.h>
#include <sys/statvfs.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "kstudy/platform/process.hpp"
#include "kstudy/probes.hpp"

namespace kstudy::detail {

namespace fs = std::filesystem;

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
      throw out_of_room(directory.string() + " has " + std::to_string(available) +
                        " bytes free; the next write needs " + std::to_string(needed) + " (with margin)");
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

progress_line::progress_line(std::string label, std::int64_t total, bool quiet)
    : m_label(std::move(label)), m_total(total), m_quiet(quiet) {
  m_timer.start();
}

void progress_line::step(std::int64_t done) const {
  if (m_quiet) return;
  const double elapsed = m_timer.seconds();
  const double eta = done > 0 ? elapsed / double(done) * double(m_total - done) : 0.0;
  std::fprintf(stderr, "\r%s: point %lld of %lld, %.1f s elapsed, ~%.0f s left   ", m_label.c_str(),
               static_cast<long long>(done), static_cast<long long>(m_total), elapsed, eta);
  if (done == m_total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

namespace {

struct open_archive {
  health_guarded_sink* sink = nullptr;
  std::string path;
  std::string experiment;
};
open_archive g_open_archive;  // the one archive a replication process writes

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

}  // namespace

void set_open_archive(health_guarded_sink* sink, const std::string& path, const std::string& experiment) {
  g_open_archive = {sink, path, experiment};
}

void stop_if_device_lost(const sample_record& where, const std::string& error) {
  std::string lost;
  if (probes::device_context_lost(lost)) stop_for_lost_device(where, lost, error);
}

health_record point_keys(const experiment& e, int replication, std::int64_t point) {
  health_record keys;
  keys.experiment = e.name;
  keys.point = point;
  keys.replication = replication;
  return keys;
}

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

// The child dies with this process: a kill -9 of `kstudy run` must not leave a replication computing and
// holding the archive, which the next --resume then could not open.
int spawn_and_wait(const std::string& exe, const std::vector<std::string>& args, std::string* output) {
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

nlohmann::json run_child_for_json(const std::string& exe, const std::vector<std::string>& args) {
  std::string out;
  const int status = spawn_and_wait(exe, args, &out);
  const auto brace = out.rfind('{');
  if (status != 0 || brace == std::string::npos)
    throw std::runtime_error("child process " + (args.empty() ? exe : args.front()) + " failed (status " +
                             std::to_string(status) + "): " + out);
  return nlohmann::json::parse(out.substr(brace));
}

}  // namespace kstudy::detail
