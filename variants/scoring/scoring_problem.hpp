#pragma once
// Host-side inputs and outputs of the scoring operation, Kokkos-free so .cu variants can use them.
//
//   z[r,f]   = clamp((x[r,f] - mean[f]) * inv_std[f], -clip, clip)
//   score[r] = sum_f z[r,f] * weight[f]
//   flag[r]  = score[r] > threshold
//
// NaN in x propagates: the row's score is NaN and its flag 0. +-Inf standardizes to +-clip
// (and to NaN where inv_std is 0, since Inf * 0 is NaN).
#include <cstdint>
#include <vector>

#include "kstudy/views/table_shape.hpp"

namespace kstudy {

struct const_float_span {
  const float* data = nullptr;
  std::int64_t size = 0;
};

struct scoring_problem {
  table_shape shape;
  const float* x = nullptr;  // shape.allocated_elements() values in shape.layout
  const_float_span mean, inv_std, weight;
  float clip = 5.0f;
  float threshold = 0.0f;

  // Throws std::invalid_argument naming the argument: empty table, null data, feature vectors whose
  // extent differs from shape.features, a negative or NaN clip.
  void validate() const;
};

// Host-visible results.
struct scoring_results {
  std::vector<float> score;
  std::vector<std::uint8_t> flag;
  std::int64_t flagged = 0;

  void resize(std::int64_t rows) {
    score.resize(static_cast<std::size_t>(rows));
    flag.resize(static_cast<std::size_t>(rows));
  }
};

}  // namespace kstudy
