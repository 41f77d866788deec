#include "kstudy/records.hpp"

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/name_table.hpp"

namespace kstudy {

namespace {
using detail::name_of;
using detail::name_table;
using detail::value_of;

// KSTUDY_TIMER_KINDS's length: one `+ 1` per timer.
constexpr std::size_t k_timer_count = 0
#define KSTUDY_TIMER_ONE(name, clock, scope, description) +1
    KSTUDY_TIMER_KINDS(KSTUDY_TIMER_ONE)
#undef KSTUDY_TIMER_ONE
    ;
constexpr name_table<timer_kind, k_timer_count> k_timer_names{{
#define KSTUDY_TIMER_ENTRY(name, clock, scope, description) {timer_kind::name, #name},
    KSTUDY_TIMER_KINDS(KSTUDY_TIMER_ENTRY)
#undef KSTUDY_TIMER_ENTRY
}};

constexpr name_table<gate_verdict, 3> k_gate_verdict_names{{
    {gate_verdict::passed, "passed"},
    {gate_verdict::failed, "failed"},
    {gate_verdict::not_gated, "not_gated"},
}};

constexpr name_table<cache_mode, 2> k_cache_mode_names{{
    {cache_mode::warm, "warm"},
    {cache_mode::cold, "cold"},
}};
}  // namespace

const char* to_string(timer_kind kind) { return name_of(k_timer_names, kind, "timer_kind"); }
const std::vector<timer_kind_info>& timer_kinds() {
  static const std::vector<timer_kind_info> kinds{
#define KSTUDY_TIMER_INFO(name, clock, scope, description) {timer_kind::name, #name, #clock, #scope, description},
      KSTUDY_TIMER_KINDS(KSTUDY_TIMER_INFO)
#undef KSTUDY_TIMER_INFO
  };
  return kinds;
}
timer_kind parse_timer_kind(const std::string& name) {
  // Archives before schema 10 named the layout conversion's timer after the kind's former name; `transpose` is
  // an operation now.
  if (name == "transpose") return timer_kind::layout_conversion;
  return value_of(k_timer_names, name, "timer");
}

const std::vector<point_phase_info>& point_phases() {
  static const std::vector<point_phase_info> phases{
#define KSTUDY_POINT_PHASE_INFO(name, description) {point_phase::name, #name, #name "_seconds", description},
      KSTUDY_POINT_PHASES(KSTUDY_POINT_PHASE_INFO)
#undef KSTUDY_POINT_PHASE_INFO
  };
  return phases;
}
double& phase_seconds(health_record& record, point_phase phase) {
  switch (phase) {
#define KSTUDY_POINT_PHASE_CASE(name, description) \
  case point_phase::name:                          \
    return record.name##_seconds;
    KSTUDY_POINT_PHASES(KSTUDY_POINT_PHASE_CASE)
#undef KSTUDY_POINT_PHASE_CASE
  }
  throw std::invalid_argument("kstudy: point_phase " + std::to_string(static_cast<int>(phase)) + " is not declared");
}

const char* to_string(gate_verdict verdict) { return name_of(k_gate_verdict_names, verdict, "gate_verdict"); }
gate_verdict parse_gate_verdict(const std::string& name) {
  return value_of(k_gate_verdict_names, name, "gate verdict");
}

const char* to_string(cache_mode mode) { return name_of(k_cache_mode_names, mode, "cache_mode"); }
cache_mode parse_cache_mode(const std::string& name) { return value_of(k_cache_mode_names, name, "cache mode"); }

bool summarised(const sample_record& sample) {
  return sample.status == "ok" && sample.trial >= 0 && sample.gate != gate_verdict::failed;
}

bool finishes_unit(const sample_record& sample) {
  const auto starts = [&](const char* prefix) { return sample.status.rfind(prefix, 0) == 0; };
  return !starts("aborted") && !starts("remeasured");
}

std::string extents_text(std::int64_t rows, std::int64_t features, std::int64_t depth) {
  return std::to_string(rows) + " x " + std::to_string(features) + (depth > 1 ? " x " + std::to_string(depth) : "");
}

}  // namespace kstudy
