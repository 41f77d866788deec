#include "kstudy/views/table_shape.hpp"

#include <limits>
#include <stdexcept>

namespace kstudy {

std::string_view to_string(table_layout layout) {
  switch (layout) {
    case table_layout::row_major:
      return "row_major";
    case table_layout::feature_major:
      return "feature_major";
    case table_layout::padded_row_major:
      return "padded_row_major";
  }
  return "unknown";
}

table_layout parse_table_layout(std::string_view name) {
  if (name == "row_major" || name == "LayoutRight") return table_layout::row_major;
  if (name == "feature_major" || name == "LayoutLeft") return table_layout::feature_major;
  if (name == "padded_row_major" || name == "padded" || name == "LayoutStride") return table_layout::padded_row_major;
  throw std::invalid_argument("unknown layout '" + std::string(name) +
                              "' (expected row_major, feature_major or padded_row_major)");
}

void table_shape::validate() const {
  if (rows <= 0) throw std::invalid_argument("rows must be positive, got " + std::to_string(rows));
  if (features <= 0) throw std::invalid_argument("features must be positive, got " + std::to_string(features));
  if (depth <= 0) throw std::invalid_argument("depth must be positive, got " + std::to_string(depth));
  if (layout == table_layout::padded_row_major && pitch < features)
    throw std::invalid_argument("pitch (" + std::to_string(pitch) + ") must be >= features (" +
                                std::to_string(features) + ") for a padded row-major table");
  const std::int64_t span = layout == table_layout::padded_row_major ? pitch : features;
  // Byte counts of the table must fit in 64 bits (and index arithmetic in int64).
  if (span > std::numeric_limits<std::int64_t>::max() / 8 / rows)
    throw std::invalid_argument("rows x features (" + std::to_string(rows) + " x " + std::to_string(span) +
                                ") overflows a 64-bit byte count");
}

std::int64_t table_shape::allocated_elements() const {
  return rows * (layout == table_layout::padded_row_major ? pitch : features);
}

table_shape make_shape(std::int64_t rows, std::int64_t features, table_layout layout, std::int64_t row_padding) {
  table_shape shape{rows, features, features, layout};
  if (layout == table_layout::padded_row_major) shape.pitch = features + row_padding;
  return shape;
}

}  // namespace kstudy
