#include "scoring/data_generator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kstudy {
namespace {

constexpr double two_pi = 6.283185307179586476925286766559;

// SplitMix64 finaliser: a good 64-bit mix, so hash(seed, row, feature) behaves like independent draws.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t hash3(std::uint64_t seed, std::uint64_t a, std::uint64_t b) { return mix(mix(seed ^ mix(a)) + b); }

// Uniform in (0, 1].
double unit(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

double feature_location(std::uint64_t seed, std::int64_t feature) {
  return -10.0 + 20.0 * unit(hash3(seed, 0xfeed, static_cast<std::uint64_t>(feature)));
}
double feature_scale(std::uint64_t seed, std::int64_t feature) {
  // log-uniform in [0.1, 10]
  return std::exp(std::log(0.1) + std::log(100.0) * unit(hash3(seed, 0x5ca1e, static_cast<std::uint64_t>(feature))));
}
double feature_weight(std::uint64_t seed, std::int64_t feature) {
  return -1.0 + 2.0 * unit(hash3(seed, 0x3e1, static_cast<std::uint64_t>(feature)));
}

// A value from its hash and its feature's precomputed location and scale (the per-feature exp/log is
// paid once per feature, not once per value).
float value_from(std::uint64_t seed, std::int64_t row, std::int64_t feature, double location, double scale,
                 double outlier_fraction) {
  const std::uint64_t h1 = hash3(seed, static_cast<std::uint64_t>(row), static_cast<std::uint64_t>(feature));
  const std::uint64_t h2 = mix(h1);
  const std::uint64_t h3 = mix(h2);
  if (unit(h3) <= outlier_fraction) {
    const double sign = (h3 & 1) ? 1.0 : -1.0;
    return static_cast<float>(location + sign * scale * (20.0 + 40.0 * unit(mix(h3))));
  }
  // Box-Muller
  const double normal = std::sqrt(-2.0 * std::log(unit(h1))) * std::cos(two_pi * unit(h2));
  return static_cast<float>(location + scale * normal);
}

// Rows per block of the column statistics: blocks are summed in a fixed order, so the statistics do not
// depend on the thread count or the layout.
constexpr std::int64_t stats_block_rows = 16384;

}  // namespace

float generated_value(std::uint64_t seed, std::int64_t row, std::int64_t feature, double outlier_fraction) {
  return value_from(seed, row, feature, feature_location(seed, feature), feature_scale(seed, feature),
                    outlier_fraction);
}

host_dataset::host_dataset(const table_shape& shape, const dataset_options& options)
    : m_shape(shape), m_options(options) {
  m_shape.validate();
  if (!(options.outlier_fraction >= 0.0 && options.outlier_fraction <= 1.0))
    throw std::invalid_argument("outlier_fraction must lie in [0, 1]");
  const std::int64_t rows = m_shape.rows, features = m_shape.features;
  const std::uint64_t seed = options.seed;
  std::vector<double> location(features), scale(features);
  for (std::int64_t f = 0; f < features; ++f) {
    location[f] = feature_location(seed, f);
    scale[f] = feature_scale(seed, f);
  }
  // Padding elements hold NaN; every other element is written below.
  m_x.assign(static_cast<std::size_t>(m_shape.allocated_elements()), std::numeric_limits<float>::quiet_NaN());
  float* x = m_x.data();
  const table_shape s = m_shape;
  const double outliers = options.outlier_fraction;
  if (s.layout == table_layout::feature_major) {
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t f = 0; f < features; ++f)
      for (std::int64_t r = 0; r < rows; ++r)
        x[s.offset(r, f)] = value_from(seed, r, f, location[f], scale[f], outliers);
  } else {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t f = 0; f < features; ++f)
        x[s.offset(r, f)] = value_from(seed, r, f, location[f], scale[f], outliers);
  }

  // Column statistics in float64 over the stored values (outliers included, as a user's standardisation
  // of raw data would be): two passes, mean then spread, each a fixed-order sum of per-block sums.
  const std::int64_t blocks = (rows + stats_block_rows - 1) / stats_block_rows;
  std::vector<double> partial(static_cast<std::size_t>(blocks * features));
  const auto column_sums = [&](const std::vector<double>* centre) {
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
      double* out = &partial[static_cast<std::size_t>(b * features)];
      for (std::int64_t f = 0; f < features; ++f) out[f] = 0.0;
      const std::int64_t end = std::min(rows, (b + 1) * stats_block_rows);
      // Each column is summed in row order whichever loop is outer, so both layouts give the same sums.
      const auto add = [&](std::int64_t r, std::int64_t f) {
        const double v = static_cast<double>(x[s.offset(r, f)]) - (centre ? (*centre)[f] : 0.0);
        out[f] += centre ? v * v : v;
      };
      if (s.layout == table_layout::feature_major) {
        for (std::int64_t f = 0; f < features; ++f)
          for (std::int64_t r = b * stats_block_rows; r < end; ++r) add(r, f);
      } else {
        for (std::int64_t r = b * stats_block_rows; r < end; ++r)
          for (std::int64_t f = 0; f < features; ++f) add(r, f);
      }
    }
    std::vector<double> total(features, 0.0);
    for (std::int64_t b = 0; b < blocks; ++b)
      for (std::int64_t f = 0; f < features; ++f) total[f] += partial[static_cast<std::size_t>(b * features + f)];
    return total;
  };
  std::vector<double> mean = column_sums(nullptr);
  for (auto& m : mean) m /= static_cast<double>(rows);
  const std::vector<double> squares = column_sums(&mean);
  m_mean.resize(features);
  m_inv_std.resize(features);
  m_weight.resize(features);
  for (std::int64_t f = 0; f < features; ++f) {
    const double stddev = std::sqrt(squares[f] / static_cast<double>(rows));
    m_mean[f] = static_cast<float>(mean[f]);
    // A constant column (one row, say) has no spread: inv_std 0 standardises it to 0.
    m_inv_std[f] = stddev > 0.0 ? static_cast<float>(1.0 / stddev) : 0.0f;
    m_weight[f] = static_cast<float>(feature_weight(seed, f));
  }
}

