#include "kstudy/records.hpp"

#include <string>

#include "detail/name_table.hpp"

namespace kstudy {

namespace {
using detail::name_of;
using detail::name_table;
using detail::value_of;

constexpr name_table<timer_kind, 13> k_timer_names{{
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
    {timer_kind::layout_conversion, "layout_conversion"},
    {timer_kind::pin, "pin"},
    {timer_kind::energy, "energy"},
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
timer_kind parse_timer_kind(const std::string& name) {
  // Archives before schema 10 named the layout conversion's timer after the kind's former name; `transpose` is
  // an operation now.
  if (name == "transpose") return timer_kind::layout_conversion;
  return value_of(k_timer_names, name, "timer");
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

std::string extents_text(std::int64_t rows, std::int64_t features, std::int64_t depth) {
  return std::to_string(rows) + " x " + std::to_string(features) + (depth > 1 ? " x " + std::to_string(depth) : "");
}

}  // namespace kstudy
