#include "kstudy/runner/archive_schema.hpp"

#include <nlohmann/json.hpp>
#include <string>

#include "core/detail/name_table.hpp"
#include "detail/record_fields.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/records.hpp"
#include "kstudy/sink.hpp"

namespace kstudy {
namespace {

// The column types as other languages read them; a named enum is stored as its name.
constexpr detail::name_table<field_type, 6> type_names{{{field_type::text, "text"},
                                                        {field_type::int64, "int64"},
                                                        {field_type::int32, "int32"},
                                                        {field_type::real, "float64"},
                                                        {field_type::boolean, "bool"},
                                                        {field_type::named_enum, "enum_name"}}};

}  // namespace

std::string archive_schema_json() {
  nlohmann::ordered_json tables = nlohmann::ordered_json::array();
  for (const record_schema* schema : archive_detail::record_schemas()) {
    nlohmann::ordered_json fields = nlohmann::ordered_json::array();
    for (const record_field& field : schema->fields) {
      nlohmann::ordered_json column{{"name", field.name},
                                    {"type", detail::name_of(type_names, field.type, "field_type")}};
      if (field.former_name != nullptr) column["former_name"] = field.former_name;
      fields.push_back(std::move(column));
    }
    tables.push_back({{"table", schema->table},
                      {"units", schema->units},
                      {"optional", schema->optional},
                      {"fields", std::move(fields)}});
  }
  // The columns that say which problem point a samples or summary row measured, beside its experiment, variant and
  // timer: summarise()'s key less `bytes` (a sweep's bytes follow from the point and the timer; the transfer
  // calibration's size is read as bytes by name). Not `pitch`: within an experiment it follows from the layout and
  // the features (the experiment's row_padding), and the summary table does not store it. Readers join points on
  // these names (scripts/kstudy_py/archive.py: POINT_KEY) instead of spelling them.
  const auto point_key = nlohmann::ordered_json::array(
      {"layout", "memory_kind", "direction", "rows", "features", "depth", "block_size", "cache"});
  // The timers (KSTUDY_TIMER_KINDS): readers take a timer's clock and scope from here, not from a list of names.
  auto timers = nlohmann::ordered_json::array();
  for (const auto& timer : timer_kinds())
    timers.push_back(
        {{"name", timer.name}, {"clock", timer.clock}, {"scope", timer.scope}, {"description", timer.description}});
  // The phases of a point run (KSTUDY_POINT_PHASES) and the health-table column of each.
  auto phases = nlohmann::ordered_json::array();
  for (const auto& phase : point_phases())
    phases.push_back({{"name", phase.name}, {"column", phase.column}, {"description", phase.description}});
  nlohmann::ordered_json doc{{"schema_version", archive_schema_version},
                             {"generated_by", "kstudy schema"},
                             {"tables", std::move(tables)},
                             {"point_key", point_key},
                             {"timers", std::move(timers)},
                             {"point_phases", std::move(phases)}};
  return doc.dump(1) + "\n";
}

}  // namespace kstudy