// Another layout of the same table: the values are copied, not generated again.
host_dataset::host_dataset(const table_shape& shape, const dataset_options& options, const host_dataset& source)
    : m_shape(shape),
      m_options(options),
      m_mean(source.m_mean),
      m_inv_std(source.m_inv_std),
      m_weight(source.m_weight) {
  m_shape.validate();
  m_x.assign(static_cast<std::size_t>(m_shape.allocated_elements()), std::numeric_limits<float>::quiet_NaN());
  const table_shape to = m_shape, from = source.m_shape;
  const float* in = source.m_x.data();
  float* out = m_x.data();
  // Blocks of rows, feature-outer inside a block: one side streams, the other stays in cache.
  constexpr std::int64_t block = 256;
  const std::int64_t rows = to.rows, features = to.features;
#pragma omp parallel for schedule(static)
  for (std::int64_t r0 = 0; r0 < rows; r0 += block) {
    const std::int64_t end = std::min(rows, r0 + block);
    for (std::int64_t f = 0; f < features; ++f)
      for (std::int64_t r = r0; r < end; ++r) out[to.offset(r, f)] = in[from.offset(r, f)];
  }
}

scoring_problem host_dataset::problem() const {
  scoring_problem p;
  p.shape = m_shape;
  p.x = m_x.data();
  p.mean = {m_mean.data(), static_cast<std::int64_t>(m_mean.size())};
  p.inv_std = {m_inv_std.data(), static_cast<std::int64_t>(m_inv_std.size())};
  p.weight = {m_weight.data(), static_cast<std::int64_t>(m_weight.size())};
  p.clip = m_options.clip;
  p.threshold = m_options.threshold;
  return p;
}

host_dataset host_dataset::with_layout(table_layout layout, std::int64_t row_padding) const {
  return host_dataset(make_shape(m_shape.rows, m_shape.features, layout, row_padding), m_options, *this);
}

void scoring_problem::validate() const {
  shape.validate();
  if (x == nullptr) throw std::invalid_argument("x is null");
  const auto check = [&](const const_float_span& v, const char* name) {
    if (v.data == nullptr) throw std::invalid_argument(std::string(name) + " is null");
    if (v.size != shape.features)
      throw std::invalid_argument(std::string(name) + " has " + std::to_string(v.size) + " entries but x has " +
                                  std::to_string(shape.features) + " features");
  };
  check(mean, "mean");
  check(inv_std, "inv_std");
  check(weight, "weight");
  if (!(clip >= 0.0f)) throw std::invalid_argument("clip must be a non-negative number");
  if (std::isnan(threshold)) throw std::invalid_argument("threshold must not be NaN");
}

}  // namespace kstudy
