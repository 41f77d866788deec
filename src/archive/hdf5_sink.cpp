// The HDF5 archive writer. Layout and guarantees: docs/archive_schema.md.
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string_view>

#include "detail/call_order.hpp"
#include "detail/hdf5_digest.hpp"
#include "detail/hdf5_util.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/runner/experiment_facts.hpp"

namespace kstudy {

using namespace archive_detail;

namespace {

constexpr const char* k_experiments_group = "experiments";
constexpr const char* k_environment_group = "environment";
constexpr const char* k_shards_group = "shards";

// Records carry their experiment's name; one that names another experiment would land in the wrong group.
// Ceilings and variant rows name none: the group they are written to is theirs.
void check_experiment_field(const record_batch& batch, const record_schema& schema, const std::string& current,
                            const std::string& path) {
  const std::size_t field = field_index(schema, "experiment");
  if (field == schema.fields.size()) return;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto name = std::get<std::string_view>(schema.read(batch.record(i), field));
    if (!name.empty() && name != current)
      throw std::invalid_argument("kstudy: archive '" + path + "': a record of experiment '" + std::string(name) +
                                  "' was written while experiment '" + current + "' is open");
  }
}

void ensure_dataset(hid_t group, const record_schema& schema, const std::string& path) {
  if (!link_exists(group, schema.table, path)) create_record_dataset(group, schema, path);
}

void check_schema_version(hid_t file, const std::string& path) {
  if (!check_tri(H5Aexists(file, "schema_version"), "H5Aexists(schema_version)", path))
    throw std::runtime_error("kstudy: '" + path + "' is an HDF5 file but not a kstudy archive (no schema_version)");
  const std::string version = read_string_attribute(file, "schema_version", path);
  if (version != archive_schema_version)
    throw std::runtime_error("kstudy: archive '" + path + "' has schema_version " + version + "; this kstudy handles " +
                             archive_schema_version);
}

// The GPU the writing run ran on, from its environment (gpu_uuid, gpu_pci_bus_id, gpu_name): what every sample
// written is stamped with. None where the environment names no single device (no GPU, or a merge of runs
// on several, whose samples carry their own).
struct device_identity {
  std::string uuid, pci_bus_id, model;

  static device_identity of(const std::map<std::string, std::string>& environment) {
    const auto value = [&](const char* key) {
      const auto it = environment.find(key);
      return it == environment.end() ? std::string() : it->second;
    };
    device_identity d{value("gpu_uuid"), value("gpu_pci_bus_id"), value("gpu_name")};
    if (d.uuid.empty() || d.uuid.find(' ') != std::string::npos) return {};
    return d;
  }
  bool known() const { return !uuid.empty(); }
};

}  // namespace

struct hdf5_sink::state {
  std::string path;
  h5_handle file;  // declared first: destroyed after the groups inside it
  h5_handle experiments;
  h5_handle experiment_group;  // the open experiment, if any
  call_order order{"hdf5_sink"};
  device_identity device;
};

void hdf5_sink::check_writable(const std::string& path) { check_path_writable(path, "archive"); }

void hdf5_sink::check_openable(const std::string& path, open_mode mode) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (mode == open_mode::create && exists)
    throw std::runtime_error("kstudy: archive '" + path + "' already exists (use overwrite, append or resume)");
  if (mode == open_mode::resume && !exists)
    throw std::runtime_error("kstudy: cannot resume: no archive at '" + path + "'");
  check_writable(path);
  if (exists && (mode == open_mode::append || mode == open_mode::resume)) {
    if (!has_hdf5_signature(path))
      throw std::runtime_error("kstudy: cannot " + std::string(to_string(mode)) + " '" + path +
                               "': it is not an HDF5 file");
  }
}

