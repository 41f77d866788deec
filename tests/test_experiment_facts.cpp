// What an archive's experiment group carries beside its definition (kstudy/experiment_facts.hpp): the facts the
// registries hold, so a reader takes them from the file and keeps no list of its own.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kstudy/experiment_facts.hpp"
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

}  // namespace
