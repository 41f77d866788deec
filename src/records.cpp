#include "kstudy/records.hpp"

#include <array>
#include <stdexcept>
#include <utility>

namespace kstudy {

namespace {
// One table for both directions, so a new timer cannot be printable but unparsable.
constexpr std::array<std::pair<timer_kind, const char*>, 11> k_timer_names{{
    {timer_kind::host_wall, "host_wall"},
    {timer_kind::resident_wall, "resident_wall"},
    {timer_kind::device_events, "device_events"},
    {timer_kind::one_shot, "one_shot"},
    {timer_kind::one_shot_alloc, "one_shot_alloc"},
    {timer_kind::pipelined, "pipelined"},
    {timer_kind::cold, "cold"},
    {timer_kind::compile, "compile"},
    {timer_kind::launch, "launch"},
    {timer_kind::transfer, "transfer"},
    {timer_kind::transpose, "transpose"},
}};
}  // namespace

const char* to_string(timer_kind kind) {
  for (const auto& [k, name] : k_timer_names)
    if (k == kind) return name;
  throw std::invalid_argument("kstudy: timer_kind value " + std::to_string(static_cast<int>(kind)) +
                              " has no name");
}

timer_kind parse_timer_kind(const std::string& name) {
  for (const auto& [k, n] : k_timer_names)
    if (name == n) return k;
  std::string known;
  for (const auto& entry : k_timer_names) known += (known.empty() ? "" : ", ") + std::string(entry.second);
  throw std::invalid_argument("kstudy: unknown timer '" + name + "' (known: " + known + ")");
}

}  // namespace kstudy
