// What an archive's experiment group carries beside its definition (kstudy/runner/experiment_facts.hpp): the facts the
// registries hold, so a reader takes them from the file and keeps no list of its own.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kstudy/ceilings.hpp"
#include "kstudy/runner/experiment_facts.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/operation.hpp"

namespace {

TEST(ExperimentFacts, AKindTimingFirstCallsIsNotSteadyState) {
  EXPECT_EQ(kstudy::experiment_facts(R"({"kind": "cold_compile", "operation": "scoring"})").at("steady_state"),
            "false");
  EXPECT_EQ(kstudy::experiment_facts(R"({"kind": "sweep", "operation": "scoring"})").at("steady_state"), "true");
  EXPECT_EQ(kstudy::experiment_facts(R"({"kind": "transfer"})").at("steady_state"), "true");
}

TEST(ExperimentFacts, UnknownKindsAndBrokenDefinitionsSayNothing) {
  EXPECT_EQ(kstudy::experiment_facts(R"({"kind": "no_such_kind"})").count("steady_state"), 0u);
  EXPECT_TRUE(kstudy::experiment_facts("not json").empty());
  EXPECT_TRUE(kstudy::experiment_facts("[1, 2]").empty());
  EXPECT_EQ(kstudy::experiment_facts(R"({"kind": "sweep", "operation": "no_such_operation"})").count("headline_points"),
            0u);
}

TEST(ExperimentFacts, HeadlinePointsAreEachNamedOperationsOwn) {
  // Every registered operation that declares a headline point appears under its name, with its extents.
  for (const kstudy::operation* op : kstudy::operation_registry::instance().all()) {
    const auto& info = op->info();
    const auto facts = kstudy::experiment_facts(R"({"kind": "sweep", "operation": [")" + info.name + R"("]})");
    if (info.headline_point.empty()) {
      EXPECT_EQ(facts.count("headline_points"), 0u) << info.name;
      continue;
    }
    ASSERT_EQ(facts.count("headline_points"), 1u) << info.name;
    const auto points = nlohmann::json::parse(facts.at("headline_points"));
    EXPECT_EQ(points.size(), 1u) << info.name;
    EXPECT_EQ(points.at(info.name).get<std::vector<std::int64_t>>(), info.headline_point) << info.name;
    // The point has one extent per axis of the operation.
    EXPECT_EQ(info.headline_point.size(), info.axes.size()) << info.name;
  }
}

// Each kind picks the roof its points are quoted against; a roof of another clock is never one.
TEST(ExperimentKinds, EachKindPicksItsPointsRoof) {
  const auto ceiling = [](const char* name, kstudy::timer_kind clock) {
    kstudy::ceiling_record c;
    c.name = name;
    c.clock = clock;
    c.bytes_per_second = 1e9;
    return c;
  };
  using kstudy::timer_kind;
  const std::vector<kstudy::ceiling_record> ceilings{
      ceiling("device_read", timer_kind::device_events), ceiling("device_read", timer_kind::host_wall),
      ceiling("host_read", timer_kind::host_wall), ceiling("device_copy", timer_kind::device_events),
      ceiling("h2d_pinned", timer_kind::host_wall)};
  const auto roof = [&](const char* kind, timer_kind timer, std::string direction = "", std::string memory = "") {
    kstudy::summary_record point;
    point.timer = timer;
    point.direction = std::move(direction);
    point.memory_kind = std::move(memory);
    const auto* k = kstudy::experiment_kind_registry::instance().find(kind);
    EXPECT_NE(k, nullptr) << kind;
    const kstudy::roof_rule rule = k && k->roof ? k->roof : kstudy::read_roof;  // null: the default rule
    const kstudy::ceiling_record* r = k ? rule(point, ceilings) : nullptr;
    return r ? r->name + "@" + kstudy::to_string(r->clock) : std::string("none");
  };
  EXPECT_EQ(roof("sweep", timer_kind::device_events), "device_read@device_events");
  EXPECT_EQ(roof("sweep", timer_kind::resident_wall), "device_read@host_wall");
  EXPECT_EQ(roof("sweep", timer_kind::host_wall), "host_read@host_wall");
  EXPECT_EQ(roof("sweep", timer_kind::one_shot), "none");
  EXPECT_EQ(roof("transfer", timer_kind::transfer, "h2d", "pinned"), "h2d_pinned@host_wall");
  EXPECT_EQ(roof("transfer", timer_kind::transfer, "d2h", "pageable"), "none");  // not measured in this run
  // Its only device_copy roof is on CUDA events; the conversion is timed on the host clock: no roof.
  EXPECT_EQ(roof("layout_conversion", timer_kind::layout_conversion), "none");
  EXPECT_EQ(roof("launch", timer_kind::launch), "none");
}

}  // namespace
