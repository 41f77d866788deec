// `kstudy salvage`: what a damaged archive still holds, copied into a new one. Nothing is copied that the
// archive cannot vouch for: a table whose checksum fails is left out whole, and a finished unit is copied only
// when every one of its sample rows reads.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <tuple>

#include "detail/hdf5_digest.hpp"
#include "detail/hdf5_global_heap.hpp"
#include "detail/hdf5_util.hpp"
#include "kstudy/runner/archive.hpp"

namespace kstudy {

using namespace archive_detail;
namespace fs = std::filesystem;

namespace {

// The end-of-file address a version 0 superblock (the format kstudy writes) records, or 0.
std::uint64_t stored_end_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[48] = {};
  if (!in.read(reinterpret_cast<char*>(head), sizeof head)) return 0;
  static const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (std::memcmp(head, signature, 8) != 0 || head[8] != 0 || head[13] != 8) return 0;
  std::uint64_t eof = 0;
  for (int i = 7; i >= 0; --i) eof = eof << 8 | head[40 + i];
  return eof;
}

// A copy cut short: HDF5 refuses a file shorter than the end its superblock records. A copy padded with zeros
// to that length opens; what was cut off then fails its checksums or its structure and is left out.
std::string padded_copy(const std::string& damaged, const std::string& beside) {
  std::error_code ec;
  const auto size = fs::file_size(damaged, ec);
  const auto eof = stored_end_of_file(damaged);
  if (ec || eof <= size || eof - size > (std::uint64_t(1) << 32)) return "";
  const std::string copy = beside + ".padded";
  fs::copy_file(damaged, copy, fs::copy_options::overwrite_existing, ec);
  if (ec || ::truncate(copy.c_str(), static_cast<off_t>(eof)) != 0) {
    fs::remove(copy, ec);
    return "";
  }
  return copy;
}

// Whether the object's content matches its stored checksum (or it has none) and it reads at all.
bool intact(hid_t parent, const std::string& name, bool is_dataset, const std::string& path) {
  try {
    const hid_t id = H5Oopen(parent, name.c_str(), H5P_DEFAULT);
    if (id < 0) return false;
    h5_handle object(id, H5Oclose);
    if (!check_tri(H5Aexists(object.get(), digest_attribute), "H5Aexists", path)) {
      if (is_dataset) object_digest(object.get(), true, path);  // reads every row
      return true;
    }
    return read_string_attribute(object.get(), digest_attribute, path) == object_digest(object.get(), is_dataset, path);
  } catch (const std::runtime_error&) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
}

template <class R>
bool read_intact(hid_t group, const std::string& experiment, const std::string& path, std::vector<R>& out,
                 salvage_report& report) {
  const char* table = record_table<R>::dataset;
  try {
    if (!link_exists(group, table, path)) return true;
    if (!intact(group, table, true, path)) {
      report.lost.push_back(experiment + "/" + table + ": damaged (unreadable, or its checksum fails)");
      return false;
    }
    out = read_records<R>(group, path);
    return true;
  } catch (const std::runtime_error&) {
    H5Eclear2(H5E_DEFAULT);
    report.lost.push_back(experiment + "/" + table + ": unreadable");
    return false;
  }
}

using unit_key = std::pair<std::int64_t, std::int32_t>;  // (point, replication)

// The samples, chunk by chunk (a damaged chunk loses its rows, not the table), with the units whose rows border a
// lost range: a unit's rows are written together, so only those can have lost some of theirs.
std::vector<sample_record> read_sample_ranges(hid_t group, const std::string& path, std::set<unit_key>& partial,
                                              std::int64_t& lost_rows) {
  const char* table = record_table<sample_record>::dataset;
  h5_handle dataset = dataset_handle(H5Dopen2(group, table, H5P_DEFAULT), "H5Dopen2(samples)", path);
  h5_handle space = space_handle(H5Dget_space(dataset.get()), "H5Dget_space(samples)", path);
  hsize_t count = 0;
  if (H5Sget_simple_extent_dims(space.get(), &count, nullptr) != 1) fail("H5Sget_simple_extent_dims(samples)", path);
  const auto layout = make_layout(schema_of<sample_record>(), path);
  std::vector<sample_record> samples;
  bool previous_lost = false;
  const hsize_t step = 1024;  // the chunk length create_row_dataset writes
  for (hsize_t start = 0; start < count; start += step) {
    const hsize_t n = std::min(step, count - start);
    std::vector<unsigned char> rows(n * layout.row_size, 0);
    h5_handle file_space = space_handle(H5Dget_space(dataset.get()), "H5Dget_space(samples)", path);
    h5_handle memory_space = space_handle(H5Screate_simple(1, &n, nullptr), "H5Screate_simple", path);
    const bool read = H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr) >= 0 &&
                      H5Dread(dataset.get(), layout.memory_type.get(), memory_space.get(), file_space.get(),
                              H5P_DEFAULT, rows.data()) >= 0;
    if (!read) {
      H5Eclear2(H5E_DEFAULT);
      lost_rows += static_cast<std::int64_t>(n);
      if (!samples.empty()) partial.insert({samples.back().point, samples.back().replication});
      previous_lost = true;
      continue;
    }
    auto part = unpack_rows<sample_record>(rows.data(), n, layout);
    reclaim_row_buffer(layout.memory_type.get(), rows, n);
    if (previous_lost && !part.empty()) partial.insert({part.front().point, part.front().replication});
    previous_lost = false;
    samples.insert(samples.end(), part.begin(), part.end());
  }
  return samples;
}

