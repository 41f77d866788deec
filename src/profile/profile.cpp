#include "kstudy/runner/profile.hpp"

#include <Kokkos_Core.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

#include "kstudy/runner/archive.hpp"
#include "kstudy/runner/environment.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/runner/kokkos_session.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/runner/ncu.hpp"
#include "kstudy/platform/process.hpp"
#include "kstudy/platform/stop_signal.hpp"
#include "kstudy/probes.hpp"
#include "kstudy/study.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/variant_unavailable.hpp"
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
#include "kstudy/cuda_escape.hpp"
#endif

namespace kstudy {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

#if defined(KOKKOS_ENABLE_CUDA) && defined(KSTUDY_HAVE_CUDA_VARIANTS)
constexpr bool build_has_cuda = true;
#else
constexpr bool build_has_cuda = false;
#endif

// Test mode (tests/check_profile_host.sh): host variants under a stand-in ncu (tests/fake_ncu.py), so CI
// runs the whole orchestration without a GPU. No CUDA call is made; the archive says so; never a measurement.
bool host_test_mode() { return std::getenv("KSTUDY_PROFILE_HOST_TEST") != nullptr; }

int visible_gpus() {
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  return cuda_escape::device_count();
#else
  return 0;
#endif
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string last_lines(const std::string& text, int count) {
  std::size_t at = text.size();
  for (int i = 0; i <= count && at != std::string::npos && at > 0; ++i) at = text.rfind('\n', at - 1);
  return at == std::string::npos ? text : text.substr(at + 1);
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./,:@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

// Runs argv[0] with stdout and stderr sent to files (the same file when the paths are equal) under the C
// locale (ncu's number format), from every CPU (see platform::spawn_options::reset_affinity), dying with
// this process (a kill -9 of kstudy must not leave ncu profiling). Returns the exit status.
int run_tool(const std::vector<std::string>& args, const std::string& stdout_path, const std::string& stderr_path) {
  platform::spawn_options options;
  options.argv = args;
  options.env = {{"LC_ALL", "C"}};
  options.stdout_target = options.stderr_target = platform::stream_target::file;
  options.stdout_path = stdout_path;
  options.stderr_path = stderr_path;
  options.reset_affinity = true;
  options.die_with_parent = true;
  return platform::run_process(options).status();
}

// An ncu-level failure (no counter access, an unusable profiler): every point would fail the same way.
class ncu_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct point_result {
  ncu::child_report report;
  std::vector<ncu::kernel_launch> launches;
  std::string ncu_output;  // ncu's and the child's stdout and stderr
  std::string errors;      // ncu's ==ERROR== lines (a report may still have been written)
  int status = 0;
};

// One ncu session: its path, the metrics it accepts, a folder for its files.
class ncu_runner {
 public:
  ncu_runner(std::string ncu, std::string self_exe, std::string folder)
      : m_ncu(std::move(ncu)), m_self(std::move(self_exe)), m_folder(std::move(folder)) {}

  ncu::metric_choice& choice() { return m_choice; }
  const std::string& first_command() const { return m_first_command; }
  std::string import_command() const {
    return command_text({m_ncu, "--import", "REPORT.ncu-rep", "--csv", "--page", "raw", "--print-units", "base"});
  }

  // Runs one child under ncu and reads its report back. Throws ncu_failure when ncu itself failed.
  point_result run(const std::string& name, const std::vector<std::string>& child_args) {
    const std::string base = (fs::path(m_folder) / name).string();
    const std::string result = base + ".json", log = base + ".log";
    for (const auto& stale : {result, base + ".ncu-rep", base + ".csv"}) std::remove(stale.c_str());
    std::vector<std::string> args{m_ncu,
                                  "--clock-control",
                                  "none",
                                  "--profile-from-start",
                                  "off",
                                  "--metrics",
                                  ncu::metrics_argument(m_choice),
                                  "--export",
                                  base,
                                  "--force-overwrite",
                                  m_self,
                                  "__profile_point",
                                  result};
    args.insert(args.end(), child_args.begin(), child_args.end());
    if (m_first_command.empty() && !child_args.empty() && child_args.size() > 5) m_first_command = command_text(args);
    point_result r;
    r.status = run_tool(args, log, log);
    r.ncu_output = read_text(log);
    r.errors = ncu::error_lines(r.ncu_output);
    std::error_code ec;
    if (!fs::is_regular_file(result, ec)) {
      const std::string what = "the profiling child exited with status " + std::to_string(r.status) +
                               " and no report; the last lines of " + log + ":\n" + last_lines(r.ncu_output, 15);
      if (!r.errors.empty()) throw ncu_failure(r.errors + what);
      throw std::runtime_error(what);
    }
    r.report = ncu::parse_child_report(read_text(result));
    if (r.report.markers == 0) return r;  // nothing was profiled: ncu wrote no report
    std::string report_file = base + ".ncu-rep";
    if (!fs::is_regular_file(report_file, ec)) report_file = base;
    if (!fs::is_regular_file(report_file, ec))
      throw ncu_failure(r.errors + "ncu wrote no report (" + base + ".ncu-rep); the last lines of " + log + ":\n" +
                        last_lines(r.ncu_output, 15));
    const std::string csv = base + ".csv", import_log = base + ".import.log";
    const int imported =
        run_tool({m_ncu, "--import", report_file, "--csv", "--page", "raw", "--print-units", "base"}, csv, import_log);
    if (imported != 0)
      throw ncu_failure("ncu --import " + report_file + " exited with status " + std::to_string(imported) + ": " +
                        last_lines(read_text(import_log), 6));
    r.launches = ncu::kernel_launches(ncu::parse_raw_csv(read_text(csv)), m_choice);
    return r;
  }

 private:
  std::string m_ncu, m_self, m_folder;
  ncu::metric_choice m_choice = ncu::first_choices();
  std::string m_first_command;
};

// Profiles the marker kernel alone until ncu accepts the metric list: a name this ncu or chip does not
// know makes ncu refuse the whole run, so each refused metric moves to its next candidate or is dropped.
// Any other failure here (no access to the counters, say) stops `kstudy profile` before the real work.
std::vector<std::string> settle_metrics(ncu_runner& runner, const std::string& ncu_path) {
  std::vector<std::string> refused_all;
  const auto refuse = [&](const std::string& ncu_errors) {
    const auto refused = ncu::drop_refused_metrics(ncu_errors, runner.choice());
    for (const auto& m : refused) {
      std::cerr << "kstudy profile: ncu does not know metric " << m << "; trying without it ("
                << ncu::metrics_argument(runner.choice()) << ")\n";
      refused_all.push_back(m);
    }
    return !refused.empty();
  };
  const std::string hint =
      "(ERR_NVGPUCTRPERM: this user may not read the GPU's performance counters; \"LibraryNotLoaded\": this "
      "machine's runtime does not let ncu read them)";
  for (std::size_t attempt = 0; attempt <= ncu::metric_specs().size() + 1; ++attempt) {
    point_result probe;
    try {
      probe = runner.run("probe", {"probe", "1", "0", "0", "1"});  // no variant: the marker kernel alone
    } catch (const ncu_failure& failure) {
      if (refuse(failure.what())) continue;
      throw std::runtime_error(ncu_path + " could not profile a one-thread kernel: " + failure.what() + hint);
    } catch (const std::exception& error) {
      throw std::runtime_error(ncu_path + " could not profile a one-thread kernel: " + error.what());
    }
    if (!probe.errors.empty() && refuse(probe.errors)) continue;
    if (probe.launches.size() != 1 || !ncu::is_marker(probe.launches.front().name))
      throw std::runtime_error(ncu_path + " profiled " + std::to_string(probe.launches.size()) +
                               " launches of the probe, expected its one marker kernel " + probe.errors + hint);
    if (!probe.errors.empty()) std::cerr << "kstudy profile: ncu reported, and profiled nonetheless:\n" << probe.errors;
    return refused_all;
  }
  throw std::runtime_error(ncu_path + " kept refusing metrics: " + ncu::metrics_argument(runner.choice()));
}

struct planned_point {
  const experiment* e;
  sweep_point point;
  std::vector<std::string> variants;
  table_shape shape() const { return point.op->shape(point.extents, point.op->info().layouts.front(), 0); }
};

std::string joined_extents(const std::vector<std::int64_t>& extents) {
  std::string text;
  for (const auto x : extents) text += (text.empty() ? "" : ",") + std::to_string(x);
  return text;
}

// The variants table of a profile archive: what the code knows of every variant profiled at each point of
// the experiment, as `kstudy run` stores it, so a report reads the same model for both archives.
std::vector<variant_record> profiled_variants(const std::vector<planned_point>& plan, const experiment& e) {
  std::vector<variant_record> rows;
  for (const auto& p : plan) {
    if (p.e != &e) continue;
    for (const auto& id : p.variants) {
      const auto* v = variant_registry::instance().find(id);
      if (v == nullptr) continue;
      rows.push_back(describe_variant(v->info, p.point.op->shape(p.point.extents, v->info.layout, e.row_padding),
                                      p.point.block_size));
    }
  }
  return rows;
}

std::string shape_text(std::int64_t rows, std::int64_t features, std::int64_t depth, std::int64_t block) {
  return extents_text(rows, features, depth) + (block ? " block " + std::to_string(block) : "");
}

double safe_ratio(double a, double b) { return b > 0 && !std::isnan(a) && !std::isnan(b) ? a / b : std::nan(""); }

// The per-(variant, point) lines printed at the end: the counters summed over the call's kernels.
void print_summary(std::ostream& os, const std::vector<profile_record>& rows) {
  struct total {
    std::string variant, shape, status, kernels_text;
    int kernels = 0;
    double duration = 0, bytes = 0, ld_sectors = 0, ld_requests = 0, pct_weighted = 0;
    double achieved = std::nan(""), theoretical = std::nan(""), longest = -1;
    std::int64_t registers = -1;
  };
  std::vector<total> totals;
  std::map<std::pair<std::string, std::int64_t>, std::size_t> index;
  for (const auto& r : rows) {
    const auto key = std::make_pair(r.experiment + "/" + r.variant, r.point);
    auto [it, fresh] = index.emplace(key, totals.size());
    if (fresh) totals.push_back({r.variant, shape_text(r.rows, r.features, r.depth, r.block_size), r.status, ""});
    auto& t = totals[it->second];
    if (r.launch < 0) continue;
    ++t.kernels;
    t.duration += r.profiled_duration_s;
    t.bytes += r.dram_bytes_read + r.dram_bytes_written;
    t.ld_sectors += r.global_load_sectors;
    t.ld_requests += r.global_load_requests;
    t.pct_weighted += r.dram_throughput_pct * r.profiled_duration_s;
    t.registers = std::max(t.registers, r.registers_per_thread);
    if (r.profiled_duration_s > t.longest) {  // occupancy of the kernel that takes longest
      t.longest = r.profiled_duration_s;
      t.achieved = r.achieved_occupancy_pct;
      t.theoretical = r.theoretical_occupancy_pct;
    }
  }
  os << std::left << std::setw(36) << "variant" << std::setw(20) << "point" << std::right << std::setw(8) << "kernels"
     << std::setw(11) << "DRAM GB/s" << std::setw(8) << "% peak" << std::setw(14) << "occ ach/theo" << std::setw(6)
     << "regs" << std::setw(10) << "sect/req"
     << "  status\n";
  const auto fixed = [](double v, int digits) {
    std::ostringstream s;
    if (std::isnan(v))
      s << "n/a";
    else
      s << std::fixed << std::setprecision(digits) << v;
    return s.str();
  };
  for (const auto& t : totals) {
    os << std::left << std::setw(36) << t.variant << std::setw(20) << t.shape << std::right << std::setw(8) << t.kernels
       << std::setw(11) << fixed(safe_ratio(t.bytes, t.duration) / 1e9, 0) << std::setw(8)
       << fixed(safe_ratio(t.pct_weighted, t.duration), 1) << std::setw(14)
       << (std::isnan(t.achieved) && std::isnan(t.theoretical) ? "n/a"
                                                               : fixed(t.achieved, 0) + "/" + fixed(t.theoretical, 0))
       << std::setw(6) << (t.registers >= 0 ? std::to_string(t.registers) : "n/a") << std::setw(10)
       << fixed(safe_ratio(t.ld_sectors, t.ld_requests), 2) << "  " << t.status << "\n";
  }
}

// Kokkos dispatches and regions during the profiled call (the child's labels for its kernels).
std::vector<std::pair<std::string, std::string>>* g_events = nullptr;
void on_dispatch(const char* name, const std::uint32_t, std::uint64_t* id) {
  *id = 0;
  if (g_events) g_events->emplace_back("kernel", name ? name : "");
}
void on_region(const char* name) {
  if (g_events) g_events->emplace_back("region", name ? name : "");
}

// Records Kokkos' events and keeps the profiler on for its lifetime.
class profiled_call {
 public:
  explicit profiled_call(std::vector<std::pair<std::string, std::string>>& events) {
    namespace tools = Kokkos::Tools::Experimental;
    g_events = &events;
    tools::set_begin_parallel_for_callback(on_dispatch);
    tools::set_begin_parallel_reduce_callback(on_dispatch);
    tools::set_begin_parallel_scan_callback(on_dispatch);
    tools::set_push_region_callback(on_region);
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
    try {
      if (!host_test_mode()) cuda_escape::profiler_start();
    } catch (...) {
      stop_recording();
      throw;
    }
#endif
  }
  profiled_call(const profiled_call&) = delete;
  profiled_call& operator=(const profiled_call&) = delete;
  ~profiled_call() {
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
    try {
      if (!host_test_mode()) cuda_escape::profiler_stop();
    } catch (...) {  // a sticky CUDA error is reported by the call that raised it
    }
#endif
    stop_recording();
  }

 private:
  static void stop_recording() {
    namespace tools = Kokkos::Tools::Experimental;
    tools::set_begin_parallel_for_callback(nullptr);
    tools::set_begin_parallel_reduce_callback(nullptr);
    tools::set_begin_parallel_scan_callback(nullptr);
    tools::set_push_region_callback(nullptr);
    g_events = nullptr;
  }
};

void launch_marker() {
  if (host_test_mode()) return;  // the stand-in ncu writes the marker's row itself
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  cuda_escape::launch_profile_marker();
#else
  throw std::runtime_error("this kstudy has no CUDA: nothing to profile");
#endif
}

std::int64_t parse_int(const std::string& text, const char* what) {
  std::size_t used = 0;
  const long long v = std::stoll(text, &used);
  if (used != text.size() || v < 0)
    throw std::invalid_argument(std::string("__profile_point: bad ") + what + " '" + text + "'");
  return v;
}

}  // namespace

std::vector<std::int64_t> spread_points(std::int64_t count, int limit) {
  std::vector<std::int64_t> out;
  if (limit <= 0 || limit >= count) {
    for (std::int64_t i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  if (limit == 1) return {count / 2};
  for (int i = 0; i < limit; ++i) {
    const auto at = static_cast<std::int64_t>(std::llround(double(i) * double(count - 1) / double(limit - 1)));
    if (out.empty() || out.back() != at) out.push_back(at);
  }
  return out;
}

// One variant at the point, under ncu: gated first (the gate's run is also the first warm-up), warmed
// once more, then one steady-state call between markers.
ncu::child_variant profile_variant(const std::string& id, point_inputs& inputs, std::int64_t block,
                                   ncu::child_report& report) {
  ncu::child_variant v;
  v.variant = id;
  const auto* entry = variant_registry::instance().find(id);
  if (!entry) {
    v.status = "failed: unknown variant";
    return v;
  }
  const auto shape = inputs.shape(entry->info.layout);
  v.layout = std::string(to_string(shape.layout));
  try {
    const std::int64_t needed = footprint_bytes(entry->info, shape);  // every buffer the variant allocates
    const std::int64_t available = entry->info.on_device ? probes::device_memory_free() : 0;
    if (entry->info.on_device && needed > available / 10 * 9) {
      v.status = "skipped: needs " + std::to_string(needed) + " device bytes, " + std::to_string(available) + " free";
      return v;
    }
    auto impl = entry->make();
    const auto gate = prepare_and_gate(*impl, *entry, inputs, run_options{static_cast<int>(block)});
    v.gate_passed = gate.passed;
    v.status = gate.passed ? "ok" : "rejected";
    impl->run();  // warm-up: the profiled call below is a steady-state one
    profiled_call call(v.events);
    launch_marker();
    v.marker = report.markers++;
    impl->run();
  } catch (const variant_unavailable& ex) {  // this machine cannot run it: skipped, as the study runner says
    v.status = std::string("skipped: ") + ex.what();
  } catch (const std::exception& ex) {
    v.status = std::string("failed: ") + ex.what();
  }
  return v;
}

int run_profile_point(const std::vector<std::string>& args) {
  if (args.size() < 6)
    throw std::invalid_argument("__profile_point RESULT_JSON OPERATION EXTENTS BLOCK PADDING SEED VARIANT...");
  const std::string result_path = args[0];
  const std::vector<std::string> ids(args.begin() + 6, args.end());
  const auto* op = operation_registry::instance().find(args[1]);
  if (op == nullptr && !ids.empty())
    throw std::invalid_argument("__profile_point: unknown operation '" + args[1] + "'");
  std::vector<std::int64_t> extents;
  std::stringstream list(args[2]);
  for (std::string item; std::getline(list, item, ',');) extents.push_back(parse_int(item, "extent"));
  const std::int64_t block = parse_int(args[3], "block size"), padding = parse_int(args[4], "row padding");
  const auto seed = static_cast<std::uint64_t>(parse_int(args[5], "seed"));

  ncu::child_report report;
  if (ids.empty()) {  // the probe: one marker kernel
    std::vector<std::pair<std::string, std::string>> events;
    profiled_call call(events);
    launch_marker();
    report.markers = 1;
  }
  if (op != nullptr) {
    point_inputs inputs(*op, extents, padding, seed);
    for (const auto& id : ids) report.variants.push_back(profile_variant(id, inputs, block, report));
  }
  const std::string temporary = result_path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << ncu::to_json(report) << "\n";
    if (!out) throw std::runtime_error("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), result_path.c_str()) != 0) throw std::runtime_error("cannot rename " + temporary);
  return 0;
}

namespace {

// The sweep experiments to profile, each once, with the request's --variants.
std::vector<experiment> profile_experiments(const profile_request& request) {
  run_request variants_only;
  variants_only.variants = request.variants;
  std::vector<experiment> experiments;
  std::set<std::string> names;
  for (const auto& name : request.experiments) {
    auto e = prepare_experiment(name, variants_only);
    if (e.kind != "sweep")
      throw experiment_error(e.source +
                             ": field 'kind': kstudy profile runs sweep experiments (their variants' kernels), "
                             "not kind '" +
                             e.kind + "'");
    if (!names.insert(e.name).second) throw experiment_error(e.source + ": experiment '" + e.name + "' is given twice");
    experiments.push_back(std::move(e));
  }
  return experiments;
}

// --points points spread over each experiment, each with the device variants of its operation that take
// its block size. The plan points into `experiments`, which must outlive it unchanged.
std::vector<planned_point> plan_points(const std::vector<experiment>& experiments, const profile_request& request,
                                       bool host_test) {
  std::vector<planned_point> plan;
  for (const auto& e : experiments) {
    std::vector<const registered_variant*> device;
    for (const auto* v : select_variants(e))
      if (v->info.on_device || host_test) device.push_back(v);
    if (device.empty())
      throw experiment_error(e.source +
                             ": field 'variants': none of its variants runs on a GPU in this build; "
                             "kstudy profile profiles device variants only");
    const auto points = sweep_points(e);
    for (const auto i : spread_points(static_cast<std::int64_t>(points.size()), request.points)) {
      planned_point p{&e, points[static_cast<std::size_t>(i)], {}};
      for (const auto* v : device)
        if (v->info.operation == p.point.op->info().name && (p.point.block_size == 0 || v->info.tunable_block_size))
          p.variants.push_back(v->info.id());
      if (!p.variants.empty()) plan.push_back(std::move(p));
    }
  }
  return plan;
}

// One point under ncu: a child profiles every planned variant; when the child or its report fails, each
// variant gets a `failed` row naming why (ncu itself failing stops the whole profile).
std::vector<profile_record> profile_point(const planned_point& p, ncu_runner& runner) {
  const auto& pt = p.point;
  const auto shape = p.shape();
  std::vector<std::string> args{pt.op->info().name, joined_extents(pt.extents), std::to_string(pt.block_size),
                                std::to_string(p.e->row_padding), std::to_string(p.e->protocol.seed)};
  args.insert(args.end(), p.variants.begin(), p.variants.end());
  const ncu::point_context context{p.e->name, pt.index, shape.rows, shape.features, pt.block_size, shape.depth};
  std::vector<profile_record> rows;
  try {
    const auto result = runner.run(p.e->name + "_point" + std::to_string(pt.index), args);
    if (!result.errors.empty())  // the report came nonetheless: keep what it holds, say what ncu said
      std::cerr << "kstudy profile: ncu reported errors at " << p.e->name << " point " << pt.index << ":\n"
                << result.errors;
    return ncu::point_records(context, result.report, result.launches);
  } catch (const ncu_failure& failure) {
    throw std::runtime_error("ncu failed at " + p.e->name + " point " + std::to_string(pt.index) + ": " +
                             failure.what());
  } catch (const std::exception& ex) {  // this point's variants are recorded as failed; the others go on
    for (const auto& id : p.variants) {
      profile_record r;
      r.experiment = p.e->name;
      r.variant = id;
      copy_extents(r, shape);
      r.block_size = pt.block_size;
      r.point = pt.index;
      r.status = std::string("failed: ") + ex.what();
      ncu::clear_counters(r);
      rows.push_back(r);
    }
  }
  return rows;
}

// Written once, complete, under a temporary name, then renamed: never a partial archive.
void write_profile_archive(const std::string& out, const run_metadata& metadata,
                           const std::vector<experiment>& experiments, const std::vector<planned_point>& plan,
                           std::map<std::string, std::vector<profile_record>>& records,
                           const std::map<std::string, std::string>& attributes) {
  const std::string partial = out + ".partial";
  std::remove(partial.c_str());
  try {
    hdf5_sink sink(partial, open_mode::overwrite);
    sink.begin(metadata);
    for (const auto& e : experiments) {
      const json protocol = json::parse(e.definition_json)["protocol"];
      sink.begin_experiment({e.name, e.definition_json, protocol.dump(), e.fingerprint()});
      sink.write_variants(profiled_variants(plan, e));
      sink.write_profile(records[e.name], attributes);
      sink.end_experiment(e.name);
    }
    sink.finish();
  } catch (...) {
    std::remove(partial.c_str());
    throw;
  }
  if (std::rename(partial.c_str(), out.c_str()) != 0) {
    std::remove(partial.c_str());
    throw std::runtime_error("cannot rename " + partial + " to " + out);
  }
}

// Working folder for ncu's reports: kept with --keep-ncu, else a temporary one removed at the end.
class report_folder {
 public:
  explicit report_folder(const std::string& keep) : m_path(keep) {
    std::error_code ec;
    if (m_path.empty()) {
      char pattern[] = "/tmp/kstudy-profile-XXXXXX";
      if (!mkdtemp(pattern)) throw std::runtime_error("cannot create a temporary folder for ncu's reports");
      m_path = pattern;
      m_remove = true;
    } else {
      fs::create_directories(m_path, ec);
      if (!fs::is_directory(m_path, ec)) throw std::runtime_error("--keep-ncu " + m_path + " is not a folder");
    }
  }
  ~report_folder() {
    std::error_code ec;
    if (m_remove) fs::remove_all(m_path, ec);
  }
  report_folder(const report_folder&) = delete;
  report_folder& operator=(const report_folder&) = delete;
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
  bool m_remove = false;
};

// The profile table's attributes: how ncu was run and which metrics it gave.
std::map<std::string, std::string> profile_attributes(ncu_runner& runner, const std::string& ncu_version,
                                                      const std::string& ncu_path,
                                                      const std::vector<std::string>& refused, int points) {
  json metrics = json::object();
  for (const auto& [field, metric] : runner.choice()) metrics[field] = metric;
  std::string refused_text;
  for (const auto& m : refused) refused_text += (refused_text.empty() ? "" : ",") + m;
  return {{"ncu_version", ncu_version},
          {"ncu_path", ncu_path},
          {"ncu_command", runner.first_command()},
          {"ncu_import_command", runner.import_command()},
          {"metrics", metrics.dump()},
          {"refused_metrics", refused_text},
          {"points_per_experiment", points == 0 ? "all" : std::to_string(points)},
          {"note",
           "profiled_duration_s is the kernel's duration under Nsight Compute (replayed, counters on): it puts "
           "the counters in proportion and is never a timing; timings come from kstudy run archives"}};
}

}  // namespace

int run_profile(const profile_request& request, const std::string& self_exe, int argc, char** argv) {
  // Everything that can be wrong is found before the GPU is touched: no archive on any of these.
  const bool host_test = host_test_mode();
  if (!build_has_cuda && !host_test)
    throw std::runtime_error(
        "kstudy profile needs the cuda flavour: this kstudy was built without a CUDA backend, so it has "
        "no GPU kernel to profile (cmake --preset cuda && cmake --build --preset cuda)");
  if (request.points < 0) throw std::runtime_error("--points must be 0 (every point) or positive");
  const auto experiments = profile_experiments(request);
  const auto plan = plan_points(experiments, request, host_test);
  std::error_code ec;
  if (fs::exists(request.out, ec) && !request.overwrite)
    throw std::runtime_error(request.out + " already exists: pass --overwrite to replace it");
  hdf5_sink::check_writable(request.out);
  const std::string ncu_path = ncu::find_ncu(request.ncu);
  if (ncu_path.empty())
    throw std::runtime_error(request.ncu.empty()
                                 ? "Nsight Compute's ncu was not found ($KSTUDY_NCU, PATH, /usr/local/cuda/bin/ncu, "
                                   "/opt/nvidia/nsight-compute/*/ncu); install it or pass --ncu PATH"
                                 : "--ncu " + request.ncu + " is not an executable file");
  if (visible_gpus() == 0 && !host_test)
    throw std::runtime_error("no CUDA GPU is visible here (cudaGetDeviceCount found none): kstudy profile needs one");

  platform::install_stop_handlers();

  const report_folder reports(request.keep);
  const std::string& folder = reports.path();

  const std::string version_file = (fs::path(folder) / "ncu-version.txt").string();
  run_tool({ncu_path, "--version"}, version_file, version_file);
  const std::string ncu_version = ncu::version_line(read_text(version_file));

  int kokkos_argc = argc;
  kstudy::kokkos_session guard(kokkos_argc, argv);
  auto metadata = collect_metadata(argc, argv);
  metadata.environment["ncu_path"] = ncu_path;
  metadata.environment["ncu_version"] = ncu_version;
  if (host_test) metadata.root["profile_test_mode"] = "host variants under a stand-in ncu: not a measurement";

  const auto started = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  ncu_runner runner(ncu_path, self_exe, folder);
  if (!request.quiet) std::cerr << "kstudy profile: " << ncu_version << " (" << ncu_path << "); checking its metrics\n";
  const auto refused = settle_metrics(runner, ncu_path);

  std::map<std::string, std::vector<profile_record>> records;  // per experiment
  int failed = 0;
  for (std::size_t i = 0; i < plan.size() && !platform::stop_requested(); ++i) {
    const auto& p = plan[i];
    const auto& pt = p.point;
    const auto shape = p.shape();
    const auto rows = profile_point(p, runner);
    std::int64_t kernels = 0;
    for (const auto& r : rows) {
      kernels += r.launch >= 0;
      if (r.status.rfind("failed", 0) == 0) {
        std::cerr << "kstudy profile: " << r.variant << " at " << shape_text(r.rows, r.features, r.depth, r.block_size)
                  << ": " << r.status << "\n";
        ++failed;
      }
    }
    if (!request.quiet)
      std::cerr << "kstudy profile: point " << (i + 1) << " of " << plan.size() << " (" << p.e->name << " "
                << shape_text(shape.rows, shape.features, shape.depth, pt.block_size) << "): " << p.variants.size()
                << " variants, " << kernels << " kernels profiled, " << std::fixed << std::setprecision(1) << elapsed()
                << " s\n";
    auto& mine = records[p.e->name];
    mine.insert(mine.end(), rows.begin(), rows.end());
  }
  if (platform::stop_requested()) {
    std::cerr << "kstudy profile: stopped by signal " << platform::stop_requested() << "; no archive written\n";
    return 130;
  }

  const auto attributes = profile_attributes(runner, ncu_version, ncu_path, refused, request.points);

  write_profile_archive(request.out, metadata, experiments, plan, records, attributes);
  if (!request.quiet) {
    std::vector<profile_record> all;
    for (const auto& e : experiments) all.insert(all.end(), records[e.name].begin(), records[e.name].end());
    std::cout << "\nProfiled with " << ncu_version << " (counters of one instrumented call per variant and point; "
              << "DRAM GB/s over the profiled duration, occupancy of the longest kernel):\n";
    print_summary(std::cout, all);
  }
  std::cout << "profile: " << fs::absolute(request.out).string() << " (" << std::fixed << std::setprecision(1)
            << elapsed() << " s)\n";
  if (failed) std::cerr << "kstudy profile: " << failed << " variant(s) failed; see their status in the archive\n";
  return failed ? 1 : 0;
}

}  // namespace kstudy
