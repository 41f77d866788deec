#pragma once
// One table per record type naming each member once, in declaration order. The HDF5 compound types,
// the JSON rows and the readers are all built from these tables, so a field's name is the struct
// member's name everywhere and a new member needs one line here. A new record type needs a table here and
// its place in record_types below; the sinks take it through record_batch without a method of its own.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "kstudy/records.hpp"
#include "kstudy/sink.hpp"

namespace kstudy::archive_detail {

template <class R>
using member_ptr = std::variant<std::string R::*, std::int64_t R::*, std::int32_t R::*, double R::*, bool R::*,
                                timer_kind R::*, gate_verdict R::*, cache_mode R::*>;

// Enums stored as their names (variable-length strings in HDF5, strings in JSON).
template <class T>
struct named_enum : std::false_type {};
template <>
struct named_enum<timer_kind> : std::true_type {
  static timer_kind parse(const std::string& name) { return parse_timer_kind(name); }
};
template <>
struct named_enum<gate_verdict> : std::true_type {
  static gate_verdict parse(const std::string& name) { return parse_gate_verdict(name); }
};
template <>
struct named_enum<cache_mode> : std::true_type {
  static cache_mode parse(const std::string& name) { return parse_cache_mode(name); }
};
template <class T>
inline constexpr bool is_named_enum_v = named_enum<T>::value;

template <class R>
struct field {
  const char* name;
  member_ptr<R> member;
  // The column's name in archives of an older schema, read where the file has it and not `name`.
  const char* former_name = nullptr;
};

template <class R>
struct record_table;

template <>
struct record_table<sample_record> {
  using R = sample_record;
  static constexpr const char* dataset = "samples";
  static constexpr const char* units =
      "seconds: s; bytes: B; occupancy: 1 (calculated active warps / maximum, 0 = not applicable); energy_joules: J "
      "(NaN = not measured); power_watts: W (NaN = no reading); min_sm_clock_mhz: MHz; throttle_reasons: NVML "
      "clocks-event reason bitmask (-1 = no reading); flush_bytes: B; flush_seconds: s";
  static const std::vector<field<R>>& fields() {
    static const std::vector<field<R>> table{
        {"experiment", &R::experiment},
        {"variant", &R::variant},
        {"layout", &R::layout},
        {"memory_kind", &R::memory_kind},
        {"direction", &R::direction},
        {"rows", &R::rows},
        {"features", &R::features},
        {"depth", &R::depth},
        {"pitch", &R::pitch},
        {"block_size", &R::block_size},
        {"bytes", &R::bytes},
        {"point", &R::point},
        {"replication", &R::replication},
        {"trial", &R::trial},
        {"timer", &R::timer},
        {"seconds", &R::seconds},
        {"gate", &R::gate},
        {"throttled", &R::throttled},
        {"status", &R::status},
        {"occupancy", &R::occupancy},
        {"energy_joules", &R::energy_joules},
        {"power_watts", &R::power_watts},
        {"min_sm_clock_mhz", &R::min_sm_clock_mhz},
        {"throttle_reasons", &R::throttle_reasons},
        {"cache", &R::cache},
        {"flush_bytes", &R::flush_bytes},
        {"flush_seconds", &R::flush_seconds},
        {"device_uuid", &R::device_uuid},
        {"device_pci_bus_id", &R::device_pci_bus_id},
        {"device_model", &R::device_model},
    };
    return table;
  }
};

template <>
struct record_table<gate_record> {
  using R = gate_record;
  static constexpr const char* dataset = "gate";
  static constexpr const char* units =
      "max_abs_error: output units; max_relative_error: 1 (of the tolerance scale); rtol: 1; atol: output units; "
      "value_failures, discrete_mismatches, ambiguous: outputs";
  static const std::vector<field<R>>& fields() {
    static const std::vector<field<R>> table{
        {"experiment", &R::experiment},
        {"variant", &R::variant},
        {"layout", &R::layout},
        {"rows", &R::rows},
        {"features", &R::features},
        {"depth", &R::depth},
        {"block_size", &R::block_size},
        {"passed", &R::passed},
        {"max_abs_error", &R::max_abs_error},
        {"max_relative_error", &R::max_relative_error},
        {"rtol", &R::rtol},
        {"atol", &R::atol},
        {"value_failures", &R::value_failures, "score_failures"},  // schema 9 and older
        {"discrete_mismatches", &R::discrete_mismatches, "flag_mismatches"},
        {"ambiguous", &R::ambiguous, "ambiguous_rows"},
        {"message", &R::message},
    };
    return table;
  }
};

template <>
struct record_table<ceiling_record> {
  using R = ceiling_record;
  static constexpr const char* dataset = "ceilings";
  static constexpr const char* units =
      "seconds: s; bytes: B; bytes_per_second: B/s; flops: flop; flops_per_second: flop/s (compute roofs); "
      "clock: the timer whose clock timed it (device_events, host_wall)";
  static const std::vector<field<R>>& fields() {
    static const std::vector<field<R>> table{
        {"name", &R::name},       {"bytes", &R::bytes},
        {"seconds", &R::seconds}, {"bytes_per_second", &R::bytes_per_second},
        {"flops", &R::flops},     {"flops_per_second", &R::flops_per_second},
        {"clock", &R::clock},
    };
    return table;
  }
};

template <>
struct record_table<summary_record> {
  using R = summary_record;
  static constexpr const char* dataset = "summary";
  static constexpr const char* units =
      "median: s; min: s; max: s; q1: s; q3: s; bytes_per_second: B/s; fraction_of_roof: 1; interval_low: s; "
      "interval_high: s";
  static const std::vector<field<R>>& fields() {
    static const std::vector<field<R>> table{
        {"experiment", &R::experiment},
        {"variant", &R::variant},
        {"layout", &R::layout},
        {"memory_kind", &R::memory_kind},
        {"direction", &R::direction},
        {"rows", &R::rows},
        {"features", &R::features},
        {"depth", &R::depth},
        {"block_size", &R::block_size},
        {"timer", &R::timer},
        {"cache", &R::cache},
        {"samples", &R::samples},
        {"median", &R::median},
        {"min", &R::min},
        {"max", &R::max},
        {"q1", &R::q1},
        {"q3", &R::q3},
        {"bytes_per_second", &R::bytes_per_second},
        {"fraction_of_roof", &R::fraction_of_roof},
        {"occupancy", &R::occupancy},
        {"interval_low", &R::interval_low},
        {"interval_high", &R::interval_high},
        {"stopped", &R::stopped},
    };
    return table;
  }
};

template <>
struct record_table<attribution_record> {
  using R = attribution_record;
  static constexpr const char* dataset = "attribution";
  static constexpr const char* units = "seconds: s (total over calls)";
  static const std::vector<field<R>>& fields() {
    static const std::vector<field<R>> table{
        {"experiment", &R::experiment}, {"variant", &R::variant}, {"rows", &R::rows},   {"features", &R::features},
        {"depth", &R::depth},           {"kernel", &R::kernel},   {"calls", &R::calls}, {"seconds", &R::seconds},
    };
    return table;
  }
};

template <>
struct record_table<health_record> {
  using R = health_record;
  static constexpr const char* dataset = "health";
  static constexpr const char* units =
      "*_sm_clock_mhz, *_memory_clock_mhz: MHz; *_temperature_c: degC; *_power_mw: mW; *_throttle_reasons: NVML "
      "clocks-event reason bitmask; seconds: s; energy_joules: J (NaN = not measured); sampled_min_sm_clock_mhz: MHz; "
      "sampled_mean_power_mw: mW; sampled_throttle_reasons: bitmask; -1 = not reported; *_seconds (point phases): s "
      "(NaN = not timed)";
  static const std::vector<field<R>>& fields() {
    static const std::vector<field<R>> table{{"experiment", &R::experiment},
                                             {"point", &R::point},
                                             {"replication", &R::replication},
                                             {"rows", &R::rows},
                                             {"features", &R::features},
                                             {"depth", &R::depth},
                                             {"block_size", &R::block_size},
                                             {"bytes", &R::bytes},
                                             {"memory_kind", &R::memory_kind},
                                             {"direction", &R::direction},
                                             {"device", &R::device},
                                             {"available", &R::available},
                                             {"before_sm_clock_mhz", &R::before_sm_clock_mhz},
                                             {"before_memory_clock_mhz", &R::before_memory_clock_mhz},
                                             {"before_temperature_c", &R::before_temperature_c},
                                             {"before_power_mw", &R::before_power_mw},
                                             {"before_throttle_reasons", &R::before_throttle_reasons},
                                             {"after_sm_clock_mhz", &R::after_sm_clock_mhz},
                                             {"after_memory_clock_mhz", &R::after_memory_clock_mhz},
                                             {"after_temperature_c", &R::after_temperature_c},
                                             {"after_power_mw", &R::after_power_mw},
                                             {"after_throttle_reasons", &R::after_throttle_reasons},
                                             {"seconds", &R::seconds},
                                             {"throttled", &R::throttled},
                                             {"reasons", &R::reasons},
                                             {"energy_joules", &R::energy_joules},
                                             {"sampled_readings", &R::sampled_readings},
                                             {"sampled_min_sm_clock_mhz", &R::sampled_min_sm_clock_mhz},
                                             {"sampled_mean_power_mw", &R::sampled_mean_power_mw},
                                             {"sampled_throttle_reasons", &R::sampled_throttle_reasons},
#define KSTUDY_POINT_PHASE_FIELD(name, description) {#name "_seconds", &R::name##_seconds},
                                             KSTUDY_POINT_PHASES(KSTUDY_POINT_PHASE_FIELD)
#undef KSTUDY_POINT_PHASE_FIELD
    };
    return table;
  }
};

// Written only by `kstudy profile` (an optional table: archives without it are complete).
template <class R>
inline constexpr bool optional_table = false;
template <>
inline constexpr bool optional_table<profile_record> = true;

template <>
struct record_table<profile_record> {
  using R = profile_record;
  static constexpr const char* dataset = "profile";
  static constexpr const char* units =
      "profiled_duration_s: s (instrumented kernel duration under Nsight Compute; never a timing); "
      "dram_bytes_read, dram_bytes_written: B; dram_throughput_pct, achieved_occupancy_pct, "
      "theoretical_occupancy_pct: %; global_load_sectors, global_store_sectors: sectors (32 B); "
      "global_load_requests, global_store_requests: requests; shared_bank_conflicts_load, "
      "shared_bank_conflicts_store: bank conflicts (extra shared-memory wavefronts); l2_hit_rate_pct: %; "
      "fp*_inst: predicated-on thread instructions; tensor_*_inst: warp instructions; tensor_*_ops: tensor-path "
      "math ops (flops); *_pipe_pct: % of peak over active cycles; ipc: warp instructions per active SM cycle; "
      "stall_*: warp cycles per issued instruction; local_load_bytes, local_store_bytes: B; "
      "registers_per_thread: registers; grid_size: blocks; launch_block_size, block_size: threads; NaN or -1: not "
      "reported";
  static const std::vector<field<R>>& fields() {
    static const std::vector<field<R>> table{
        {"experiment", &R::experiment},
        {"variant", &R::variant},
        {"layout", &R::layout},
        {"rows", &R::rows},
        {"features", &R::features},
        {"depth", &R::depth},
        {"block_size", &R::block_size},
        {"point", &R::point},
        {"status", &R::status},
        {"gate_passed", &R::gate_passed},
        {"launch", &R::launch},
        {"kernel", &R::kernel},
        {"label", &R::label},
        {"grid_size", &R::grid_size},
        {"launch_block_size", &R::launch_block_size},
        {"registers_per_thread", &R::registers_per_thread},
        {"profiled_duration_s", &R::profiled_duration_s},
        {"dram_bytes_read", &R::dram_bytes_read},
        {"dram_bytes_written", &R::dram_bytes_written},
        {"dram_throughput_pct", &R::dram_throughput_pct},
        {"achieved_occupancy_pct", &R::achieved_occupancy_pct},
        {"theoretical_occupancy_pct", &R::theoretical_occupancy_pct},
        {"global_load_sectors", &R::global_load_sectors},
        {"global_load_requests", &R::global_load_requests},
        {"global_store_sectors", &R::global_store_sectors},
        {"global_store_requests", &R::global_store_requests},
        {"shared_bank_conflicts_load", &R::shared_bank_conflicts_load},
        {"shared_bank_conflicts_store", &R::shared_bank_conflicts_store},
        {"l2_hit_rate_pct", &R::l2_hit_rate_pct},
        {"fp32_ffma_inst", &R::fp32_ffma_inst},
        {"fp32_fadd_inst", &R::fp32_fadd_inst},
        {"fp32_fmul_inst", &R::fp32_fmul_inst},
        {"fp64_dfma_inst", &R::fp64_dfma_inst},
        {"fp64_dadd_inst", &R::fp64_dadd_inst},
        {"fp64_dmul_inst", &R::fp64_dmul_inst},
        {"fp16_hfma_inst", &R::fp16_hfma_inst},
        {"fp16_hadd_inst", &R::fp16_hadd_inst},
        {"fp16_hmul_inst", &R::fp16_hmul_inst},
        {"tensor_hmma_inst", &R::tensor_hmma_inst},
        {"tensor_gmma_inst", &R::tensor_gmma_inst},
        {"tensor_fp16_ops", &R::tensor_fp16_ops},
        {"tensor_bf16_ops", &R::tensor_bf16_ops},
        {"tensor_tf32_ops", &R::tensor_tf32_ops},
        {"tensor_fp64_ops", &R::tensor_fp64_ops},
        {"tensor_fp8_ops", &R::tensor_fp8_ops},
        {"fma_pipe_pct", &R::fma_pipe_pct},
        {"tensor_pipe_pct", &R::tensor_pipe_pct},
        {"lsu_pipe_pct", &R::lsu_pipe_pct},
        {"ipc", &R::ipc},
        {"stall_long_scoreboard", &R::stall_long_scoreboard},
        {"stall_short_scoreboard", &R::stall_short_scoreboard},
        {"stall_mio_throttle", &R::stall_mio_throttle},
        {"stall_lg_throttle", &R::stall_lg_throttle},
        {"stall_wait", &R::stall_wait},
        {"stall_math_pipe_throttle", &R::stall_math_pipe_throttle},
        {"stall_barrier", &R::stall_barrier},
        {"stall_not_selected", &R::stall_not_selected},
        {"stall_selected", &R::stall_selected},
        {"stall_no_instruction", &R::stall_no_instruction},
        {"stall_dispatch_stall", &R::stall_dispatch_stall},
        {"stall_tex_throttle", &R::stall_tex_throttle},
        {"stall_gmma", &R::stall_gmma},
        {"local_load_bytes", &R::local_load_bytes},
        {"local_store_bytes", &R::local_store_bytes},
    };
    return table;
  }
};

template <>
struct record_table<variant_record> {
  using R = variant_record;
  static constexpr const char* dataset = "variants";
  static constexpr const char* units =
      "modelled_bytes_read, modelled_bytes_written, essential_bytes: B (one resident run); essential_flops: flop; "
      "peak_device_bytes: B (-1 = host variant or not recorded)";
  static const std::vector<field<R>>& fields() {
    static const std::vector<field<R>> table{
        {"variant", &R::variant},
        {"operation", &R::operation},
        {"compute_ceiling", &R::compute_ceiling},
        {"axes", &R::axes},
        {"family", &R::family},
        {"fusion_level", &R::fusion_level},
        {"implementation", &R::implementation},
        {"layout", &R::layout},
        {"backend", &R::backend},
        {"on_device", &R::on_device},
        {"kernels_launched", &R::kernels_launched},
        {"rung", &R::rung},
        {"rows", &R::rows},
        {"features", &R::features},
        {"depth", &R::depth},
        {"block_size", &R::block_size},
        {"modelled_bytes_read", &R::modelled_bytes_read},
        {"modelled_bytes_written", &R::modelled_bytes_written},
        {"essential_bytes", &R::essential_bytes},
        {"essential_flops", &R::essential_flops},
        {"peak_device_bytes", &R::peak_device_bytes},
        {"tuned_parameters", &R::tuned_parameters},
    };
    return table;
  }
};

template <class... R>
struct type_list {};
// Every record type with a table, in the order the schema lists an experiment's tables.
using record_types = type_list<sample_record, gate_record, ceiling_record, summary_record, attribution_record,
                               health_record, variant_record, profile_record>;

// --- the tables as record_schema: what the sinks write through ---------------------------------------------

template <class R>
field_type field_type_of(const member_ptr<R>& member) {
  return std::visit(
      [](auto m) {
        using T = std::remove_reference_t<decltype(std::declval<R&>().*m)>;
        if constexpr (std::is_same_v<T, std::string>)
          return field_type::text;
        else if constexpr (is_named_enum_v<T>)
          return field_type::named_enum;
        else if constexpr (std::is_same_v<T, std::int64_t>)
          return field_type::int64;
        else if constexpr (std::is_same_v<T, std::int32_t>)
          return field_type::int32;
        else if constexpr (std::is_same_v<T, double>)
          return field_type::real;
        else if constexpr (std::is_same_v<T, bool>)
          return field_type::boolean;
        else
          static_assert(sizeof(T) == 0, "record field type without a field_type");
      },
      member);
}

template <class R>
field_value read_field(const void* record, std::size_t field) {
  const R& r = *static_cast<const R*>(record);
  return std::visit(
      [&](auto member) {
        const auto& value = r.*member;
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string>)
          return field_value(std::in_place_type<std::string_view>, value);
        else if constexpr (is_named_enum_v<T>)
          return field_value(std::in_place_type<std::string_view>, to_string(value));
        else
          return field_value(std::in_place_type<T>, value);
      },
      record_table<R>::fields()[field].member);
}

