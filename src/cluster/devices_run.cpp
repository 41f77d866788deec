#include "kstudy/runner/devices_run.hpp"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <thread>

#include "kstudy/runner/archive.hpp"
#include "kstudy/runner/devices_p2p.hpp"
#include "kstudy/runner/kokkos_session.hpp"
#include "kstudy/runner/merge.hpp"
#include "kstudy/platform/process.hpp"
#include "kstudy/platform/stop_signal.hpp"

namespace kstudy {
namespace {

namespace fs = std::filesystem;

// The options of the request's run that each device's run takes as given.
std::vector<std::string> passed_on(const run_request& run) {
  auto args = override_arguments(run);
  if (run.quiet) args.push_back("--quiet");
  return args;
}

std::string root_value(const run_metadata& metadata, const char* key) {
  const auto it = metadata.root.find(key);
  return it == metadata.root.end() ? std::string() : it->second;
}

// The last lines of a device's log: why it failed, without opening the file.
std::string tail_of(const std::string& path, std::size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string text;
  for (const auto& line : last) text += "    | " + line + "\n";
  return text;
}

// Peer-to-peer ceilings among the devices that ran, where this build and the devices can measure them.
std::vector<ceiling_record> peer_ceilings(const devices_request& request, const devices_plan& plan,
                                          const platform::device_source& source, std::ostream& out, std::ostream& err) {
  if (!request.peer_copies || plan.parts.size() < 2) return {};
  if (!peer_copy_available() || source.name() != "cuda runtime") {
    err << "kstudy run: peer-to-peer ceilings not measured (" << source.name() << ")\n";
    return {};
  }
  std::vector<int> devices;
  for (const auto& part : plan.parts) devices.push_back(part.device.index);
  try {
    peer_copy_options options;
    options.trials = 3;
    const auto results = measure_peer_copies(devices, options);
    out << format_peer_matrix(results, devices);
    return peer_copy_ceilings(results);
  } catch (const std::exception& e) {
    err << "kstudy run: peer-to-peer ceilings not measured: " << e.what() << "\n";
    return {};
  }
}

// Every part not yet done, each in its own process, all at once; each part's exit status and (where it could not
// start) why. One thread per device waits for its process. The waiters block SIGINT and SIGTERM (they inherit the
// mask set here); this thread takes them and passes a stop request on to every process, each of which then
// finishes its current point and stops, its archive resumable.
void run_parts(const devices_plan& plan, std::vector<int>& status, std::vector<std::string>& failure) {
  platform::install_stop_handlers();
  status.assign(plan.parts.size(), 0);
  failure.assign(plan.parts.size(), std::string());
  std::vector<std::thread> waiters;
  std::mutex started_mutex;
  std::vector<int> started;
  std::atomic<int> running{0};
  sigset_t stop_signals, previous_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &previous_mask);
  for (std::size_t i = 0; i < plan.parts.size(); ++i) {
    if (plan.parts[i].done) continue;
    ++running;
    waiters.emplace_back([&, i] {
      const auto& part = plan.parts[i];
      platform::spawn_options options;
      options.argv = part.argv;
      options.env = part.env;
      options.stdout_target = options.stderr_target = platform::stream_target::file;
      options.stdout_path = options.stderr_path = part.log;
      options.reset_affinity = true;
      options.die_with_parent = true;
      options.on_start = [&](int pid) {
        const std::lock_guard<std::mutex> lock(started_mutex);
        started.push_back(pid);
      };
      try {
        status[i] = platform::run_process(options).status();
      } catch (const std::exception& e) {
        status[i] = 1;
        failure[i] = e.what();
      }
      --running;
    });
  }
  pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  std::size_t told = 0;  // the processes a stop request has reached
  while (running > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (const int sig = platform::stop_requested(); sig != 0) {
      const std::lock_guard<std::mutex> lock(started_mutex);
      for (; told < started.size(); ++told) ::kill(started[told], sig);
    }
  }
  for (auto& w : waiters) w.join();
}

// The device archives merged into the run's archive (the peer-copy roofs added where the run measured them).
int merge_device_archives(const devices_request& request, const devices_plan& plan,
                          const platform::device_source& source, std::ostream& out, std::ostream& err) {
  const int n = static_cast<int>(plan.parts.size());
  merge_request merge;
  merge.out = request.run.out;
  for (const auto& part : plan.parts) merge.shards.push_back(part.archive);
  merge.overwrite = request.run.overwrite || request.run.resume;
  merge.device_replicas = request.replicate;
  merge.command_line = request.command_line;
  merge.extra_ceilings = peer_ceilings(request, plan, source, out, err);
  merge_report report;
  try {
    report = merge_shards(merge);
  } catch (const merge_refused& refused) {
    for (const auto& p : refused.problems()) err << "kstudy run: merge refused: " << p << "\n";
    return 1;
  }
  if (!report.written) {
    err << "kstudy run: the device archives are not all complete; nothing merged into " << request.run.out << "\n";
    return 1;
  }
  out << "kstudy run: " << n << " device" << (n == 1 ? "" : "s") << (request.replicate ? " (every point on each)" : "")
      << " merged into " << request.run.out << ": " << report.samples << " samples\n";
  return 0;
}

}  // namespace

std::string default_parts_dir(const std::string& out) { return out + ".devices"; }