struct salvaged_experiment : experiment_rows {
  std::vector<ceiling_record> ceilings;
  std::vector<profile_record> profile;
  std::map<std::string, std::string> profile_attributes;
  bool has_profile = false;
};

// One experiment's finished, intact units; false when nothing of it can be copied (its definition or ceilings lost).
bool salvage_experiment(hid_t experiments, const std::string& name, const std::string& path, salvaged_experiment& e,
                        salvage_report& report) {
  if (!intact(experiments, name, false, path)) {
    report.lost.push_back(name + ": its definition is damaged; the experiment is left out");
    return false;
  }
  h5_handle group = open_group(experiments, name, path);
  e.record.name = name;
  e.record.definition_json = read_string_attribute(group.get(), "definition", path);
  e.record.protocol_json = read_string_attribute(group.get(), "protocol", path);
  e.record.fingerprint = read_string_attribute(group.get(), "fingerprint", path);
  if (!read_intact(group.get(), name, path, e.ceilings, report)) {
    report.lost.push_back(name + ": without its ceilings the experiment cannot be resumed; it is left out");
    return false;
  }
  // Rows keyed by shape or point: if any is lost, a unit cannot be told whole, so none is kept.
  bool keep_units = read_intact(group.get(), name, path, e.gates, report);
  keep_units = read_intact(group.get(), name, path, e.attribution, report) && keep_units;
  keep_units = read_intact(group.get(), name, path, e.health, report) && keep_units;
  keep_units = read_intact(group.get(), name, path, e.variants, report) && keep_units;
  e.has_profile = link_exists(group.get(), record_table<profile_record>::dataset, path);
  if (e.has_profile && read_intact(group.get(), name, path, e.profile, report)) {
    h5_handle dataset = dataset_handle(H5Dopen2(group.get(), record_table<profile_record>::dataset, H5P_DEFAULT),
                                       "H5Dopen2(profile)", path);
    e.profile_attributes = read_string_attributes(dataset.get(), path);
    e.profile_attributes.erase(digest_attribute);
    e.profile_attributes.erase("units");
  } else {
    e.has_profile = false;
  }
  std::set<unit_key> partial;
  std::int64_t lost_rows = 0;
  std::vector<sample_record> samples;
  const char* table = record_table<sample_record>::dataset;
  if (!keep_units) {
    report.lost.push_back(name +
                          ": every sample left out (a table keyed by its points is damaged); --resume runs "
                          "them again");
  } else if (link_exists(group.get(), table, path)) {
    samples = read_sample_ranges(group.get(), path, partial, lost_rows);
    if (lost_rows == 0 && !intact(group.get(), table, true, path)) {
      // Every row read, yet the checksum fails: a value changed somewhere, and nothing says where.
      report.lost.push_back(name + "/samples: its checksum fails (a value changed in place); every sample left out");
      samples.clear();
    } else if (lost_rows > 0) {
      report.lost.push_back(name + "/samples: " + std::to_string(lost_rows) + " rows unreadable; " +
                            std::to_string(partial.size()) + " unit(s) bordering them left out");
    }
  }
  // A unit is finished when it has a row that is not an abort marker or a re-measured attempt's (as --resume
  // counts it: kstudy::finishes_unit).
  std::set<unit_key> finished;
  for (const auto& s : samples)
    if (finishes_unit(s)) finished.insert({s.point, s.replication});
  for (const auto& u : partial) finished.erase(u);
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes;
  for (const auto& s : samples)
    if (finished.count({s.point, s.replication})) {
      e.samples.push_back(s);
      shapes.insert({s.rows, s.features, s.depth});
    }
  const auto shape_kept = [&](const auto& r) { return shapes.count({r.rows, r.features, r.depth}) > 0; };
  const auto drop = [](auto& rows, auto keep) {
    rows.erase(std::remove_if(rows.begin(), rows.end(), [&](const auto& r) { return !keep(r); }), rows.end());
  };
  drop(e.gates, shape_kept);
  drop(e.attribution, shape_kept);
  drop(e.variants, shape_kept);
  drop(e.health, [&](const health_record& h) { return finished.count({h.point, h.replication}) > 0; });
  report.units_kept += static_cast<std::int64_t>(finished.size());
  report.samples_kept += static_cast<std::int64_t>(e.samples.size());
  return true;
}

