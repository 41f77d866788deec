// The JSON copy of a run: the archive's content as one document, for tools that don't read HDF5.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <variant>

#include "detail/call_order.hpp"
#include "detail/record_fields.hpp"
#include "kstudy/runner/archive.hpp"

namespace kstudy {

using json = nlohmann::ordered_json;  // keeps the struct's member order in every row

namespace {

json to_json_row(const record_schema& schema, const void* record) {
  json row = json::object();
  for (std::size_t i = 0; i < schema.fields.size(); ++i) {
    std::visit(
        [&](const auto& value) {
          if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string_view>)
            row[schema.fields[i].name] = std::string(value);
          else
            row[schema.fields[i].name] = value;
        },
        schema.read(record, i));
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
  archive_detail::call_order order{"json_sink"};
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
  s.order.check_begin(experiment.name);
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
    for (const record_schema* schema : archive_detail::record_schemas())
      if (!schema->optional) entry[schema->table] = json::array();
    experiments[experiment.name] = std::move(entry);
  }
  s.order.opened(experiment.name);
}

void json_sink::do_write(const record_batch& batch) {
  auto& s = *m_state;
  const record_schema& schema = batch.schema();
  s.order.require_experiment(std::string("write(") + schema.table + ")");
  json& entry = s.document["experiments"][s.order.experiment()];
  json& rows = entry[schema.table];
  if (!rows.is_array()) rows = json::array();  // an optional table: it exists once written, even without a row
  for (std::size_t i = 0; i < batch.size(); ++i) rows.push_back(to_json_row(schema, batch.record(i)));
  for (const auto& [key, value] : batch.attributes()) entry[std::string(schema.table) + "_attributes"][key] = value;
}

void json_sink::end_experiment(const std::string& name) {
  auto& s = *m_state;
  s.order.check_end(name);
  s.order.closed();
}

void json_sink::finish() {
  auto& s = *m_state;
  s.order.finish();
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
