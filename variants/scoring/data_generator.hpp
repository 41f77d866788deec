#pragma once
// Deterministic synthetic data: the same seed gives bit-identical tables on every backend and layout,
// because each value is a pure function of (seed, row, feature) rather than of a sequential RNG stream.
#include <cstdint>
#include <vector>

#include "scoring/scoring_problem.hpp"
#include "kstudy/views/table_shape.hpp"

namespace kstudy {

struct dataset_options {
  std::uint64_t seed = 20261130;
  double outlier_fraction = 0.01;  // values placed 20-60 scales away from the feature's location
  float clip = 5.0f;
  float threshold = 0.0f;
};

// x(row, feature): normal with a per-feature location in [-10, 10] and scale in [0.1, 10]; a fraction
// of the values are outliers far outside the clip.
float generated_value(std::uint64_t seed, std::int64_t row, std::int64_t feature, double outlier_fraction);

// Owns a generated problem: x in the requested layout (padding elements hold NaN, so a kernel that
// reads them fails the gate) and the per-feature vectors, with mean and 1/std computed in float64 over
// the generated column.
class host_dataset {
 public:
  host_dataset(const table_shape& shape, const dataset_options& options = {});

  const table_shape& shape() const { return m_shape; }
  const dataset_options& options() const { return m_options; }
  scoring_problem problem() const;
  std::vector<float>& x() { return m_x; }
  const std::vector<float>& x() const { return m_x; }
  const std::vector<float>& mean() const { return m_mean; }
  const std::vector<float>& inv_std() const { return m_inv_std; }
  const std::vector<float>& weight() const { return m_weight; }
  // Same values, another layout (for the transpose study and cross-layout checks).
  host_dataset with_layout(table_layout layout, std::int64_t row_padding = 0) const;

 private:
  host_dataset(const table_shape& shape, const dataset_options& options, const host_dataset& source);

  table_shape m_shape;
  dataset_options m_options;
  std::vector<float> m_x, m_mean, m_inv_std, m_weight;
};

}  // namespace kstudy