hdf5_sink::hdf5_sink(const std::string& path, open_mode mode) : m_state(std::make_unique<state>()) {
  silence_hdf5_errors();
  auto& s = *m_state;
  s.path = path;
  check_openable(path, mode);
  std::error_code ec;
  const bool open_existing =
      mode == open_mode::resume || (mode == open_mode::append && std::filesystem::exists(path, ec));
  if (open_existing) {
    // Checked before anything is added: appending to a damaged archive would bury the damage under a
    // fresh checksum. The digests go before the first change, so that a writer killed from here on leaves
    // an archive read unverified rather than one that reads as damaged.
    verify_archive(path);
    s.file = open_file(path, true);
    check_schema_version(s.file.get(), path);
    remove_digests(s.file.get(), path);
    check(H5Fflush(s.file.get(), H5F_SCOPE_GLOBAL), "H5Fflush", path);
    // A replication child appends without begin(): the device is the one its parent recorded.
    if (link_exists(s.file.get(), k_environment_group, path))
      s.device =
          device_identity::of(read_string_attributes(open_group(s.file.get(), k_environment_group, path).get(), path));
  } else {
    s.file = create_file(path, mode == open_mode::overwrite);
    // Versioned from the first byte, even if begin() never comes.
    write_string_attribute(s.file.get(), "schema_version", archive_schema_version, path);
  }
  s.experiments = open_or_create_group(s.file.get(), k_experiments_group, path);
}

hdf5_sink::~hdf5_sink() = default;

const std::string& hdf5_sink::path() const { return m_state->path; }

void hdf5_sink::begin(const run_metadata& metadata) {
  auto& s = *m_state;
  s.order.require_open("begin");
  const auto version = metadata.root.find("schema_version");
  if (version != metadata.root.end() && version->second != archive_schema_version)
    throw std::invalid_argument("kstudy: run_metadata asks for schema_version " + version->second +
                                "; this archive writer writes " + archive_schema_version);
  // Root and /environment describe the latest run that wrote the archive: stale keys of an earlier run
  // must not survive next to the new ones.
  delete_all_attributes(s.file.get(), s.path, "schema_version");
  for (const auto& [key, value] : metadata.root) write_string_attribute(s.file.get(), key, value, s.path);
  write_string_attribute(s.file.get(), "schema_version", archive_schema_version, s.path);
  h5_handle environment = open_or_create_group(s.file.get(), k_environment_group, s.path);
  delete_all_attributes(environment.get(), s.path);
  for (const auto& [key, value] : metadata.environment) write_string_attribute(environment.get(), key, value, s.path);
  s.device = device_identity::of(metadata.environment);
}

void hdf5_sink::begin_experiment(const experiment_record& experiment) {
  auto& s = *m_state;
  s.order.check_begin(experiment.name);
  check_experiment_name(experiment.name);
  h5_handle group;
  if (link_exists(s.experiments.get(), experiment.name, s.path)) {
    group = open_group(s.experiments.get(), experiment.name, s.path);
    const std::string existing = read_string_attribute(group.get(), "fingerprint", s.path);
    if (existing != experiment.fingerprint)
      throw std::runtime_error("kstudy: archive '" + s.path + "' already holds experiment '" + experiment.name +
                               "' with fingerprint " + existing + ", but this run's definition has fingerprint " +
                               experiment.fingerprint + "; refusing to mix two different experiments");
    // Same definition: the recorded definition and protocol stay as first written.
  } else {
    group = open_or_create_group(s.experiments.get(), experiment.name, s.path);
    write_string_attribute(group.get(), "definition", experiment.definition_json, s.path);
    write_string_attribute(group.get(), "protocol", experiment.protocol_json, s.path);
    write_string_attribute(group.get(), "fingerprint", experiment.fingerprint, s.path);
    // What the registries know of it (the kind's steady_state, the operations' headline points), so readers
    // take them from the file.
    for (const auto& [key, value] : experiment_facts(experiment.definition_json))
      write_string_attribute(group.get(), key, value, s.path);
  }
  // Every table but the optional ones up front (readers find all seven, possibly empty); on resume, any a crash
  // left uncreated.
  for (const record_schema* schema : record_schemas())
    if (!schema->optional) ensure_dataset(group.get(), *schema, s.path);
  s.experiment_group = std::move(group);
  s.order.opened(experiment.name);
}

