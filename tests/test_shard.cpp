// Shards: every (point, replication) unit belongs to exactly one shard. None of this needs Kokkos.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kstudy/experiment.hpp"
#include "kstudy/study.hpp"

namespace {

using namespace kstudy;

TEST(Shard, ParsesKOverN) {
  const auto s = parse_shard("2/8");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 8);
  EXPECT_EQ(s.text(), "2/8");
  EXPECT_EQ(parse_shard("0/1").count, 1);
  for (const char* bad : {"", "3", "3/3", "4/3", "-1/3", "1/0", "a/b", "1/", "/2", "1/2/3", "1.5/3", " 1/3", "1/9999999"})
    EXPECT_THROW(parse_shard(bad), std::invalid_argument) << bad;
}

// Every unit in exactly one shard, shards within one unit of each other in size, whatever the shape.
TEST(Shard, UnitsPartitionAcrossShards) {
  for (int points = 1; points <= 9; ++points)
    for (int replications = 1; replications <= 4; ++replications)
      for (int count = 1; count <= points * replications; ++count) {
        std::vector<int> sizes(static_cast<std::size_t>(count), 0);
        for (int p = 0; p < points; ++p)
          for (int r = 0; r < replications; ++r) {
            int owners = 0;
            for (int k = 0; k < count; ++k)
              if (in_shard({k, count}, p, r, replications)) {
                ++owners;
                ++sizes[static_cast<std::size_t>(k)];
              }
            ASSERT_EQ(owners, 1) << "point " << p << " replication " << r << " of " << count << " shards";
          }
        const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
        EXPECT_LE(*hi - *lo, 1) << points << " points x " << replications << " replications in " << count;
        EXPECT_GE(*lo, 1);
      }
  EXPECT_TRUE(in_shard({}, 5, 2, 3));  // not sharded: everything
}

TEST(Shard, PointCountsFollowTheAxes) {
  auto e = parse_experiment(R"({"name": "s", "rows": [10, 20, 30], "features": [4, 8], "block_sizes": [0, 64],
                                "variants": ["cpu_reference"], "timers": ["host_wall"],
                                "protocol": {"replications": 3}})",
                            "s.json");
  EXPECT_EQ(point_count(e), 12);
  EXPECT_EQ(shard_units(e, {}), 36);
  std::int64_t total = 0;
  for (int k = 0; k < 5; ++k) total += shard_units(e, {k, 5});
  EXPECT_EQ(total, 36);
  const auto transfer = load_experiment(resolve_experiment_path("transfer_calibration"));
  EXPECT_EQ(point_count(transfer),
            std::int64_t(transfer.sizes_bytes.size() * transfer.memory.size() * transfer.directions.size()));
}

}  // namespace
