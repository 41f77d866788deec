// A replication of one experiment, in its own process (`kstudy __replicate`): reads the definition the
// parent wrote, skips the points already archived or of other shards, and runs the kind's points through
// the room check and the GPU health guard into the archive.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "detail/runner_support.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/fault_injection.hpp"
#include "kstudy/gpu_health.hpp"
#include "kstudy/platform/stop_signal.hpp"
#include "kstudy/precision.hpp"
#include "kstudy/study.hpp"

namespace kstudy {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

experiment read_definition_file(const std::string& path, shard_spec& shard) {
  std::ifstream in(path);
  const auto doc = json::parse(in);
  shard.index = doc["shard"]["index"].get<int>();
  shard.count = doc["shard"]["count"].get<int>();
  return parse_experiment(doc["definition"].dump(), doc["source"].get<std::string>());
}

// Points this replication skips: those already in the archive (a resumed run) and those of other shards.
// A point aborted by a lost CUDA context left only its `aborted` row, and one killed while being re-measured only
// its earlier attempt's: neither is finished (kstudy::finishes_unit).
std::set<std::int64_t> skipped_points(const std::string& archive, const experiment& e, int replication,
                                      const shard_spec& shard) {
  std::set<std::int64_t> skip;
  const auto samples = read_samples(archive, e.name);
  for (const auto& s : samples)
    if (s.replication == replication && finishes_unit(s)) skip.insert(s.point);
  for (std::int64_t p = 0, n = point_count(e); p < n; ++p)
    if (!in_shard(shard, p, replication, e.protocol.replication_slots())) skip.insert(p);
  // Adaptive sampling: past the least number of replications, only the points still short of the precision.
  if (replication >= e.protocol.replications)
    for (const auto p : settled_points(samples, e.protocol)) skip.insert(p);
  return skip;
}

// An error outside a variant (a probe, the NVRTC compile): the point it interrupted is not written.
void stop_if_point_lost_device(const health_guarded_sink& sink, const experiment& e, const std::string& error) {
  if (!sink.in_point()) return;
  const auto& keys = sink.current_point();
  sample_record where;
  where.experiment = keys.experiment;
  where.variant = e.kind;
  where.point = keys.point;
  where.replication = keys.replication;
  copy_extents(where, keys);
  where.bytes = keys.bytes;
  detail::stop_if_device_lost(where, error);
}

// The pause between a throttled attempt and the next, outside any point; a stop request ends it early.
void cool_down(const replication_context& ctx, const health_record& keys, int attempt) {
  const auto& p = ctx.definition.protocol;
  if (!ctx.quiet)
    std::cerr << "\nkstudy: " << keys.experiment << " point " << keys.point << " replication " << keys.replication
              << " ran throttled; cooling down " << p.cool_down_seconds << " s, then measuring it again ("
              << attempt + 1 << " of at most " << p.max_remeasures << ")\n";
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(p.cool_down_seconds);
  while (std::chrono::steady_clock::now() < until && !platform::stop_requested())
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace

void measure_point(replication_context& ctx, const health_record& keys, const std::function<void()>& measure) {
  const auto& p = ctx.definition.protocol;
  for (int attempt = 0;; ++attempt) {
    const bool last = p.throttled != throttle_policy::remeasure || attempt >= p.max_remeasures;
    ctx.sink.begin_point(keys);
    // The last attempt of a re-measured point is accepted as it is (flagged if still throttled).
    ctx.sink.set_throttle_policy(last && p.throttled == throttle_policy::remeasure ? throttle_policy::accept
                                                                                   : p.throttled);
    measure();
    ctx.sink.flush();  // closes the point, if `measure` did not
    if (last || !ctx.sink.last_point_throttled() || platform::stop_requested()) return;
    cool_down(ctx, keys, attempt);
    if (platform::stop_requested()) return;  // the attempt stays unfinished: --resume measures the point again
  }
}

int run_replication(const std::string& archive, const std::string& definition_file, int replication) {
  platform::install_stop_handlers();
  std::error_code ec;
  const auto self_exe = fs::read_symlink("/proc/self/exe", ec).string();
  shard_spec shard;
  const auto e = read_definition_file(definition_file, shard);
  const auto& kind = kind_of(e);
  const auto faults = fault_plan_from_environment();
  const auto done = skipped_points(archive, e, replication, shard);
  hdf5_sink archive_sink(archive, open_mode::append);
  detail::room_checked_sink checked(archive_sink, archive);
  // Every point is written through the health guard: GPU state before, during and after, throttled samples
  // flagged.
  const auto health = make_gpu_health_source();
  health_guarded_sink sink(checked, *health, gpu_sampling_period());
  detail::set_open_archive(&sink, archive, e.name);
  sink.begin_experiment({e.name, e.definition_json, "", e.fingerprint()});
  replication_context ctx{
      e, replication, sink, done, faults ? &*faults : nullptr, std::getenv("KSTUDY_QUIET") != nullptr, self_exe};
  try {
    kind.run(ctx);
  } catch (const detail::out_of_room& room) {
    detail::set_open_archive(nullptr, "", "");
    sink.finish();
    std::cerr << "\nkstudy: stopping before a write that might not fit: " << room.what() << ". Finished points are in "
              << archive << "; free space, then complete it with kstudy run --resume.\n";
    return detail::exit_out_of_room;
  } catch (const std::exception& ex) {
    stop_if_point_lost_device(sink, e, ex.what());
    detail::set_open_archive(nullptr, "", "");
    throw;
  }
  detail::set_open_archive(nullptr, "", "");
  sink.end_experiment(e.name);
  sink.finish();
  if (platform::stop_requested()) {
    std::cerr << "kstudy: stopped by signal " << platform::stop_requested()
              << " after the current point; finished points are in " << archive
              << " (kstudy run --resume completes it)\n";
    return 130;
  }
  return 0;
}

}  // namespace kstudy
