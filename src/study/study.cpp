// The study runner's parent: checks every request before measuring, measures the ceilings, writes
// provenance, runs one fresh process per replication (run_replication) and summarises what they appended.
#include "kstudy/study.hpp"

#include <Kokkos_Core.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>

#include "detail/runner_support.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/ceilings.hpp"
#include "kstudy/runner/environment.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/fault_injection.hpp"
#include "kstudy/platform/process.hpp"
#include "kstudy/platform/stop_signal.hpp"
#include "kstudy/precision.hpp"
#include "kstudy/sink.hpp"

namespace kstudy {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using detail::ensure_room;
using detail::exit_device_lost;
using detail::exit_out_of_room;
using detail::out_of_room;
using detail::room_checked_sink;

// The experiment definition the replication processes read, in a temporary file removed when the run ends, by
// return or exception. In TMPDIR (temp_directory_path): a batch job's private folder, cleaned by the scheduler
// when a killed run (SIGKILL) could not remove it.
class definition_file {
 public:
  definition_file(const experiment& e, const shard_spec& shard) {
    std::string pattern = (fs::temp_directory_path() / "kstudy-definition-XXXXXX").string();
    const int fd = mkstemp(pattern.data());
    if (fd < 0)
      throw std::runtime_error("cannot create a temporary file for the experiment definition in " +
                               fs::temp_directory_path().string() + ": " + std::strerror(errno));
    close(fd);
    m_path = pattern;
    json doc;
    doc["definition"] = json::parse(e.definition_json);
    doc["source"] = e.source;
    doc["shard"] = {{"index", shard.index}, {"count", shard.count}};
    std::ofstream out(m_path);
    out << doc.dump();
    if (!out.flush()) {
      std::remove(m_path.c_str());
      throw std::runtime_error("cannot write the experiment definition to " + m_path);
    }
  }
  ~definition_file() { std::remove(m_path.c_str()); }
  definition_file(const definition_file&) = delete;
  definition_file& operator=(const definition_file&) = delete;
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

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

// Whether a pattern names variants of another flavour: a backend this build lacks, or variants declared
// here whose code this build did not compile (CUDA variants in a CPU build). One experiment file serves
// every build. Any operation's variants count, as the last line counts this build's own: a name the
// experiment's operations lack is skipped alike in every build, not refused in some.
bool names_another_flavour(const std::string& pattern, const experiment& /*e*/) {
  const auto& registry = variant_registry::instance();
  const auto at = pattern.find('@');
  const std::string base = pattern.substr(0, at);
  if (at != std::string::npos) {
    const std::string backend = pattern.substr(at + 1);
    bool have = false;
    for (const auto* v : registry.all()) have = have || v->info.backend == backend;
    if (!have) return true;
  }
  if (!registry.match_declared(pattern).empty()) return true;
  return !registry.match(base).empty();
}

}  // namespace

variant_record describe_variant(const variant_info& info, const table_shape& shape, std::int64_t block_size) {
  const auto* op = operation_registry::instance().find(info.operation);
  if (op == nullptr) throw std::logic_error("variant " + info.id() + " names an unregistered operation");
  variant_record r;
  r.variant = info.id();
  r.operation = info.operation;
  r.compute_ceiling = op->info().compute_ceiling;
  r.axes = [&] {
    std::string joined;
    for (const auto& a : op->info().axes) joined += (joined.empty() ? "" : ",") + a;
    return joined;
  }();
  r.family = info.family;
  r.fusion_level = std::string(to_string(info.fusion));
  r.implementation = std::string(to_string(info.implementation));
  r.layout = to_string(info.layout);
  r.backend = info.backend;
  r.on_device = info.on_device;
  r.kernels_launched = info.kernels_launched;
  r.rung = info.rung;
  copy_extents(r, shape);
  r.block_size = block_size;
  const auto modelled = info.traffic(shape);
  r.modelled_bytes_read = modelled.bytes_read;
  r.modelled_bytes_written = modelled.bytes_written;
  r.essential_bytes = op->essential_traffic(shape).total();
  r.essential_flops = op->essential_flops(shape);
  return r;
}

void check_experiment(const experiment& e) {
  const auto& kind = kind_of(e);
  if (kind.check) kind.check(e);
}

std::vector<const registered_variant*> select_variants(const experiment& e) {
  auto& registry = variant_registry::instance();
  const auto of_experiment = [&](const registered_variant* v) {
    return std::find(e.operations.begin(), e.operations.end(), v->info.operation) != e.operations.end();
  };
  std::vector<const registered_variant*> out;
  std::set<std::string> seen;
  for (const auto& pattern : e.variants) {
    auto matches = pattern == "all" ? registry.all() : registry.match(pattern);
    matches.erase(std::remove_if(matches.begin(), matches.end(), [&](auto* v) { return !of_experiment(v); }),
                  matches.end());
    if (matches.empty()) {
      if (pattern != "all" && names_another_flavour(pattern, e)) {
        static std::set<std::string> reported;
        if (reported.insert(e.source + pattern).second)
          std::cerr << "kstudy: " << e.source << ": variant '" << pattern << "' is not in this build; skipped here\n";
        continue;
      }
      if (pattern == "all") continue;
      throw experiment_error(e.source + ": field 'variants': unknown variant '" + pattern + "' for operation " +
                             (e.operations.empty() ? std::string("(none)") : e.operations.front()) +
                             " (see `kstudy list`)");
    }
    for (const auto* v : matches)
      if (seen.insert(v->info.id()).second) out.push_back(v);
  }
  return out;
}

std::vector<sweep_point> sweep_points(const experiment& e) {
  std::vector<sweep_point> points;
  std::int64_t i = 0;
  for (const auto& name : e.operations) {
    const auto* op = operation_registry::instance().find(name);
    if (op == nullptr) throw experiment_error(e.source + ": field 'operation': '" + name + "' is not in this build");
    for (const auto& extents : e.points)
      for (const auto cache : e.cache)
        for (const auto block : e.block_sizes) points.push_back({i++, op, extents, block, cache});
  }
  return points;
}

std::vector<std::string> override_arguments(const run_request& request) {
  std::vector<std::string> args;
  const auto add = [&](const char* flag, const std::string& value) { args.insert(args.end(), {flag, value}); };
  if (request.trials > 0) add("--trials", std::to_string(request.trials));
  if (request.replications > 0) add("--replications", std::to_string(request.replications));
  if (request.warmups >= 0) add("--warmups", std::to_string(request.warmups));
  if (request.precision > 0) add("--precision", json(request.precision).dump());
  if (request.max_time > 0) add("--max-time", json(request.max_time).dump());
  for (const auto& v : request.variants) add("--variants", v);
  if (!request.cache.empty()) add("--cache", request.cache);
  if (!request.throttled.empty()) add("--throttled", request.throttled);
  return args;
}

experiment prepare_experiment(const std::string& name_or_path, const run_request& request) {
  const auto path = resolve_experiment_path(name_or_path);
  auto e = load_experiment(path);
  if (request.trials <= 0 && request.replications <= 0 && request.warmups < 0 && request.variants.empty() &&
      request.cache.empty() && request.precision <= 0 && request.max_time <= 0 && request.throttled.empty())
    return e;
  auto doc = json::parse(e.definition_json);
  auto& protocol = doc["protocol"];
  // A new minimum re-derives the bound that was derived from the old one (an adaptive definition states both).
  if (request.trials > 0) {
    protocol["trials"] = request.trials;
    protocol.erase("max_trials");
  }
  if (request.replications > 0) {
    protocol["replications"] = request.replications;
    protocol.erase("max_replications");
  }
  if (request.precision > 0) {
    protocol["precision"] = request.precision;
    protocol.erase("max_trials");
    protocol.erase("max_replications");
  }
  if (request.max_time > 0) protocol["max_seconds"] = request.max_time;
  if (request.warmups >= 0) doc["protocol"]["warmups"] = request.warmups;
  // Another policy drops the re-measurement keys of the definition's (the parser refuses them elsewhere and
  // defaults them under remeasure).
  if (!request.throttled.empty() && request.throttled != protocol.value("throttled", "accept")) {
    protocol["throttled"] = request.throttled;
    protocol.erase("cool_down_s");
    protocol.erase("max_remeasures");
  }
  // --variants restricts the kinds that run variants; a calibration kind in the same run has none to restrict.
  if (!request.variants.empty() && kind_of(e).keys.count("variants")) doc["variants"] = request.variants;
  // --cache applies to the kinds that time variants over trials; the others have no caches to choose.
  if (!request.cache.empty() && kind_of(e).keys.count("cache")) doc["cache"] = request.cache;
  return parse_experiment(doc.dump(), path);
}

std::vector<summary_record> summarise(const std::vector<sample_record>& samples,
                                      const std::vector<ceiling_record>& ceilings, roof_rule roof,
                                      const protocol& sampling) {
  const auto by_point = group_series(samples);
  const roof_rule roof_rule_of = roof != nullptr ? roof : read_roof;
  // bytes is part of the point: transfer calibration varies the copy size at a fixed (empty) shape.
  // A warm and a cold run of the same point are two distributions.
  using key = std::tuple<std::string, std::string, std::string, std::string, std::string, std::int64_t, std::int64_t,
                         std::int64_t, std::int64_t, int, std::int64_t, int>;
  std::map<key, std::vector<const sample_record*>> groups;
  for (const auto& s : samples)
    if (summarised(s))
      groups[{s.experiment, s.variant, s.layout, s.memory_kind, s.direction, s.rows, s.features, s.depth, s.block_size,
              static_cast<int>(s.timer), s.bytes, static_cast<int>(s.cache)}]
          .push_back(&s);
  std::vector<summary_record> out;
  for (const auto& [k, group] : groups) {
    std::vector<double> t;
    std::map<std::int32_t, std::vector<double>> by_replication;
    for (const auto* s : group) {
      t.push_back(s->seconds);
      by_replication[s->replication].push_back(s->seconds);
    }
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
    r.depth = first->depth;
    r.block_size = first->block_size;
    r.timer = first->timer;
    r.cache = first->cache;
    r.samples = static_cast<std::int64_t>(t.size());
    r.median = quantile(0.5);
    r.min = t.front();
    r.max = t.back();
    r.q1 = quantile(0.25);
    r.q3 = quantile(0.75);
    r.bytes_per_second = r.median > 0 ? double(first->bytes) / r.median : 0.0;
    r.occupancy = first->occupancy;
    std::vector<std::vector<double>> parts;
    for (auto& [replication, seconds] : by_replication) parts.push_back(std::move(seconds));
    const auto interval = replicated_interval(parts);
    r.interval_low = interval.low;
    r.interval_high = interval.high;
    r.stopped = to_string(stop_reason_of(by_point.at(first->point), series_key(*first), sampling));
    // Only a roof timed on the timer's own clock (kstudy/ceilings.hpp): none, and no fraction, otherwise.
    const ceiling_record* roof = roof_rule_of(r, ceilings);
    if (roof && roof->bytes_per_second > 0) r.fraction_of_roof = r.bytes_per_second / roof->bytes_per_second;
    out.push_back(r);
  }
  return out;
}

namespace {

// Everything that can be wrong with the request is found before any measurement.
std::vector<experiment> checked_experiments(const run_request& request) {
  std::vector<experiment> experiments;
  for (const auto& name : request.experiments) experiments.push_back(prepare_experiment(name, request));
  for (const auto& e : experiments) check_experiment(e);
  fault_plan_from_environment();  // a malformed KSTUDY_INJECT_FAULT is refused here, not in every child
  const bool exists = fs::exists(request.out);
  if (exists && !request.resume && !request.overwrite)
    throw std::runtime_error(request.out +
                             " already exists: pass --resume to complete it or --overwrite to replace it");
  if (!exists || request.overwrite) hdf5_sink::check_writable(request.out);
  if (request.resume && exists) {
    const auto metadata = read_metadata(request.out);
    // The samples to come are this build's: an archive another build started would name a build that measured
    // only some of its samples (one killed before its provenance was written names none, and any build completes it).
    if (metadata.root.count("git_commit") != 0)
      if (const auto differs = build_difference(metadata); !differs.empty())
        throw std::runtime_error(request.out + " was started by another build of kstudy (" + differs +
                                 "); --resume completes an archive with the build that started it: resume it with "
                                 "that build, or give this run a new --out");
    // A shard archive is completed only as the same shard: another slice would mix two shardings.
    const auto& root = metadata.root;
    const auto index = root.find("shard_index"), count = root.find("shard_count");
    const std::string had = count == root.end() ? "not sharded" : "shard " + index->second + "/" + count->second;
    const std::string wants = request.shard.sharded() ? "shard " + request.shard.text() : "not sharded";
    if (had != wants)
      throw std::runtime_error(request.out + " is " + had + " but this run is " + wants + "; refusing to resume it");
    // Another study pointed at this archive (a reused --out): --resume completes the study that wrote it. An
    // archive killed before its first experiment was written holds none, and any study completes it.
    const auto held = list_experiments(request.out);
    bool shared = held.empty();
    std::string asked, holds;
    for (const auto& e : experiments) {
      shared = shared || std::find(held.begin(), held.end(), e.name) != held.end();
      asked += (asked.empty() ? "" : ", ") + e.name;
    }
    for (const auto& name : held) holds += (holds.empty() ? "" : ", ") + name;
    if (!shared)
      throw std::runtime_error(request.out + " holds the study " + holds + ", not " + asked +
                               "; --resume completes the study that wrote an archive: give this one a new --out");
  }
  try {
    ensure_room(request.out, std::int64_t(64) << 10);  // metadata and ceilings
  } catch (const out_of_room& room) {
    throw std::runtime_error(std::string("not starting: ") + room.what());
  }
  return experiments;
}

// A resumed archive keeps its ceilings (and must hold the same definitions); a new one gets provenance and
// the ceilings measured now, before any replication.
std::vector<ceiling_record> ceilings_and_provenance(const run_request& request,
                                                    const std::vector<experiment>& experiments, bool resuming, int argc,
                                                    char** argv) {
  std::vector<ceiling_record> ceilings;
  if (resuming) {
    for (const auto& e : experiments) {
      hdf5_sink check(request.out, open_mode::append);
      check.begin_experiment({e.name, e.definition_json, "", e.fingerprint()});  // refuses a different definition
      check.finish();
      if (ceilings.empty()) ceilings = read_ceilings(request.out, e.name);
    }
    return ceilings;
  }
  auto metadata = collect_metadata(argc, argv);
  // What a variant written in another language runs on (a Python rung: its interpreter and framework version),
  // recorded as the compiler is.
  for (const auto& e : experiments)
    for (const auto* v : select_variants(e))
      if (!v->info.runtime.empty()) metadata.environment["runtime_of_" + v->info.id()] = v->info.runtime;
  if (request.shard.sharded()) {
    metadata.root["shard_index"] = std::to_string(request.shard.index);
    metadata.root["shard_count"] = std::to_string(request.shard.count);
  }
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
  return ceilings;
}

// run_replications' own code for archive_gone (never an exit status: archive_gone returns 1).
constexpr int exit_archive_gone = -2;

bool stops_the_run(int rc) {
  return rc >= 128 || rc == exit_out_of_room || rc == exit_device_lost || platform::stop_requested();
}

// The archive's folder removed (or the file deleted or replaced) while the run writes it: the replications so
// far are in the file this run still holds open, and are copied out of it before the run stops.
int archive_gone(const run_request& request, const platform::held_open& archive) {
  const std::string saved =
      (fs::current_path() / (fs::path(request.out).stem().string() + ".recovered-" + std::to_string(::getpid()) +
                             fs::path(request.out).extension().string()))
          .string();
  std::cerr << "kstudy: error: the archive '" << request.out << "' was removed while this run wrote it (its folder "
            << fs::path(request.out).parent_path().string() << " is gone or the file was deleted or replaced); ";
  if (archive.copy_to(saved))
    std::cerr << "its finished points are saved in " << saved << ": complete them with kstudy run ... --resume --out "
              << saved << "\n";
  else
    std::cerr << "its finished points could not be saved (" << std::strerror(errno) << " writing " << saved << ")\n";
  return 1;
}

bool killed_for_memory(int rc) { return rc == 128 + SIGKILL && !platform::stop_requested(); }

// One fresh process per replication (the protocol's requirement), each with the experiment's thread count.
int run_replications(const run_request& request, const std::string& self_exe, const experiment& e,
                     const platform::held_open& archive) {
  int rc = 0;
  const definition_file definition(e, request.shard);
  const auto points = point_count(e);
  for (int r = 0; r < e.protocol.replication_slots() && !platform::stop_requested(); ++r) {
    // A replication with no point in this shard needs no process; nor does one past the least number of an
    // adaptive protocol when every point of the shard is settled (precise enough, or out of time).
    const auto settled = r >= e.protocol.replications ? settled_points(read_samples(request.out, e.name), e.protocol)
                                                      : std::set<std::int64_t>{};
    if (static_cast<std::int64_t>(settled.size()) >= points) break;  // settled now is settled for good
    bool any = false;
    for (std::int64_t p = 0; p < points && !any; ++p)
      any = in_shard(request.shard, p, r, e.protocol.replication_slots()) && !settled.count(p);
    if (!any) continue;
    const int threads = std::min<int>(e.protocol.threads, std::max(1u, std::thread::hardware_concurrency()));
#if KOKKOS_VERSION >= 30700
    const std::string threads_flag = "--kokkos-num-threads=" + std::to_string(threads);
#else
    const std::string threads_flag = "--kokkos-threads=" + std::to_string(threads);
#endif
    if (!archive.still_at_path()) {
      rc = exit_archive_gone;
      break;
    }
    const int child = detail::spawn_and_wait(
        self_exe, {"__replicate", request.out, definition.path(), std::to_string(r), threads_flag});
    if (child != 0 && !archive.still_at_path()) {
      rc = exit_archive_gone;
      break;
    }
    if (killed_for_memory(child))
      std::cerr << "kstudy: replication " << r << " of " << e.name
                << " was killed (SIGKILL), most likely for memory: the kernel's out-of-memory killer, or a job's "
                   "or cgroup's memory limit; the points it finished are kept: raise the limit or leave out the "
                   "largest points, then kstudy run --resume --out "
                << request.out << "\n";
    else if (child != 0)
      std::cerr << "kstudy: replication " << r << " of " << e.name << " exited with " << child << "\n";
    if (child != 0) {
      rc = child;
      if (stops_the_run(child)) break;
    }
  }
  return rc;
}

// Summaries over everything the archive holds for the experiment, written once: an interrupted run leaves
// none (its resume writes them), and a completed archive keeps the ones it has. Returns them either way.
std::vector<summary_record> write_summaries(const run_request& request, const experiment& e,
                                            const std::vector<ceiling_record>& ceilings, int& rc) {
  auto summaries = summarise(read_samples(request.out, e.name), ceilings, kind_of(e).roof, e.protocol);
  if (platform::stop_requested() || rc != 0 || !read_summaries(request.out, e.name).empty()) return summaries;
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
    return summaries;
  }
  sink.end_experiment(e.name);
  sink.finish();
  return summaries;
}

// Marks the archive complete (every point of every experiment run, summaries written), so that
// `kstudy submit --resume` and `kstudy merge` can tell a finished shard from an interrupted one.
int mark_complete(const std::string& out) {
  try {
    ensure_room(out, 4096);
    hdf5_sink archive_sink(out, open_mode::append);
    archive_sink.write_root_attribute("complete", "true");
    archive_sink.finish();
  } catch (const out_of_room& room) {
    std::cerr << "kstudy: the archive was not marked complete (" << room.what() << "); kstudy run --resume does it\n";
    return exit_out_of_room;
  }
  // What every reader will do first, once more before the run says it is done: damage a write could not see
  // (an appended archive whose earlier bytes were hurt where only the writer's bookkeeping reads them) fails
  // here, naming the file, rather than in the next reader.
  try {
    verify_archive(out);
  } catch (const archive_damaged& damaged) {
    std::cerr << "kstudy: error: the archive does not read back after this run: " << damaged.what() << "\n";
    return 1;
  }
  return 0;
}

void print_console(const run_request& request, const std::vector<experiment>& experiments,
                   const std::vector<ceiling_record>& ceilings, const std::vector<summary_record>& summaries) {
  console_sink console(std::cout);
  for (const auto& e : experiments) {
    console.begin_experiment({e.name, e.definition_json, "", e.fingerprint()});
    std::vector<summary_record> mine;
    for (const auto& s : summaries)
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

int closing_message(const run_request& request, int rc) {
  std::cout << "results: " << fs::absolute(request.out).string() << "\n";
  if (platform::stop_requested()) {
    std::cerr << "kstudy: interrupted; finished points are kept. Complete with: kstudy run --resume --out "
              << request.out << " ...\n";
    return 130;
  }
  if (rc == exit_device_lost)
    std::cerr
        << "kstudy: stopped: the GPU's CUDA context was lost (see above); finished points are kept. Check the GPU "
           "(nvidia-smi), then complete with: kstudy run --resume --out "
        << request.out << " ...\n";
  return rc;
}

}  // namespace

// The protocol: check everything -> ceilings and provenance -> one fresh process per replication ->
// summaries -> mark complete -> report on the console.
namespace {

// A run killed after it created its archive but before HDF5 wrote a byte of it leaves an empty file: --resume
// starts that archive afresh (there is nothing to keep) instead of refusing a file that is not HDF5.
run_request afresh(const run_request& request) {
  run_request fresh = request;
  fresh.resume = false;
  fresh.overwrite = true;
  return fresh;
}

// A free name beside the archive for the damaged original: `out.damaged`, else `out.damaged.1`, ...
std::string damaged_copy_name(const std::string& out) {
  std::error_code ec;
  std::string name = out + ".damaged";
  for (int i = 1; fs::exists(name, ec); ++i) name = out + ".damaged." + std::to_string(i);
  return name;
}

// A kill -9 can land inside an HDF5 write (a chunk rewritten in place, a file cut short before its first flush):
// the archive then fails its checksums, and --resume completes it as a user would by hand. What still reads is
// salvaged into a new file that takes the archive's place; the damaged original is kept beside it, renamed, never
// deleted; every unit that did not survive is measured again. An archive nothing can be salvaged from is set
// aside the same way and the run starts afresh. Any other refusal (not HDF5, another schema, in use) stands.
run_request recovered_for_resume(const run_request& request) {
  std::error_code ec;
  if (!request.resume || !fs::is_regular_file(request.out, ec)) return request;
  if (fs::file_size(request.out, ec) == 0 && !ec) {
    std::cerr << "kstudy: " << request.out
              << " is empty (its run was stopped before its first write): starting it afresh\n";
    return afresh(request);
  }
  std::string damage;
  try {
    verify_archive(request.out);
    return request;
  } catch (const archive_damaged& e) {
    damage = e.what();
  }
  const std::string salvaged = request.out + ".salvaged-" + std::to_string(::getpid());
  const std::string aside = damaged_copy_name(request.out);
  std::cerr << "kstudy: --resume: " << damage.substr(0, damage.find("; `kstudy salvage")) << "\n";
  try {
    const auto report = salvage_archive(request.out, salvaged, true);
    fs::rename(request.out, aside);
    fs::rename(salvaged, request.out);
    for (const auto& lost : report.lost) std::cerr << "kstudy: --resume: left out: " << lost << "\n";
    std::cerr << "kstudy: --resume: kept " << report.units_kept << " finished (point, replication) units ("
              << report.samples_kept << " samples); the rest is measured again. The damaged file is now " << aside
              << "\n";
    return request;
  } catch (const std::runtime_error& e) {
    fs::remove(salvaged, ec);
    fs::rename(request.out, aside);
    std::cerr << "kstudy: --resume: nothing could be salvaged (" << e.what() << "); the damaged file is now " << aside
              << " and the run starts afresh\n";
    return afresh(request);
  }
}

}  // namespace

int run_study(const run_request& original, const std::string& self_exe, int argc, char** argv) {
  const run_request request = recovered_for_resume(original);
  platform::install_stop_handlers();
  const bool resuming = request.resume && fs::exists(request.out);
  const auto experiments = checked_experiments(request);
  const auto ceilings = ceilings_and_provenance(request, experiments, resuming, argc, argv);
  // Open for the whole run, so that another run's --resume or --overwrite of this archive sees a live run
  // even between two replication children, when no process holds HDF5's lock on it.
  const platform::held_open in_use(request.out);
  int rc = 0;
  for (const auto& e : experiments) {
    if (const int failed = run_replications(request, self_exe, e, in_use); failed != 0) rc = failed;
    if (rc == exit_archive_gone) return archive_gone(request, in_use);
    if (stops_the_run(rc)) break;
  }
  if (!in_use.still_at_path()) return archive_gone(request, in_use);
  std::vector<summary_record> summaries;
  for (const auto& e : experiments) {
    const auto mine = write_summaries(request, e, ceilings, rc);
    summaries.insert(summaries.end(), mine.begin(), mine.end());
  }
  if (rc == 0 && !platform::stop_requested()) rc = mark_complete(request.out);
  if (!request.quiet) print_console(request, experiments, ceilings, summaries);
  if (!request.json_out.empty()) write_json_copy(request.out, request.json_out);
  return closing_message(request, rc);
}

}  // namespace kstudy
