#include "kstudy/runner/experiment_facts.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "kstudy/experiment_kind.hpp"
#include "kstudy/operation.hpp"

namespace kstudy {

std::map<std::string, std::string> experiment_facts(const std::string& definition_json) {
  std::map<std::string, std::string> facts;
  const auto doc = nlohmann::json::parse(definition_json, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return facts;
  if (const auto kind = doc.find("kind"); kind != doc.end() && kind->is_string())
    if (const experiment_kind* k = experiment_kind_registry::instance().find(kind->get<std::string>()))
      facts["steady_state"] = k->steady_state ? "true" : "false";
  nlohmann::json headline = nlohmann::json::object();
  if (const auto named = doc.find("operation"); named != doc.end()) {
    const auto operations = named->is_array() ? *named : nlohmann::json::array({*named});
    for (const auto& name : operations) {
      if (!name.is_string()) continue;
      const operation* op = operation_registry::instance().find(name.get<std::string>());
      if (op != nullptr && !op->info().headline_point.empty())
        headline[name.get<std::string>()] = op->info().headline_point;
    }
  }
  if (!headline.empty()) facts["headline_points"] = headline.dump();
  return facts;
}

}  // namespace kstudy