template <class R>
const record_schema& schema_of() {
  static const record_schema schema = [] {
    record_schema s{record_table<R>::dataset, record_table<R>::units, optional_table<R>, {}, &read_field<R>};
    for (const auto& f : record_table<R>::fields())
      s.fields.push_back({f.name, field_type_of<R>(f.member), f.former_name});
    return s;
  }();
  return schema;
}

template <class... R>
std::vector<const record_schema*> schemas_of(type_list<R...>) {
  return {&schema_of<R>()...};
}

// Every record type's schema, in record_types' order.
inline const std::vector<const record_schema*>& record_schemas() {
  static const std::vector<const record_schema*> schemas = schemas_of(record_types{});
  return schemas;
}

// The schema of the batch's record type, or null for a type record_types does not list.
template <class... R>
const record_schema* find_schema(const record_batch& batch, type_list<R...>) {
  const record_schema* found = nullptr;
  ((found = found ? found : batch.get<R>() ? &schema_of<R>() : nullptr), ...);
  return found;
}

// The index of the column called name, or fields.size().
inline std::size_t field_index(const record_schema& schema, std::string_view name) {
  std::size_t i = 0;
  while (i < schema.fields.size() && name != schema.fields[i].name) ++i;
  return i;
}

// Throws std::invalid_argument unless name can be one HDF5 link name (no '/', not "." or empty).
void check_experiment_name(const std::string& name);

// Throws std::runtime_error unless a new file can be created at path (probes by creating and removing
// a file next to it, because access() says yes to root even where writes fail, e.g. in /proc).
void check_path_writable(const std::string& path, const char* what);

}  // namespace kstudy::archive_detail
