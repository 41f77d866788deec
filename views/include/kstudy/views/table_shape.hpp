#pragma once
// Kokkos-free description of a feature table: usable from plain C++ and from .cu files.
#include <cstdint>
#include <string>
#include <string_view>

namespace kstudy {

// How the rows x features table lies in memory.
//  row_major        LayoutRight: x(r, f) at r * features + f
//  feature_major    LayoutLeft:  x(r, f) at f * rows + r
//  padded_row_major LayoutStride: x(r, f) at r * pitch + f, pitch > features (the seed's stride control)
enum class table_layout { row_major, feature_major, padded_row_major };

std::string_view to_string(table_layout layout);
// Accepts the names above plus "LayoutRight", "LayoutLeft", "padded"; throws std::invalid_argument.
table_layout parse_table_layout(std::string_view name);

struct table_shape {
  std::int64_t rows = 0;
  std::int64_t features = 0;
  // Elements between consecutive rows; only used by padded_row_major (equals features otherwise).
  std::int64_t pitch = 0;
  table_layout layout = table_layout::row_major;
  // A three-axis operation's third extent (GEMM: k; attention: head_dim); 1 for a table. The layout
  // describes how the operation lays out its rows x features arrays; what depth means is the operation's.
  std::int64_t depth = 1;  // last, so brace-initialised shapes of one and two axes stay valid

  // Throws std::invalid_argument naming the offending argument.
  void validate() const;
  // Elements the table's allocation spans (padding included).
  std::int64_t allocated_elements() const;
  // Offset of element (r, f) in that allocation.
  std::int64_t offset(std::int64_t row, std::int64_t feature) const {
    switch (layout) {
      case table_layout::feature_major:
        return feature * rows + row;
      case table_layout::padded_row_major:
        return row * pitch + feature;
      case table_layout::row_major:
        break;
    }
    return row * features + feature;
  }
};

// A shape with the pitch filled in for the layout (padding elements added to each row when padded).
table_shape make_shape(std::int64_t rows, std::int64_t features, table_layout layout, std::int64_t row_padding = 0);

}  // namespace kstudy
