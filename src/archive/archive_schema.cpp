#include "kstudy/archive_schema.hpp"

#include <nlohmann/json.hpp>
#include <string>

#include "detail/record_fields.hpp"
#include "kstudy/archive.hpp"
#include "kstudy/sink.hpp"

namespace kstudy {
namespace {

const char* type_name(field_type type) {
  switch (type) {
    case field_type::text:
      return "text";
    case field_type::int64:
      return "int64";
    case field_type::int32:
      return "int32";
    case field_type::real:
      return "float64";
    case field_type::boolean:
      return "bool";
    case field_type::named_enum:
      return "enum_name";  // an enum stored as its name
  }
  return "unknown";
}

}  // namespace

std::string archive_schema_json() {
  nlohmann::ordered_json tables = nlohmann::ordered_json::array();
  for (const record_schema* schema : archive_detail::record_schemas()) {
    nlohmann::ordered_json fields = nlohmann::ordered_json::array();
    for (const record_field& field : schema->fields) {
      nlohmann::ordered_json column{{"name", field.name}, {"type", type_name(field.type)}};
      if (field.former_name != nullptr) column["former_name"] = field.former_name;
      fields.push_back(std::move(column));
    }
    tables.push_back({{"table", schema->table},
                      {"units", schema->units},
                      {"optional", schema->optional},
                      {"fields", std::move(fields)}});
  }
  nlohmann::ordered_json doc{
      {"schema_version", archive_schema_version}, {"generated_by", "kstudy schema"}, {"tables", std::move(tables)}};
  return doc.dump(1) + "\n";
}

}  // namespace kstudy
