// Kind `layout_conversion`: resident row-major -> feature-major conversion of a rows x features float table, the
// cost a feature-major kernel must amortise when its input arrives row-major (the break-even).
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "detail/runner_support.hpp"
#include "kstudy/experiment_fields.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/probes.hpp"

namespace kstudy {
namespace {

// The kind's own keys (experiment::parameters): the table's rows x features grid.
struct layout_conversion_parameters {
  std::vector<std::int64_t> rows, features;
};

void parse_layout_conversion(const nlohmann::json& doc, experiment& e, nlohmann::json& normalised) {
  using namespace experiment_fields;
  for (const char* axis : {"rows", "features"})
    if (!doc.contains(axis)) fail(e.source, axis, "required for kind layout_conversion");
  layout_conversion_parameters p;
  p.rows = integer_axis(doc["rows"], e.source, "rows");
  p.features = integer_axis(doc["features"], e.source, "features");
  for (const auto r : p.rows)
    for (const auto f : p.features)
      if (f > std::numeric_limits<std::int64_t>::max() / 8 / r)
        fail(e.source, "rows",
             std::to_string(r) + " rows x " + std::to_string(f) + " features overflows a 64-bit byte count");
  e.timers = {timer_kind::layout_conversion};
  normalised["rows"] = p.rows;
  normalised["features"] = p.features;
  e.set_parameters(std::move(p));
}

void run_layout_conversion(replication_context& ctx) {
  const auto& e = ctx.definition;
  const auto& p = e.parameters<layout_conversion_parameters>();
  std::int64_t point = 0;
  for (const auto rows : p.rows)
    for (const auto features : p.features) {
      const std::int64_t this_point = point++;
      if (ctx.done.count(this_point)) continue;
      sample_record base;
      base.experiment = e.name;
      base.variant = "convert_to_feature_major";
      base.layout = "row_major";
      base.memory_kind = "device";
      base.rows = rows;
      base.features = features;
      base.bytes = 2 * rows * features * std::int64_t(sizeof(float));  // read once, written once
      base.point = this_point;
      base.replication = ctx.replication;
      base.timer = timer_kind::layout_conversion;
      auto keys = detail::point_keys(e, ctx.replication, this_point);
      keys.rows = rows;
      keys.features = features;
      keys.bytes = base.bytes;
      measure_point(ctx, keys, [&] {
        detail::write_probe_point(
            ctx.sink, base, probes::time_layout_conversion(rows, features, e.protocol.warmups, e.protocol.trials));
      });
    }
}

experiment_kind layout_conversion_kind() {
  experiment_kind kind;
  kind.name = "layout_conversion";
  kind.description = "resident row-major -> feature-major conversion of a rows x features table";
  kind.keys = {"rows", "features"};
  kind.parse = parse_layout_conversion;
  kind.point_count = [](const experiment& e) {
    const auto& p = e.parameters<layout_conversion_parameters>();
    return std::int64_t(p.rows.size() * p.features.size());
  };
  kind.run = run_layout_conversion;
  kind.roof = [](const summary_record& point, const std::vector<ceiling_record>& ceilings) {
    return find_ceiling(ceilings, "device_copy", clock_of(point.timer));  // it reads and writes the table once
  };
  return kind;
}

const experiment_kind_registration register_layout_conversion{layout_conversion_kind()};

}  // namespace
}  // namespace kstudy
