#include "kstudy/runner/merge.hpp"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "kstudy/runner/archive.hpp"
#include "kstudy/runner/environment.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/study.hpp"

namespace kstudy {
namespace {

namespace fs = std::filesystem;

// Besides the build (build_keys()), the shards of one run ran on one kind of machine.
const char* const k_hardware_keys[] = {"cpu_model", "gpu_name"};

struct shard_input {
  std::string path;  // as given
  shard_spec shard;
  run_metadata metadata;
  bool complete = false;
  std::vector<std::string> experiments;
};

std::string join(const std::vector<int>& values) {
  std::string out;
  for (const auto v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

std::string value_or(const std::map<std::string, std::string>& map, const std::string& key) {
  const auto it = map.find(key);
  return it == map.end() ? "(none)" : it->second;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

int parse_index(const std::string& text, const std::string& path, const char* key) {
  try {
    std::size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error(path + ": root attribute " + key + " is '" + text + "', not a shard number");
}

// A device replica (merge_request::device_replicas) is the whole run: its place among the inputs is its index.
shard_input read_input(const std::string& path, const merge_request& request, int position) {
  shard_input in;
  in.path = path;
  try {
    in.metadata = read_metadata(path);
    in.experiments = list_experiments(path);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("cannot read shard archive: ") + e.what());
  }
  const auto& root = in.metadata.root;
  if (request.device_replicas) {
    in.shard = {position, static_cast<int>(request.shards.size())};
    const auto complete = root.find("complete");
    in.complete = complete != root.end() && complete->second == "true";
    return in;
  }
  const auto index = root.find("shard_index"), count = root.find("shard_count");
  if (index == root.end() || count == root.end())
    throw std::runtime_error(path +
                             " is not a shard archive (no shard_index/shard_count; kstudy run --shard K/N "
                             "writes them)");
  in.shard.index = parse_index(index->second, path, "shard_index");
  in.shard.count = parse_index(count->second, path, "shard_count");
  if (in.shard.count < 1 || in.shard.index >= in.shard.count)
    throw std::runtime_error(path + ": shard " + in.shard.text() + " is not a valid shard");
  const auto complete = root.find("complete");
  in.complete = complete != root.end() && complete->second == "true";
  return in;
}

// For every key in any of the maps: the same value everywhere, or a pointer to the per-shard copies.
std::map<std::string, std::string> agreed(const std::vector<const std::map<std::string, std::string>*>& maps,
                                          const std::string& differs) {
  std::map<std::string, std::set<std::string>> values;
  for (const auto* m : maps)
    for (const auto& [k, v] : *m) values[k].insert(v);
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : values) {
    bool everywhere = true;
    for (const auto* m : maps) everywhere = everywhere && m->count(k);
    if (everywhere && v.size() == 1)
      out[k] = *v.begin();
    else
      out[k] = differs;
  }
  return out;
}

// Per ceiling (name, clock: a roof may be timed on both), the shard measurement with the median bandwidth (a
// real measurement, not an average); compute roofs by their flop rate.
std::vector<ceiling_record> median_ceilings(const std::vector<std::vector<ceiling_record>>& per_shard) {
  using key = std::pair<std::string, std::string>;
  std::vector<key> order;
  std::map<key, std::vector<ceiling_record>> by_key;
  for (const auto& ceilings : per_shard)
    for (const auto& c : ceilings) {
      const key k{c.name, to_string(c.clock)};
      if (!by_key.count(k)) order.push_back(k);
      by_key[k].push_back(c);
    }
  std::vector<ceiling_record> out;
  for (const auto& k : order) {
    auto& v = by_key[k];
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.bytes_per_second + a.flops_per_second < b.bytes_per_second + b.flops_per_second;
    });
    out.push_back(v[(v.size() - 1) / 2]);
  }
  return out;
}

// experiment, point, replication, and the device replica it ran as (0 for shards, which split the units)
using unit_key = std::tuple<std::string, std::int64_t, std::int32_t, int>;

struct merged_experiment : experiment_rows {
  std::vector<std::vector<ceiling_record>> ceilings;  // per shard
};

}  // namespace

merge_refused::merge_refused(std::vector<std::string> problems)
    : std::runtime_error(problems.empty() ? "merge refused" : problems.front()), m_problems(std::move(problems)) {}

namespace {

// Inputs: readable shard archives, each file once, none of them OUT (non-negotiable, even with --force),
// in shard order.
std::vector<shard_input> read_inputs(const merge_request& request) {
  if (request.shards.empty()) throw std::runtime_error("no shard archives given");
  std::error_code ec;
  if (fs::exists(request.out, ec) && !request.overwrite)
    throw std::runtime_error(request.out + " already exists: remove it or pass --overwrite");
  hdf5_sink::check_writable(request.out);
  const auto out_canonical = fs::weakly_canonical(request.out, ec);
  std::vector<shard_input> inputs;
  std::map<fs::path, std::string> seen_paths;
  for (const auto& path : request.shards) {
    const auto canonical = fs::weakly_canonical(path, ec);
    if (canonical == out_canonical) throw std::runtime_error(path + " is both a shard and the output");
    if (!seen_paths.emplace(canonical, path).second)
      throw std::runtime_error(path + " is given twice (as " + seen_paths[canonical] + ")");
    inputs.push_back(read_input(path, request, static_cast<int>(inputs.size())));
  }
  std::stable_sort(inputs.begin(), inputs.end(),
                   [](const auto& a, const auto& b) { return a.shard.index < b.shard.index; });
  return inputs;
}

// The shard count, and each index once; returns the paths per shard index.
std::map<int, std::vector<std::string>> check_sharding(const std::vector<shard_input>& inputs, merge_report& report,
                                                       std::vector<std::string>& problems) {
  std::set<int> counts;
  for (const auto& in : inputs) counts.insert(in.shard.count);
  report.shard_count = *counts.rbegin();
  if (counts.size() > 1) {
    std::string list;
    for (const auto& in : inputs) list += (list.empty() ? "" : ", ") + in.path + " is " + in.shard.text();
    problems.push_back("the shards come from different shardings: " + list);
  }
  std::map<int, std::vector<std::string>> by_index;
  for (const auto& in : inputs) by_index[in.shard.index].push_back(in.path);
  for (const auto& [index, paths] : by_index)
    if (paths.size() > 1) {
      std::string list;
      for (const auto& p : paths) list += (list.empty() ? "" : ", ") + p;
      problems.push_back("shard " + std::to_string(index) + " is given more than once: " + list);
    }
  return by_index;
}

// Build provenance and hardware must agree.
void check_provenance(const std::vector<shard_input>& inputs, std::vector<std::string>& problems) {
  const auto compare = [&](const char* key, bool environment, const std::string& what) {
    std::set<std::string> values;
    std::string list;
    for (const auto& in : inputs) {
      const auto& map = environment ? in.metadata.environment : in.metadata.root;
      const auto v = value_or(map, key);
      values.insert(v);
      list += (list.empty() ? "" : ", ") + in.path + ": " + v;
    }
    if (values.size() > 1) problems.push_back(what + ": " + key + " differs (" + list + ")");
  };
  for (const auto& key : build_keys())
    compare(key.name, key.environment,
            key.environment ? "the shards were not built alike" : "the shards were not built and archived alike");
  for (const auto* key : k_hardware_keys) compare(key, true, "the shards ran on different hardware");
}

// Experiments: the same set, each defined alike.
void check_experiments(const std::vector<shard_input>& inputs, std::vector<std::string>& problems) {
  std::map<std::string, std::map<std::string, std::vector<std::string>>> fingerprints;  // name -> print -> paths
  std::set<std::string> names;
  for (const auto& in : inputs) names.insert(in.experiments.begin(), in.experiments.end());
  for (const auto& in : inputs) {
    for (const auto& name : names)
      if (std::find(in.experiments.begin(), in.experiments.end(), name) == in.experiments.end())
        problems.push_back(in.path + " has no experiment '" + name + "' (another shard has)");
    for (const auto& name : in.experiments)
      fingerprints[name][read_experiment(in.path, name).fingerprint].push_back(in.path);
  }
  for (const auto& [name, prints] : fingerprints)
    if (prints.size() > 1) {
      std::string list;
      for (const auto& [print, paths] : prints)
        for (const auto& p : paths) list += (list.empty() ? "" : ", ") + p + ": " + print;
      problems.push_back("experiment '" + name + "' is defined differently (fingerprints " + list + ")");
    }
}

// Rows, by unit (experiment, point, replication); each unit must come from exactly one shard, its own.
class row_collector {
 public:
  row_collector(merge_report& report, bool device_replicas) : m_report(report), m_device_replicas(device_replicas) {}

