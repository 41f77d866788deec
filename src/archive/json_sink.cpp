// The JSON copy of a run: the archive's content as one document, for tools that don't read HDF5.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "detail/record_fields.hpp"
#include "kstudy/archive.hpp"

namespace kstudy {

using archive_detail::record_table;
using json = nlohmann::ordered_json;  // keeps the struct's member order in every row

namespace {

template <class R>
json to_json_row(const R& record) {
  json row = json::object();
  for (const auto& field : record_table<R>::fields()) {
    std::visit(
        [&](auto member) {
          const auto& value = record.*member;
          if constexpr (archive_detail::is_named_enum_v<std::decay_t<decltype(value)>>)
            row[field.name] = to_string(value);
          else
            row[field.name] = value;
        },
        field.member);
  }
  return row;
}

// Definitions and protocols are JSON text: embed them as JSON so jq can reach inside; keep text that
// does not parse as a string rather than lose it.
json embed(const std::string& text) {
  json parsed = json::parse(text, nullptr, false);
  return parsed.is_discarded() ? json(text) : parsed;
}

}  // namespace

struct json_sink::state {
  std::string path;
  json document;
  std::string experiment;
  bool finished = false;

  void require_experiment(const char* call) const {
    if (finished) throw std::logic_error(std::string("kstudy: json_sink::") + call + " after finish()");
    if (experiment.empty())
      throw std::logic_error(std::string("kstudy: json_sink::") + call + " outside begin_experiment/end_experiment");
  }
  template <class R>
  void append(const char* call, const std::vector<R>& records) {
    require_experiment(call);
    json& rows = document["experiments"][experiment][record_table<R>::dataset];
    for (const auto& record : records) rows.push_back(to_json_row(record));
  }
};

json_sink::json_sink(const std::string& path) : m_state(std::make_unique<state>()) {
  archive_detail::check_path_writable(path, "JSON output");
  m_state->path = path;
  m_state->document = {{"schema_version", archive_schema_version},
                       {"root", json::object()},
                       {"environment", json::object()},
                       {"experiments", json::object()}};
}

json_sink::~json_sink() = default;

void json_sink::begin(const run_metadata& metadata) {
  auto& doc = m_state->document;
  doc["root"] = metadata.root;
  doc["root"]["schema_version"] = archive_schema_version;
  doc["environment"] = metadata.environment;
}

void json_sink::begin_experiment(const experiment_record& experiment) {
  auto& s = *m_state;
  if (s.finished) throw std::logic_error("kstudy: json_sink::begin_experiment after finish()");
  if (!s.experiment.empty())
    throw std::logic_error("kstudy: json_sink::begin_experiment('" + experiment.name + "') while experiment '" +
                           s.experiment + "' is open");
  archive_detail::check_experiment_name(experiment.name);
  json& experiments = s.document["experiments"];
  if (experiments.contains(experiment.name)) {
    const auto existing = experiments[experiment.name]["fingerprint"].get<std::string>();
    if (existing != experiment.fingerprint)
      throw std::runtime_error("kstudy: JSON output '" + s.path + "' already holds experiment '" + experiment.name +
                               "' with fingerprint " + existing + ", but this run's definition has fingerprint " +
                               experiment.fingerprint);
  } else {
    json entry = {{"definition", embed(experiment.definition_json)},
                  {"protocol", embed(experiment.protocol_json)},
                  {"fingerprint", experiment.fingerprint}};
    for (const char* table : archive_detail::dataset_names()) entry[table] = json::array();
    experiments[experiment.name] = std::move(entry);
  }
  s.experiment = experiment.name;
}

void json_sink::write_samples(const std::vector<sample_record>& samples) { m_state->append("write_samples", samples); }
void json_sink::write_gates(const std::vector<gate_record>& gates) { m_state->append("write_gates", gates); }
void json_sink::write_ceilings(const std::vector<ceiling_record>& ceilings) {
  m_state->append("write_ceilings", ceilings);
}
void json_sink::write_summaries(const std::vector<summary_record>& summaries) {
  m_state->append("write_summaries", summaries);
}
void json_sink::write_attribution(const std::vector<attribution_record>& attribution) {
  m_state->append("write_attribution", attribution);
}

void json_sink::write_health(const std::vector<health_record>& health) { m_state->append("write_health", health); }
void json_sink::write_variants(const std::vector<variant_record>& variants) {
  m_state->append("write_variants", variants);
}

void json_sink::write_profile(const std::vector<profile_record>& profile,
                              const std::map<std::string, std::string>& attributes) {
  auto& s = *m_state;
  s.append("write_profile", profile);
  json& entry = s.document["experiments"][s.experiment];
  json& rows = entry[record_table<profile_record>::dataset];
  if (!rows.is_array()) rows = json::array();  // the table exists even when this call brought no row
  for (const auto& [key, value] : attributes) entry["profile_attributes"][key] = value;
}

void json_sink::end_experiment(const std::string& name) {
  auto& s = *m_state;
  s.require_experiment("end_experiment");
  if (name != s.experiment)
    throw std::logic_error("kstudy: json_sink::end_experiment('" + name + "') but the open experiment is '" +
                           s.experiment + "'");
  s.experiment.clear();
}

void json_sink::finish() {
  auto& s = *m_state;
  if (s.finished) throw std::logic_error("kstudy: json_sink::finish() called twice");
  s.finished = true;
  s.experiment.clear();
  const std::string temporary = s.path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("kstudy: cannot open '" + temporary + "' for writing: " + std::strerror(errno));
    // Replace invalid UTF-8 (e.g. a driver's error text in a status) instead of throwing at the very end.
    out << s.document.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    out.close();
    if (!out) {
      std::remove(temporary.c_str());
      throw std::runtime_error("kstudy: writing '" + temporary + "' failed");
    }
  }
  if (std::rename(temporary.c_str(), s.path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw std::runtime_error("kstudy: cannot rename '" + temporary + "' to '" + s.path + "': " + reason);
  }
}

}  // namespace kstudy
