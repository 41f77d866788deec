#pragma once
// Kokkos View aliases for a table of rows x features in each table_layout, for any operation whose inputs
// are tables: LayoutRight = row-major, LayoutLeft = feature-major, LayoutStride = padded row-major (row
// pitch > features), all indexed x(row, feature); allocation and host mirrors of a table_shape.
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kstudy/views/table_shape.hpp"

namespace kstudy {

template <class Layout, class MemorySpace, class Value = float>
using feature_table = Kokkos::View<Value**, Layout, MemorySpace>;

template <class MemorySpace, class Value = float>
using row_major_table = feature_table<Kokkos::LayoutRight, MemorySpace, Value>;
template <class MemorySpace, class Value = float>
using feature_major_table = feature_table<Kokkos::LayoutLeft, MemorySpace, Value>;
template <class MemorySpace, class Value = float>
using padded_row_major_table = feature_table<Kokkos::LayoutStride, MemorySpace, Value>;

template <class Layout>
constexpr table_layout layout_of() {
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutLeft>)
    return table_layout::feature_major;
  else if constexpr (std::is_same_v<Layout, Kokkos::LayoutStride>)
    return table_layout::padded_row_major;
  else {
    static_assert(std::is_same_v<Layout, Kokkos::LayoutRight>,
                  "feature tables are LayoutRight, LayoutLeft or LayoutStride");
    return table_layout::row_major;
  }
}

// Allocates an (uninitialised) table for the shape; the layout must match the View's.
template <class Layout, class MemorySpace, class Value = float>
feature_table<Layout, MemorySpace, Value> make_table(const std::string& label, const table_shape& shape) {
  if (shape.layout != layout_of<Layout>())
    throw std::invalid_argument("make_table: shape layout " + std::string(to_string(shape.layout)) +
                                " does not match the View layout " + std::string(to_string(layout_of<Layout>())));
  const auto alloc = Kokkos::view_alloc(label, Kokkos::WithoutInitializing);
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutStride>) {
    // The padded table is carved from a row-major allocation of rows x pitch.
    Kokkos::View<Value**, Kokkos::LayoutRight, MemorySpace> backing(alloc, shape.rows, shape.pitch);
    return Kokkos::subview(backing, Kokkos::ALL, std::make_pair(std::int64_t(0), shape.features));
  } else {
    return feature_table<Layout, MemorySpace, Value>(alloc, shape.rows, shape.features);
  }
}

// A host allocation of a table_shape seen as a (unmanaged) View of the same layout; the
// padded case covers the whole pitch so a deep_copy moves one contiguous block.
template <class Layout, class Value = const float>
auto host_table_view(Value* data, const table_shape& shape) {
  using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutStride>) {
    return Kokkos::View<Value**, Kokkos::LayoutRight, Kokkos::HostSpace, unmanaged>(data, shape.rows, shape.pitch);
  } else {
    return Kokkos::View<Value**, Layout, Kokkos::HostSpace, unmanaged>(data, shape.rows, shape.features);
  }
}

// The contiguous allocation behind a device table (for deep copies of the whole padded block).
template <class Value, class Layout, class MemorySpace>
auto contiguous_span(const Kokkos::View<Value**, Layout, MemorySpace>& table, const table_shape& shape) {
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutStride>) {
    return Kokkos::View<Value**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
        table.data(), shape.rows, shape.pitch);
  } else {
    return table;
  }
}

}  // namespace kstudy