  void add(const shard_input& in, const std::string& name) {
    auto& m = m_experiments[name];
    const auto record = read_experiment(in.path, name);
    if (m.record.name.empty()) m.record = record;
    const int replications =
        parse_experiment(record.definition_json, in.path + ":" + name).protocol.replication_slots();
    auto samples = read_samples(in.path, name);
    const auto dropped = claim_units(in, name, samples, replications);
    // Gates, variants and attribution rows belong to replication 0 of a point, identified by its shape.
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> dropped_shapes;
    for (auto& s : samples) {
      const unit_key key = unit_of(in, name, s.point, s.replication);
      if (dropped.count(key)) {
        ++m_overlaps[{m_unit_owner[key], in.path}];
        ++m_report.duplicate_samples;
        if (s.replication == 0) dropped_shapes.insert({s.rows, s.features, s.depth, s.block_size});
        continue;
      }
      m.samples.push_back(std::move(s));
    }
    for (auto& g : read_gates(in.path, name))
      if (!dropped_shapes.count({g.rows, g.features, g.depth, g.block_size})) m.gates.push_back(std::move(g));
    for (auto& v : read_variants(in.path, name))
      if (!dropped_shapes.count({v.rows, v.features, v.depth, v.block_size})) m.variants.push_back(std::move(v));
    for (auto& a : read_attribution(in.path, name)) {
      bool drop = false;
      for (const auto& shape : dropped_shapes)
        drop =
            drop || (std::get<0>(shape) == a.rows && std::get<1>(shape) == a.features && std::get<2>(shape) == a.depth);
      if (!drop) m.attribution.push_back(std::move(a));
    }
    for (auto& h : read_health(in.path, name))
      if (!dropped.count(unit_of(in, name, h.point, h.replication))) m.health.push_back(std::move(h));
    m.ceilings.push_back(read_ceilings(in.path, name));
  }

