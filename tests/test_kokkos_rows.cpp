// The row-kernel plumbing of the tuned Kokkos softmax and LayerNorm variants (variants/detail/kokkos_rows.hpp)
// without running a kernel: the plan a GPU gets (vector_length 32, teams of up to 32 warps) and a host gets
// (one thread, one lane) at the shapes that switch between its three shapes, the dispatch of every planned
// kernel, and the two merges the reductions apply (the (max, sum of exp) pair and Chan's (count, mean, M2)),
// including empty parts. The kernels themselves run in test_softmax.cpp and test_layernorm.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/kokkos_rows.hpp"

namespace {

namespace rows = kstudy::detail::rows;
using rows::shape;

struct expected_plan {
  std::int64_t rows, cols;
  bool vec4;
  shape s;
  int vec, items, team_size;
  std::int64_t league;
};

template <int LaneFloats = rows::team_floats>
void expect_plan(const expected_plan& e, int vector_length, int max_team_size) {
  const auto p = rows::plan_rows(e.rows, e.cols, e.vec4, vector_length, max_team_size, LaneFloats);
  const std::string at = std::to_string(e.rows) + " x " + std::to_string(e.cols) + (e.vec4 ? " (quads)" : "");
  EXPECT_EQ(p.shape, e.s) << at << ": " << rows::shape_name(p.shape);
  EXPECT_EQ(p.vec, e.vec) << at;
  EXPECT_EQ(p.items, e.items) << at;
  EXPECT_EQ(p.team_size, e.team_size) << at;
  EXPECT_EQ(p.vector_length, vector_length) << at;
  EXPECT_EQ(p.league, e.league) << at;
  // Every lane's registers (or chunk) together cover the row, or the row is streamed.
  const std::int64_t lanes = p.shape == shape::vector_rows ? vector_length : std::int64_t(p.team_size) * vector_length;
  if (p.shape != shape::team_rows_streamed) {
    EXPECT_GE(lanes * p.items * p.vec, e.cols) << at;
  }
  // The kernel the plan names exists.
  bool dispatched = false;
  rows::dispatch<true, LaneFloats>(p, [&](auto shape_c, auto vec_c, auto items_c) {
    dispatched = true;
    EXPECT_EQ(decltype(shape_c)::value, p.shape) << at;
    EXPECT_EQ(decltype(vec_c)::value, p.vec) << at;
    EXPECT_EQ(decltype(items_c)::value, p.items) << at;
  });
  EXPECT_TRUE(dispatched) << at;
}

TEST(KokkosRowsPlan, DeviceWarpPerRowThenTeamPerRowThenStreamed) {
  // A warp per row (8 rows a team, fewer when there are fewer rows) up to 32 lanes x 32 floats.
  expect_plan({7, 1, false, shape::vector_rows, 1, 1, 7, 1}, 32, 32);
  expect_plan({1000, 128, true, shape::vector_rows, 4, 1, 8, 125}, 32, 32);
  expect_plan({1001, 100, true, shape::vector_rows, 4, 1, 8, 126}, 32, 32);
  expect_plan({9, 33, false, shape::vector_rows, 1, 2, 8, 2}, 32, 32);
  expect_plan({65536, 768, true, shape::vector_rows, 4, 8, 8, 8192}, 32, 32);
  expect_plan({65536, 1024, true, shape::vector_rows, 4, 8, 8, 8192}, 32, 32);
  expect_plan({64, 1024, false, shape::vector_rows, 1, 32, 8, 8}, 32, 32);
  // A team per row, 16 floats a lane: the smallest power of two of warps that holds the row.
  expect_plan({3, 1025, false, shape::team_rows, 1, 16, 4, 3}, 32, 32);
  expect_plan({3, 1028, true, shape::team_rows, 4, 4, 4, 3}, 32, 32);
  expect_plan({65536, 4096, true, shape::team_rows, 4, 4, 8, 65536}, 32, 32);
  expect_plan({65536, 8192, true, shape::team_rows, 4, 4, 16, 65536}, 32, 32);
  expect_plan({65536, 16384, true, shape::team_rows, 4, 4, 32, 65536}, 32, 32);
  // Longer rows stream with the largest team.
  expect_plan({2, 16388, true, shape::team_rows_streamed, 4, 4, 32, 2}, 32, 32);
  expect_plan({2, 20000, true, shape::team_rows_streamed, 4, 4, 32, 2}, 32, 32);
  expect_plan({2, 20001, false, shape::team_rows_streamed, 1, 16, 32, 2}, 32, 32);
  // A team limited to 8 warps streams what it cannot hold.
  expect_plan({2, 4096, true, shape::team_rows, 4, 4, 8, 2}, 32, 8);
  expect_plan({2, 4097, false, shape::team_rows_streamed, 1, 16, 8, 2}, 32, 8);
}

TEST(KokkosRowsPlan, ThirtyTwoFloatsALaneHalveTheTeam) {
  // The LayerNorm and softmax kernels' choice (LaunchBounds<512, 2>: at most 16 warps a team).
  expect_plan<32>({65536, 1024, true, shape::vector_rows, 4, 8, 8, 8192}, 32, 16);  // warp rows unchanged
  expect_plan<32>({3, 1025, false, shape::team_rows, 1, 32, 2, 3}, 32, 16);
  expect_plan<32>({65536, 4096, true, shape::team_rows, 4, 8, 4, 65536}, 32, 16);  // the CUDA rung's 128 threads
  expect_plan<32>({65536, 8192, true, shape::team_rows, 4, 8, 8, 65536}, 32, 16);
  expect_plan<32>({65536, 16384, true, shape::team_rows, 4, 8, 16, 65536}, 32, 16);
  expect_plan<32>({2, 16388, true, shape::team_rows_streamed, 4, 8, 16, 2}, 32, 16);
  expect_plan<32>({2, 20001, false, shape::team_rows_streamed, 1, 32, 16, 2}, 32, 16);
}

TEST(KokkosRowsPlan, DispatchRefusesAPlanOfAnotherLaneWidth) {
  const auto p = rows::plan_rows(65536, 4096, true, 32, 32);  // 16 floats a lane
  const auto dispatch_32 = [&p] { rows::dispatch<true, 32>(p, [](auto, auto, auto) {}); };
  EXPECT_THROW(dispatch_32(), std::logic_error);
}

TEST(KokkosRowsPlan, HostRowPerTeamOfOneLane) {
  expect_plan({5, 1, false, shape::vector_rows, 1, 1, 1, 5}, 1, 1);
  expect_plan({5, 3, false, shape::vector_rows, 1, 4, 1, 5}, 1, 1);
  expect_plan({5, 16, true, shape::vector_rows, 4, 4, 1, 5}, 1, 1);
  expect_plan({5, 32, true, shape::vector_rows, 4, 8, 1, 5}, 1, 1);
  expect_plan({5, 32, false, shape::vector_rows, 1, 32, 1, 5}, 1, 1);
  expect_plan({5, 33, false, shape::team_rows_streamed, 1, 16, 1, 5}, 1, 1);
  expect_plan({5, 36, true, shape::team_rows_streamed, 4, 4, 1, 5}, 1, 1);
  expect_plan({4096, 4096, true, shape::team_rows_streamed, 4, 4, 1, 4096}, 1, 1);
}

// The pair of values v[first, last): exact max, float sum of exp(v - max).
rows::max_sum pair_of(const std::vector<float>& v, std::size_t first, std::size_t last) {
  auto p = rows::max_sum_combine::identity();
  for (std::size_t i = first; i < last; ++i) p.max = std::fmax(p.max, v[i]);
  if (first == last) return p;
  p.sum = 0.0f;
  for (std::size_t i = first; i < last; ++i) p.sum += std::exp(v[i] - p.max);
  return p;
}

TEST(KokkosRowsMerge, MaxSumPairsRescaleToTheLargerMax) {
  // Rows shifted far up (exp(x) overflows without the max) and down (underflows), and one huge outlier.
  for (const float offset : {0.0f, 500.0f, -500.0f}) {
    std::vector<float> v;
    for (int i = 0; i < 64; ++i) v.push_back(offset + 0.125f * float((i * 37) % 29) - 1.5f);
    v[41] = offset + 30.0f;
    double ref_sum = 0.0;
    const double ref_max = offset + 30.0;
    for (const float x : v) ref_sum += std::exp(double(x) - ref_max);
    // Parts of 8 joined left to right, and as a tree; an empty part anywhere changes nothing.
    auto sequential = rows::max_sum_combine::identity();
    std::vector<rows::max_sum> parts;
    for (std::size_t first = 0; first < v.size(); first += 8) {
      parts.push_back(pair_of(v, first, first + 8));
      rows::max_sum_combine::join(sequential, parts.back());
      rows::max_sum_combine::join(sequential, rows::max_sum_combine::identity());
    }
    while (parts.size() > 1) {
      std::vector<rows::max_sum> next;
      for (std::size_t i = 0; i < parts.size(); i += 2) {
        auto a = parts[i];
        rows::max_sum_combine::join(a, parts[i + 1]);
        next.push_back(a);
      }
      parts = next;
    }
    for (const auto& p : {sequential, parts[0]}) {
      EXPECT_EQ(p.max, float(ref_max)) << offset;
      EXPECT_NEAR(p.sum, ref_sum, 1e-5 * ref_sum) << offset;
    }
  }
  auto empty = rows::max_sum_combine::identity();
  rows::max_sum_combine::join(empty, rows::max_sum_combine::identity());
  EXPECT_EQ(empty.max, -INFINITY);
  EXPECT_EQ(empty.sum, 0.0f);  // not a NaN from exp(-inf - -inf)
  auto one = rows::max_sum{2.0f, 1.0f};
  auto joined = rows::max_sum_combine::identity();
  rows::max_sum_combine::join(joined, one);
  EXPECT_EQ(joined.max, 2.0f);
  EXPECT_EQ(joined.sum, 1.0f);
  rows::max_sum_combine::join(one, rows::max_sum_combine::identity());
  EXPECT_EQ(one.max, 2.0f);
  EXPECT_EQ(one.sum, 1.0f);
}

// Two-pass statistics of v[first, last), as a lane takes them from its registers.
rows::moments moments_of(const std::vector<float>& v, std::size_t first, std::size_t last) {
  if (first == last) return rows::moments_combine::identity();
  float sum = 0.0f;
  for (std::size_t i = first; i < last; ++i) sum += v[i];
  const float count = float(last - first), mean = sum / count;
  float m2 = 0.0f;
  for (std::size_t i = first; i < last; ++i) m2 += (v[i] - mean) * (v[i] - mean);
  return {count, mean, m2};
}

TEST(KokkosRowsMerge, ChanMomentsMatchTheTwoPassStatistics) {
  // A row offset far from 0 (a one-pass sum of squares would cancel), parts of unequal sizes and empty ones.
  std::vector<float> v;
  for (int i = 0; i < 1000; ++i) v.push_back(4096.0f + float((i * 7919) % 2001 - 1000) / 1000.0f);
  double mean = 0.0, m2 = 0.0;
  for (const float x : v) mean += x;
  mean /= double(v.size());
  for (const float x : v) m2 += (x - mean) * (x - mean);
  auto total = rows::moments_combine::identity();
  std::size_t first = 0;
  for (std::size_t size = 0; first < v.size(); size = (size + 7) % 23) {
    const std::size_t last = std::min(v.size(), first + size);
    rows::moments_combine::join(total, moments_of(v, first, last));
    first = last;
  }
  EXPECT_EQ(total.count, 1000.0f);
  EXPECT_NEAR(total.mean, mean, 4096 * 1e-6);
  EXPECT_NEAR(total.m2 / 1000.0, m2 / 1000.0, 1e-3 * m2 / 1000.0);
  auto empty = rows::moments_combine::identity();
  rows::moments_combine::join(empty, rows::moments_combine::identity());
  EXPECT_EQ(empty.count, 0.0f);
  EXPECT_EQ(empty.m2, 0.0f);
}

}  // namespace