void hdf5_sink::do_write(const record_batch& batch) {
  auto& s = *m_state;
  const record_schema& schema = batch.schema();
  s.order.require_experiment(std::string("write(") + schema.table + ")");
  check_experiment_field(batch, schema, s.order.experiment(), s.path);
  for (const auto& attribute : batch.attributes())
    if (attribute.first == "units")
      throw std::invalid_argument(std::string("kstudy: the ") + schema.table +
                                  " table's units attribute is the schema's");
  ensure_dataset(s.experiment_group.get(), schema, s.path);  // an optional table: on its first write, rows or not
  if (!batch.empty()) {
    const auto* samples = batch.get<sample_record>();
    if (samples != nullptr && s.device.known()) {
      auto stamped = *samples;
      for (auto& sample : stamped)
        if (sample.device_uuid.empty()) {
          sample.device_uuid = s.device.uuid;
          sample.device_pci_bus_id = s.device.pci_bus_id;
          sample.device_model = s.device.model;
        }
      append_records(s.experiment_group.get(), record_batch(stamped), s.path);
    } else {
      append_records(s.experiment_group.get(), batch, s.path);
    }
    // Closing the dataset wrote its last chunk, possibly in place of the flushed copy (a deflated chunk
    // that did not grow), while the chunk index in the file still describes the old one: a process killed
    // now leaves that chunk unreadable, flushed rows and all. The index goes out at once.
    check(H5Fflush(s.file.get(), H5F_SCOPE_GLOBAL), "H5Fflush", s.path);
  }
  if (batch.attributes().empty()) return;
  h5_handle dataset = dataset_handle(H5Dopen2(s.experiment_group.get(), schema.table, H5P_DEFAULT),
                                     std::string("H5Dopen2(") + schema.table + ")", s.path);
  for (const auto& [key, value] : batch.attributes()) write_string_attribute(dataset.get(), key, value, s.path);
}

void hdf5_sink::write_root_attribute(const std::string& key, const std::string& value) {
  auto& s = *m_state;
  s.order.require_open("write_root_attribute");
  if (key == "schema_version") throw std::invalid_argument("kstudy: schema_version is written by the archive itself");
  write_string_attribute(s.file.get(), key, value, s.path);
}

void hdf5_sink::write_shard(const shard_record& shard) {
  auto& s = *m_state;
  s.order.require_open("write_shard");
  const std::string name = std::to_string(shard.index);
  h5_handle shards = open_or_create_group(s.file.get(), k_shards_group, s.path);
  if (link_exists(shards.get(), name, s.path))
    throw std::runtime_error("kstudy: archive '" + s.path + "' already records shard " + name);
  h5_handle group = open_or_create_group(shards.get(), name, s.path);
  for (const auto& [key, value] : shard.metadata.root) write_string_attribute(group.get(), key, value, s.path);
  write_string_attribute(group.get(), "source", shard.source, s.path);
  h5_handle environment = open_or_create_group(group.get(), k_environment_group, s.path);
  for (const auto& [key, value] : shard.metadata.environment)
    write_string_attribute(environment.get(), key, value, s.path);
  create_record_dataset(group.get(), schema_of<ceiling_record>(), s.path);
  append_records(group.get(), record_batch(shard.ceilings), s.path);
}

void hdf5_sink::flush() {
  auto& s = *m_state;
  s.order.require_open("flush");
  check(H5Fflush(s.file.get(), H5F_SCOPE_GLOBAL), "H5Fflush", s.path);
}

void hdf5_sink::end_experiment(const std::string& name) {
  auto& s = *m_state;
  s.order.check_end(name);
  s.experiment_group.close_checked("H5Gclose", s.path);
  s.order.closed();
  // An experiment boundary is a natural durability point.
  check(H5Fflush(s.file.get(), H5F_SCOPE_GLOBAL), "H5Fflush", s.path);
}

void hdf5_sink::finish() {
  auto& s = *m_state;
  s.order.finish();
  s.experiment_group.close_checked("H5Gclose", s.path);
  s.experiments.close_checked("H5Gclose", s.path);
  check(H5Fflush(s.file.get(), H5F_SCOPE_GLOBAL), "H5Fflush", s.path);
  write_digests(s.file.get(), s.path);
  check(H5Fflush(s.file.get(), H5F_SCOPE_GLOBAL), "H5Fflush", s.path);
  s.file.close_checked("H5Fclose", s.path);
}

}  // namespace kstudy
