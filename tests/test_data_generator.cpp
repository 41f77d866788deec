// The deterministic data generator: the same seed gives the same table in every layout and the same
// float64 statistics whatever the thread count; outliers at the requested rate, far outside the clip;
// layout copies carry the current values; bad options are refused.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "scoring/detail/scoring_kokkos_variant.hpp"
#include "scoring/data_generator.hpp"

namespace {

using kstudy::host_dataset;
using kstudy::make_shape;
using kstudy::table_layout;

// Restores the OpenMP thread count on scope exit.
class omp_threads {
 public:
  explicit omp_threads(int n) : m_saved(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~omp_threads() { omp_set_num_threads(m_saved); }
  omp_threads(const omp_threads&) = delete;
  omp_threads& operator=(const omp_threads&) = delete;

 private:
  int m_saved;
};

TEST(DataGenerator, SameValuesInEveryLayoutPaddingIsNaN) {
  const std::int64_t rows = 1001, features = 7;
  const host_dataset rm(make_shape(rows, features, table_layout::row_major));
  const host_dataset fm(make_shape(rows, features, table_layout::feature_major));
  const host_dataset padded(make_shape(rows, features, table_layout::padded_row_major, 3));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t f = 0; f < features; ++f) {
      const float v = rm.x()[rm.shape().offset(r, f)];
      ASSERT_EQ(v, fm.x()[fm.shape().offset(r, f)]) << r << "," << f;
      ASSERT_EQ(v, padded.x()[padded.shape().offset(r, f)]) << r << "," << f;
      ASSERT_EQ(v, kstudy::generated_value(rm.options().seed, r, f, rm.options().outlier_fraction));
    }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t p = features; p < padded.shape().pitch; ++p)
      ASSERT_TRUE(std::isnan(padded.x()[r * padded.shape().pitch + p])) << "padding of row " << r;
  EXPECT_EQ(rm.mean(), fm.mean());
  EXPECT_EQ(rm.inv_std(), padded.inv_std());
  EXPECT_EQ(rm.weight(), fm.weight());
}

// Statistics are fixed-order block sums: bit-identical with 1 and 2 threads, and on a table larger
// than one block (16,384 rows).
TEST(DataGenerator, StatisticsDoNotDependOnTheThreadCount) {
  const auto shape = make_shape(40000, 5, table_layout::feature_major);
  std::vector<float> mean_one, inv_std_one;
  {
    omp_threads one(1);
    const host_dataset d(shape);
    mean_one = d.mean();
    inv_std_one = d.inv_std();
  }
  omp_threads two(2);
  const host_dataset d(shape);
  EXPECT_EQ(d.mean(), mean_one);
  EXPECT_EQ(d.inv_std(), inv_std_one);
}

// mean and 1/std are those of the stored column, computed in float64.
TEST(DataGenerator, StatisticsAreTheColumnsFloat64MomentsAndOutliersAreRare) {
  const std::int64_t rows = 50000, features = 4;
  const host_dataset d(make_shape(rows, features, table_layout::row_major));
  std::int64_t outliers = 0;
  for (std::int64_t f = 0; f < features; ++f) {
    double sum = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) sum += d.x()[d.shape().offset(r, f)];
    const double mean = sum / rows;
    double squares = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const double dev = d.x()[d.shape().offset(r, f)] - mean;
      squares += dev * dev;
    }
    const double stddev = std::sqrt(squares / rows);
    EXPECT_NEAR(d.mean()[f], mean, 1e-6 * (std::fabs(mean) + stddev)) << "feature " << f;
    EXPECT_NEAR(d.inv_std()[f], 1.0 / stddev, 1e-6 / stddev) << "feature " << f;
    // Outliers lie 20-60 scales from the location; with 1% of them the standard deviation is about
    // 4 scales, so anything past 4 standard deviations is an outlier, never a normal draw here.
    for (std::int64_t r = 0; r < rows; ++r) outliers += std::fabs(d.x()[d.shape().offset(r, f)] - mean) > 4.0 * stddev;
  }
  const double rate = double(outliers) / double(rows * features);
  EXPECT_GT(rate, 0.005);
  EXPECT_LT(rate, 0.015);
}

TEST(DataGenerator, SeedsDifferAndOptionsAreChecked) {
  kstudy::dataset_options a, b;
  b.seed = a.seed + 1;
  const auto shape = make_shape(100, 3, table_layout::row_major);
  EXPECT_NE(host_dataset(shape, a).x(), host_dataset(shape, b).x());
  kstudy::dataset_options bad;
  bad.outlier_fraction = 1.5;
  EXPECT_THROW(host_dataset(shape, bad), std::invalid_argument);
  EXPECT_THROW(host_dataset(make_shape(0, 3, table_layout::row_major)), std::invalid_argument);
}

// with_layout copies the table as it is now (a test's edits included), statistics too.
TEST(DataGenerator, LayoutCopyCarriesTheCurrentValues) {
  host_dataset d(make_shape(37, 6, table_layout::row_major));
  d.x()[d.shape().offset(5, 2)] = 123.0f;
  const auto fm = d.with_layout(table_layout::feature_major);
  const auto padded = fm.with_layout(table_layout::padded_row_major, 2);
  EXPECT_EQ(fm.x()[fm.shape().offset(5, 2)], 123.0f);
  EXPECT_EQ(padded.x()[padded.shape().offset(5, 2)], 123.0f);
  for (std::int64_t r = 0; r < 37; ++r)
    for (std::int64_t f = 0; f < 6; ++f)
      ASSERT_EQ(d.x()[d.shape().offset(r, f)], padded.x()[padded.shape().offset(r, f)]);
  EXPECT_EQ(padded.mean(), d.mean());
}

// Grids spread their waves of work evenly: every team strides over the same number of blocks.
TEST(GridSizing, BalancedTeams) {
  using kstudy::balanced_teams;
  EXPECT_EQ(balanced_teams(0, 528), 1);
  EXPECT_EQ(balanced_teams(100, 528), 100);
  EXPECT_EQ(balanced_teams(528, 528), 528);
  EXPECT_EQ(balanced_teams(1024, 660), 512);  // 262,144 rows in 256-thread blocks: two rows per thread
  EXPECT_EQ(balanced_teams(1024, 528), 512);
  for (std::int64_t work : {1000, 4096, 65537, 1 << 20}) {
    const std::int64_t teams = balanced_teams(work, 660);
    EXPECT_LE(teams, 660);
    const std::int64_t waves = (work + teams - 1) / teams;
    EXPECT_EQ(waves, (work + 659) / 660) << work;    // no more waves than needed
    EXPECT_LT(waves * teams - work, teams) << work;  // the last wave is the only partial one
  }
}

}  // namespace