devices_plan plan_devices(const devices_request& request, const std::vector<platform::device_info>& listed,
                          const std::string& self_exe) {
  if (request.run.shard.sharded())
    throw std::invalid_argument("--devices runs the whole experiment over this node's GPUs; it takes no --shard");
  devices_plan plan;
  std::vector<platform::device_info> healthy;
  for (const auto& d : platform::select_devices(request.devices, listed))
    (d.healthy ? healthy : plan.left_out).push_back(d);
  if (healthy.empty())
    throw std::runtime_error("none of the devices selected (--devices " + request.devices +
                             ") passed its health check");
  const int n = static_cast<int>(healthy.size());
  const fs::path dir = request.parts_dir.empty() ? default_parts_dir(request.run.out) : request.parts_dir;
  for (int k = 0; k < n; ++k) {
    device_part part;
    part.device = healthy[static_cast<std::size_t>(k)];
    part.shard = {k, n};
    part.archive = (dir / ("device-" + std::to_string(k) + ".h5")).string();
    part.log = (dir / ("device-" + std::to_string(k) + ".log")).string();
    part.argv = {self_exe, "run"};
    part.argv.insert(part.argv.end(), request.run.experiments.begin(), request.run.experiments.end());
    part.argv.insert(part.argv.end(), {"--out", part.archive});
    if (!request.replicate) part.argv.insert(part.argv.end(), {"--shard", part.shard.text()});
    const auto args = passed_on(request.run);
    part.argv.insert(part.argv.end(), args.begin(), args.end());
    std::error_code ec;
    if (fs::exists(part.archive, ec)) {
      if (!request.run.resume && !request.run.overwrite)
        throw std::runtime_error(part.archive +
                                 " already exists (an earlier run on these devices): pass --resume to "
                                 "complete it or --overwrite to start again");
      if (request.run.resume) {
        const auto metadata = read_metadata(part.archive);
        const auto count = root_value(metadata, "shard_count");
        const std::string had =
            count.empty() ? "every point (a replica)" : "shard " + root_value(metadata, "shard_index") + "/" + count;
        const std::string wants = request.replicate ? "every point (a replica)" : "shard " + part.shard.text();
        if (had != wants)
          throw std::runtime_error(part.archive + " ran " + had + ", but with " + std::to_string(n) +
                                   " device(s) now it would run " + wants +
                                   "; resume on as many devices as before (--devices), or remove " + dir.string());
        part.done = root_value(metadata, "complete") == "true";
        part.argv.push_back("--resume");
      } else {
        part.argv.push_back("--overwrite");
      }
    }
    // By UUID: CUDA_VISIBLE_DEVICES numbers are relative to the parent's own CUDA_VISIBLE_DEVICES, the UUID is not.
    part.env.emplace_back("CUDA_VISIBLE_DEVICES",
                          part.device.uuid.empty() ? std::to_string(part.device.index) : part.device.uuid);
    plan.parts.push_back(std::move(part));
  }
  return plan;
}

int run_on_devices(const devices_request& request, const std::string& self_exe, std::ostream& out, std::ostream& err) {
  const auto source = platform::make_device_source();
  const auto listed = source->list();
  if (listed.empty()) {
    err << "kstudy run --devices: no GPU found (" << source->name()
        << "); --devices spreads a study over the GPUs of a node and needs the cuda flavour\n";
    return exit_no_gpu;
  }
  std::error_code ec;
  if (fs::exists(request.run.out, ec) && !request.run.resume && !request.run.overwrite) {
    err << "kstudy: error: " << request.run.out
        << " already exists: pass --resume to complete it or --overwrite to replace it\n";
    return 1;
  }
  hdf5_sink::check_writable(request.run.out);
  const auto plan = plan_devices(request, listed, self_exe);
  for (const auto& d : plan.left_out)
    err << "kstudy run: " << d.describe() << " failed its health check (" << d.health_note << "): left out\n";
  const fs::path dir =
      plan.parts.front().archive.empty() ? fs::path() : fs::path(plan.parts.front().archive).parent_path();
  fs::create_directories(dir);
  for (const auto& part : plan.parts)
    err << "kstudy run: " << part.device.describe() << ": "
        << (request.replicate ? std::string("every point") : "shard " + part.shard.text()) << " -> " << part.archive
        << (part.done ? " (complete: kept)" : ", log " + part.log) << "\n";

  std::vector<int> status;
  std::vector<std::string> failure;
  run_parts(plan, status, failure);
  if (const int sig = platform::stop_requested(); sig != 0) {
    err << "kstudy run: stopped by signal " << sig << "; nothing merged into " << request.run.out
        << "; each device's archive keeps its finished points: the same command with --resume completes them\n";
    return 128 + sig;
  }

  int rc = 0;
  for (std::size_t i = 0; i < plan.parts.size(); ++i) {
    if (status[i] == 0) continue;
    const auto& part = plan.parts[i];
    err << "kstudy run: " << part.device.describe() << " failed (exit status " << status[i] << ")"
        << (failure[i].empty() ? "" : ": " + failure[i]) << "; its log " << part.log << " ends:\n"
        << tail_of(part.log, 6);
    if (rc == 0) rc = status[i];
  }
  if (rc != 0) {
    err << "kstudy run: nothing merged into " << request.run.out
        << "; the devices that finished keep their archives in " << dir.string()
        << ": run the same command with --resume to complete the others\n";
    return rc;
  }
  return merge_device_archives(request, plan, *source, out, err);
}

}  // namespace kstudy
