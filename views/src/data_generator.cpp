#include "kstudy/views/data_generator.hpp"

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

std::uint64_t hash3(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  return mix(mix(seed ^ mix(a)) + b);
}

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

}  // namespace

float generated_value(std::uint64_t seed, std::int64_t row, std::int64_t feature, double outlier_fraction) {
  const std::uint64_t h1 = hash3(seed, static_cast<std::uint64_t>(row), static_cast<std::uint64_t>(feature));
  const std::uint64_t h2 = mix(h1);
  const double location = feature_location(seed, feature);
  const double scale = feature_scale(seed, feature);
  const std::uint64_t h3 = mix(h2);
  if (unit(h3) <= outlier_fraction) {
    const double sign = (h3 & 1) ? 1.0 : -1.0;
    return static_cast<float>(location + sign * scale * (20.0 + 40.0 * unit(mix(h3))));
  }
  // Box-Muller
  const double normal = std::sqrt(-2.0 * std::log(unit(h1))) * std::cos(two_pi * unit(h2));
  return static_cast<float>(location + scale * normal);
}

host_dataset::host_dataset(const table_shape& shape, const dataset_options& options)
    : m_shape(shape), m_options(options) {
  m_shape.validate();
  if (!(options.outlier_fraction >= 0.0 && options.outlier_fraction <= 1.0))
    throw std::invalid_argument("outlier_fraction must lie in [0, 1]");
  const std::int64_t rows = m_shape.rows, features = m_shape.features;
  m_mean.resize(features);
  m_inv_std.resize(features);
  m_weight.resize(features);
  // Column statistics in float64 over the generated values (outliers included, as a user's
  // standardisation of raw data would be).
  std::vector<double> sum(features, 0.0), sum_sq(features, 0.0);
  for (std::int64_t f = 0; f < features; ++f) {
    double s = 0.0, mean_f = 0.0;
#pragma omp parallel for reduction(+ : s) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) s += generated_value(options.seed, r, f, options.outlier_fraction);
    mean_f = s / static_cast<double>(rows);
    double ss = 0.0;
#pragma omp parallel for reduction(+ : ss) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const double d = generated_value(options.seed, r, f, options.outlier_fraction) - mean_f;
      ss += d * d;
    }
    const double stddev = std::sqrt(ss / static_cast<double>(rows));
    m_mean[f] = static_cast<float>(mean_f);
    // A constant column (one row, say) has no spread: inv_std 0 standardises it to 0.
    m_inv_std[f] = stddev > 0.0 ? static_cast<float>(1.0 / stddev) : 0.0f;
    m_weight[f] = static_cast<float>(feature_weight(options.seed, f));
  }
  fill_table();
}

host_dataset::host_dataset(const table_shape& shape, const dataset_options& options, const host_dataset& stats_from)
    : m_shape(shape),
      m_options(options),
      m_mean(stats_from.m_mean),
      m_inv_std(stats_from.m_inv_std),
      m_weight(stats_from.m_weight) {
  m_shape.validate();
  fill_table();
}

void host_dataset::fill_table() {
  m_x.assign(static_cast<std::size_t>(m_shape.allocated_elements()), std::numeric_limits<float>::quiet_NaN());
  const std::int64_t rows = m_shape.rows, features = m_shape.features;
  const std::uint64_t seed = m_options.seed;
  const double outliers = m_options.outlier_fraction;
  float* x = m_x.data();
  const table_shape shape = m_shape;
  if (shape.layout == table_layout::feature_major) {
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t f = 0; f < features; ++f)
      for (std::int64_t r = 0; r < rows; ++r) x[shape.offset(r, f)] = generated_value(seed, r, f, outliers);
  } else {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t f = 0; f < features; ++f) x[shape.offset(r, f)] = generated_value(seed, r, f, outliers);
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
      throw std::invalid_argument(std::string(name) + " has " + std::to_string(v.size) +
                                  " entries but x has " + std::to_string(shape.features) + " features");
  };
  check(mean, "mean");
  check(inv_std, "inv_std");
  check(weight, "weight");
  if (!(clip >= 0.0f)) throw std::invalid_argument("clip must be a non-negative number");
  if (std::isnan(threshold)) throw std::invalid_argument("threshold must not be NaN");
}

}  // namespace kstudy