  void report_problems(std::vector<std::string>& problems) const {
    for (const auto& [path, n] : m_outside)
      problems.push_back(path + " holds " + std::to_string(n) + " samples of units outside its shard's slice");
    for (const auto& [pair, n] : m_overlaps)
      problems.push_back("duplicate samples: " + pair.second + " repeats " + std::to_string(n) +
                         " sample rows of (point, replication) units that " + pair.first + " already holds");
  }
  std::map<std::string, merged_experiment>& experiments() { return m_experiments; }

 private:
  unit_key unit_of(const shard_input& in, const std::string& name, std::int64_t point, std::int32_t replication) const {
    return {name, point, replication, m_device_replicas ? in.shard.index : 0};
  }

  // Claims the units of this shard's samples that no earlier (lower-index) shard gave; returns the others.
  std::set<unit_key> claim_units(const shard_input& in, const std::string& name,
                                 const std::vector<sample_record>& samples, int replications) {
    std::set<unit_key> dropped, mine;
    for (const auto& s : samples) {
      const unit_key key = unit_of(in, name, s.point, s.replication);
      if (!m_device_replicas && !in_shard(in.shard, s.point, s.replication, replications)) ++m_outside[in.path];
      if (mine.count(key)) continue;
      if (m_unit_owner.count(key))
        dropped.insert(key);
      else
        mine.insert(key);
    }
    for (const auto& key : mine) m_unit_owner[key] = in.path;
    return dropped;
  }