[[noreturn]] void refuse(const std::string& damaged, const std::string& why) {
  throw std::runtime_error("kstudy: cannot salvage '" + damaged + "': " + why);
}

// The run metadata, from an intact root group of this schema version, marked incomplete (--resume marks it again)
// and salvaged; a damaged environment group is left out.
run_metadata salvage_metadata(hid_t file, const std::string& damaged, const std::string& source,
                              salvage_report& report) {
  std::error_code ec;
  if (!intact(file, "/", false, source)) refuse(damaged, "its run metadata (the root group) is damaged");
  const auto root = read_string_attributes(file, source);
  const auto version = root.find("schema_version");
  if (version == root.end()) refuse(damaged, "it is not a kstudy archive (no schema_version)");
  if (version->second != archive_schema_version)
    refuse(damaged,
           "it has schema_version " + version->second + "; salvage (like --resume) handles " + archive_schema_version);
  run_metadata metadata;
  metadata.root = root;
  metadata.root.erase(digest_attribute);
  metadata.root.erase("schema_version");
  if (metadata.root.count("complete")) metadata.root["complete"] = "false";
  metadata.root["salvaged_from"] = fs::absolute(damaged, ec).string();
  if (link_exists(file, "environment", source)) {
    if (intact(file, "environment", false, source)) {
      metadata.environment = read_string_attributes(open_group(file, "environment", source).get(), source);
      metadata.environment.erase(digest_attribute);
    } else {
      report.lost.push_back("environment: damaged; left out");
    }
  }
  return metadata;
}

