// The host roofs per cache level (kstudy/ceilings.hpp): which roof a host point is quoted against, what the host's
// caches are, and that the level roofs are measured.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "kstudy/ceilings.hpp"
#include "kstudy/records.hpp"

namespace {

using kstudy::ceiling_record;
using kstudy::timer_kind;

ceiling_record roof(const std::string& name, std::int64_t bytes, double bytes_per_second,
                    timer_kind clock = timer_kind::host_wall) {
  ceiling_record c;
  c.name = name;
  c.bytes = bytes;
  c.bytes_per_second = bytes_per_second;
  c.clock = clock;
  return c;
}

std::string name_of(const ceiling_record* c) { return c ? c->name : std::string("none"); }

// A host with 64 KiB of L1, 2 MiB of L2 and 32 MiB of L3 over its threads: each level roof measured at half of it.
const std::vector<ceiling_record> host_roofs{
    roof("host_read", std::int64_t(1) << 30, 50e9), roof("host_read_l3", std::int64_t(16) << 20, 150e9),
    roof("host_read_l1", std::int64_t(32) << 10, 600e9), roof("host_read_l2", std::int64_t(1) << 20, 300e9),
    roof("device_read", std::int64_t(1) << 30, 3e12, timer_kind::device_events)};

TEST(HostRoof, IsTheFirstLevelThatHoldsTheWorkingSet) {
  const auto at = [](double bytes) { return name_of(kstudy::host_roof_for(host_roofs, bytes, timer_kind::host_wall)); };
  EXPECT_EQ(at(1024), "host_read_l1");
  EXPECT_EQ(at(64 << 10), "host_read_l1");  // the whole level: twice the roof's working set
  EXPECT_EQ(at((64 << 10) + 4), "host_read_l2");
  EXPECT_EQ(at(2 << 20), "host_read_l2");
  EXPECT_EQ(at(4 << 20), "host_read_l3");
  EXPECT_EQ(at(32 << 20), "host_read_l3");
  EXPECT_EQ(at(64 << 20), "host_read");  // past the last level: memory
  EXPECT_EQ(at(0), "host_read_l1");
}

TEST(HostRoof, IsTheDramRoofWithoutLevelRoofsAndNoneOnAnotherClock) {
  const std::vector<ceiling_record> dram_only{roof("host_read", std::int64_t(1) << 30, 50e9)};
  EXPECT_EQ(name_of(kstudy::host_roof_for(dram_only, 4096, timer_kind::host_wall)), "host_read");
  EXPECT_EQ(name_of(kstudy::host_roof_for(host_roofs, 4096, timer_kind::device_events)), "none");
}

// The default rule quotes a host_wall point against the roof of its working set (its traffic: bytes/s x median).
TEST(HostRoof, TheDefaultRuleReadsTheWorkingSetFromThePoint) {
  kstudy::summary_record point;
  point.timer = timer_kind::host_wall;
  point.median = 1e-3;
  point.bytes_per_second = double(std::int64_t(4) << 20) / point.median;  // 4 MiB a call
  EXPECT_EQ(name_of(kstudy::read_roof(point, host_roofs)), "host_read_l3");
  point.bytes_per_second = double(std::int64_t(1) << 30) / point.median;
  EXPECT_EQ(name_of(kstudy::read_roof(point, host_roofs)), "host_read");
}

TEST(HostCaches, LevelsAscendAndPrivateCachesGrowWithTheThreads) {
  const auto one = kstudy::host_cache_levels(1);
  if (one.empty()) GTEST_SKIP() << "no cache information in sysfs here";
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_GT(one[i].capacity, 0);
    if (i > 0) {
      EXPECT_GE(one[i].level, one[i - 1].level);
    }
  }
  EXPECT_EQ(one.front().level, 1);
  // The first level is private to a core: two threads on two cores reach twice as much of it.
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU";
  const auto two = kstudy::host_cache_levels(2);
  ASSERT_EQ(two.size(), one.size());
  EXPECT_EQ(two.front().capacity, 2 * one.front().capacity);
}

#ifndef KOKKOS_ENABLE_CUDA
// In a host build the ceilings include a roof per cache level beside host_read, each on the host clock, measured
// at a working set within its level.
TEST(HostRoof, LevelRoofsAreMeasuredBesideTheDramRoof) {
  const int threads = Kokkos::DefaultHostExecutionSpace().concurrency();
  const auto levels = kstudy::host_cache_levels(threads);
  if (levels.empty()) GTEST_SKIP() << "no cache information in sysfs here";
  kstudy::ceiling_options options;
  options.device_bytes = std::int64_t(16) << 20;
  options.host_bytes = std::int64_t(256) << 20;
  options.trials = 3;
  const auto ceilings = kstudy::measure_ceilings(options);
  const auto* dram = kstudy::find_ceiling(ceilings, "host_read", timer_kind::host_wall);
  ASSERT_NE(dram, nullptr);
  for (const auto& level : levels) {
    const auto* c = kstudy::find_ceiling(ceilings, "host_read_l" + std::to_string(level.level), timer_kind::host_wall);
    ASSERT_NE(c, nullptr) << "level " << level.level;
    EXPECT_GT(c->bytes_per_second, 0.0);
    EXPECT_LE(double(c->bytes), double(level.capacity) * kstudy::host_cache_fill);
  }
  // Which is faster is the machine's business (and a loaded CI machine's), not a test's.
}
#endif

}  // namespace
