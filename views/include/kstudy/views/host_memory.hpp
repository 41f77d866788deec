#pragma once
// The kinds of host memory a one-shot call starts from. Kokkos-free (operation.hpp, .cu files use it).
#include <stdexcept>
#include <string>
#include <string_view>

namespace kstudy {

enum class host_memory { pageable, pinned };

inline std::string_view to_string(host_memory kind) { return kind == host_memory::pinned ? "pinned" : "pageable"; }
inline host_memory parse_host_memory(std::string_view name) {
  if (name == "pageable") return host_memory::pageable;
  if (name == "pinned") return host_memory::pinned;
  throw std::invalid_argument("unknown host memory kind '" + std::string(name) + "' (expected pageable or pinned)");
}

}  // namespace kstudy