// Every experiment whose finished points still read; an unreadable one is left out and named in the report.
std::vector<salvaged_experiment> salvage_experiments(hid_t file, const std::string& damaged, const std::string& source,
                                                     salvage_report& report) {
  std::vector<salvaged_experiment> experiments;
  if (!link_exists(file, "experiments", source)) return experiments;
  if (!intact(file, "experiments", false, source)) refuse(damaged, "its list of experiments is damaged");
  h5_handle group = open_group(file, "experiments", source);
  std::vector<std::string> names;
  for (const auto& o : archive_objects(file, source))
    if (!o.is_dataset && o.name.rfind("/experiments/", 0) == 0 && o.name.find('/', 13) == std::string::npos)
      names.push_back(o.name.substr(13));
  for (const auto& name : names) {
    salvaged_experiment e;
    try {
      if (salvage_experiment(group.get(), name, source, e, report)) experiments.push_back(std::move(e));
    } catch (const std::runtime_error& error) {
      H5Eclear2(H5E_DEFAULT);
      report.lost.push_back(name + ": unreadable (" + error.what() + "); the experiment is left out");
    }
  }
  return experiments;
}

void write_salvaged(const std::string& path, const run_metadata& metadata,
                    const std::vector<salvaged_experiment>& experiments) {
  hdf5_sink sink(path, open_mode::overwrite);
  sink.begin(metadata);
  for (const auto& e : experiments) {
    sink.begin_experiment(e.record);
    sink.write_ceilings(e.ceilings);
    sink.write_samples(e.samples);
    sink.write_gates(e.gates);
    sink.write_attribution(e.attribution);
    sink.write_health(e.health);
    sink.write_variants(e.variants);
    if (e.has_profile) sink.write_profile(e.profile, e.profile_attributes);
    sink.end_experiment(e.record.name);
  }
  sink.finish();
}

}  // namespace

salvage_report salvage_archive(const std::string& damaged, const std::string& out, bool overwrite) {
  silence_hdf5_errors();
  std::error_code ec;
  if (!fs::is_regular_file(damaged, ec)) throw std::runtime_error("kstudy: no archive at '" + damaged + "'");
  if (fs::exists(out, ec) && !overwrite)
    throw std::runtime_error("kstudy: '" + out + "' already exists: remove it or pass --overwrite");
  if (fs::exists(out, ec) && fs::equivalent(damaged, out, ec))
    throw std::runtime_error("kstudy: salvage writes a new archive: '" + out + "' is the damaged one");
  hdf5_sink::check_writable(out);
  const auto directory = fs::absolute(out, ec).parent_path();
  const auto temporary =
      (directory / ("." + fs::path(out).filename().string() + ".salvaging-" + std::to_string(::getpid()))).string();
  // Salvage reads in this process what no child has read first: a heap object whose stored length runs
  // past its collection would be copied past HDF5's buffers (see damaged_global_heap).
  if (const auto problem = damaged_global_heap(damaged); !problem.empty())
    throw std::runtime_error("kstudy: cannot salvage '" + damaged + "': its " + problem +
                             ", which HDF5 would copy past its buffers");
  salvage_report report;
  std::string source = damaged, padded;
  h5_handle file(H5Fopen(damaged.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file) {
    H5Eclear2(H5E_DEFAULT);
    padded = padded_copy(damaged, temporary);
    if (!padded.empty()) {
      file = h5_handle(H5Fopen(padded.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
      source = padded;
      report.lost.push_back("the file is cut short: what lay past its end is lost");
    }
  }
  const auto cleanup = [&] {
    file.reset();
    if (!padded.empty()) fs::remove(padded, ec);
  };
  try {
    if (!file) {
      H5Eclear2(H5E_DEFAULT);
      throw std::runtime_error("kstudy: cannot salvage '" + damaged +
                               "': HDF5 cannot open it at all (its superblock or root group is damaged)");
    }
    auto metadata = salvage_metadata(file.get(), damaged, source, report);
    auto experiments = salvage_experiments(file.get(), damaged, source, report);
    if (link_exists(file.get(), "shards", source))
      report.lost.push_back("shards: a merged archive's shard records are not copied (merge the shards again)");
    cleanup();
    write_salvaged(temporary, metadata, experiments);
    fs::rename(temporary, out);
  } catch (...) {
    cleanup();
    fs::remove(temporary, ec);
    throw;
  }
  return report;
}

}  // namespace kstudy
