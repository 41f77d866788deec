// Enum names for the framework's own sources: one table per enum serves printing and parsing, so a new value
// cannot be printable but unparsable, and the "has no name" / "unknown ... (known: ...)" messages read alike.
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace kstudy::detail {

template <class E, std::size_t N>
using name_table = std::array<std::pair<E, const char*>, N>;

// The value's name, or nullptr for a value outside the table (a cast from an integer).
template <class E, std::size_t N>
const char* find_name(const name_table<E, N>& table, E value) {
  for (const auto& entry : table)
    if (entry.first == value) return entry.second;
  return nullptr;
}

// The value's name; a value outside the table throws, naming the enum as `what`.
template <class E, std::size_t N>
const char* name_of(const name_table<E, N>& table, E value, const char* what) {
  if (const char* name = find_name(table, value)) return name;
  throw std::invalid_argument(std::string("kstudy: ") + what + " value " + std::to_string(static_cast<int>(value)) +
                              " has no name");
}

// The value named `name`, or nullptr.
template <class E, std::size_t N>
const E* find_value(const name_table<E, N>& table, const std::string& name) {
  for (const auto& entry : table)
    if (name == entry.second) return &entry.first;
  return nullptr;
}

// The value named `name`; another name throws, listing the known ones, with `what` as people read it.
template <class E, std::size_t N>
E value_of(const name_table<E, N>& table, const std::string& name, const char* what) {
  if (const E* value = find_value(table, name)) return *value;
  std::string known;
  for (const auto& entry : table) known += (known.empty() ? "" : ", ") + std::string(entry.second);
  throw std::invalid_argument(std::string("kstudy: unknown ") + what + " '" + name + "' (known: " + known + ")");
}

}  // namespace kstudy::detail