  merge_report& m_report;
  bool m_device_replicas;
  std::map<std::string, merged_experiment> m_experiments;
  std::map<unit_key, std::string> m_unit_owner;                            // unit -> the shard it was taken from
  std::map<std::string, std::int64_t> m_outside;                           // path -> samples outside its slice
  std::map<std::pair<std::string, std::string>, std::int64_t> m_overlaps;  // (kept from, dropped from) -> rows
};

// Which shards of 0..N-1 are there, and finished.
void note_presence(const std::vector<shard_input>& inputs, const std::map<int, std::vector<std::string>>& by_index,
                   merge_report& report) {
  for (int k = 0; k < report.shard_count; ++k)
    if (!by_index.count(k)) report.missing.push_back(k);
  for (const auto& in : inputs) {
    if (report.merged.empty() || report.merged.back() != in.shard.index) report.merged.push_back(in.shard.index);
    if (!in.complete) report.incomplete.push_back(in.shard.index);
  }
}

// The merged archive's provenance: what all shards agree on and the merge itself (each shard goes to /shards).
run_metadata merged_metadata(const std::vector<shard_input>& inputs, const merge_request& request,
                             const merge_report& report) {
  std::vector<const std::map<std::string, std::string>*> roots, environments;
  for (const auto& in : inputs) {
    roots.push_back(&in.metadata.root);
    environments.push_back(&in.metadata.environment);
  }
  run_metadata metadata;
  metadata.root = agreed(roots, "differs between shards: see /shards/<index>");
  metadata.environment = agreed(environments, "differs between shards: see /shards/<index>/environment");
  for (const auto* key : {"schema_version", "shard_index", "complete", "slurm_job_id", "slurm_array_task_id"})
    metadata.root.erase(key);
  std::set<std::string> hosts;
  for (const auto& in : inputs) hosts.insert(value_or(in.metadata.root, "host"));
  std::string host_list;
  for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ", ") + h;
  metadata.root["host"] = host_list;
  metadata.root["created_utc"] = utc_now();
  metadata.root["command_line"] = request.command_line;
  metadata.root["shard_count"] = std::to_string(report.shard_count);
  metadata.root["merged_shards"] = join(report.merged);
  metadata.root["missing_shards"] = join(report.missing);
  metadata.root["incomplete_shards"] = join(report.incomplete);
  metadata.root["complete"] = report.missing.empty() && report.incomplete.empty() ? "true" : "false";
  if (request.device_replicas) metadata.root["device_replicas"] = "true";
  return metadata;
}

// One experiment's rows in the runner's order (replication by replication, points in order; a unit's rows as
// measured), the median of the shards' ceilings, and summaries over the merged samples.
void write_experiment(hdf5_sink& sink, const std::string& name, merged_experiment& m,
                      const std::vector<ceiling_record>& extra_ceilings) {
  const auto by_unit = [](const auto& a, const auto& b) {
    return std::tie(a.replication, a.point) < std::tie(b.replication, b.point);
  };
  std::stable_sort(m.samples.begin(), m.samples.end(), by_unit);
  std::stable_sort(m.health.begin(), m.health.end(), by_unit);
  auto ceilings = median_ceilings(m.ceilings);
  ceilings.insert(ceilings.end(), extra_ceilings.begin(), extra_ceilings.end());
  sink.begin_experiment(m.record);
  sink.write_ceilings(ceilings);
  sink.write_gates(m.gates);
  sink.write_variants(m.variants);
  sink.write_attribution(m.attribution);
  sink.write_health(m.health);
  sink.write_samples(m.samples);
  const auto definition = parse_experiment(m.record.definition_json, name);
  sink.write_summaries(summarise(m.samples, ceilings, kind_of(definition).roof, definition.protocol));
  sink.end_experiment(name);
}

void write_shard_records(hdf5_sink& sink, const std::vector<shard_input>& inputs,
                         const std::map<int, std::vector<std::string>>& by_index) {
  std::error_code ec;
  for (const auto& in : inputs) {
    if (by_index.at(in.shard.index).front() != in.path) continue;  // a forced duplicate index: the first is recorded
    shard_record shard;
    shard.index = in.shard.index;
    shard.source = fs::absolute(in.path, ec).string();
    shard.metadata = in.metadata;
    shard.metadata.root.erase("schema_version");
    for (const auto& name : in.experiments) {
      shard.ceilings = read_ceilings(in.path, name);
      if (!shard.ceilings.empty()) break;
    }
    sink.write_shard(shard);
  }
}

}  // namespace

// Check the shards (sharding, provenance, experiments, units) -> refuse, or warn under --force -> write through a
// temporary file renamed into place, so the output is either absent or complete.
merge_report merge_shards(const merge_request& request) {
  const auto inputs = read_inputs(request);
  std::vector<std::string> problems;
  merge_report report;
  const auto by_index = check_sharding(inputs, report, problems);
  check_provenance(inputs, problems);
  check_experiments(inputs, problems);
  row_collector rows(report, request.device_replicas);
  for (const auto& in : inputs)
    for (const auto& name : in.experiments) rows.add(in, name);
  rows.report_problems(problems);
  note_presence(inputs, by_index, report);
  if (!problems.empty()) {
    if (!request.force) throw merge_refused(problems);
    report.warnings = problems;
  }
  if ((!report.missing.empty() || !report.incomplete.empty()) && !request.partial) return report;

  const auto metadata = merged_metadata(inputs, request, report);
  std::error_code ec;
  const auto directory = fs::absolute(request.out, ec).parent_path();
  const auto temporary =
      (directory / ("." + fs::path(request.out).filename().string() + ".merging-" + std::to_string(::getpid())))
          .string();
  try {
    hdf5_sink sink(temporary, open_mode::overwrite);
    sink.begin(metadata);
    for (auto& [name, m] : rows.experiments()) {
      write_experiment(sink, name, m, request.extra_ceilings);
      report.samples += static_cast<std::int64_t>(m.samples.size());
    }
    write_shard_records(sink, inputs, by_index);
    sink.finish();
    fs::rename(temporary, request.out);
  } catch (...) {
    fs::remove(temporary, ec);
    throw;
  }
  report.written = true;
  return report;
}

}  // namespace kstudy
