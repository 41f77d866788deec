#include "kstudy/runner/ncu.hpp"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>
#include <tuple>

namespace kstudy::ncu {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

const metric_spec* spec_of(const std::string& field) {
  for (const auto& s : metric_specs())
    if (s.field == field) return &s;
  return nullptr;
}

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool is_integer(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// Every record of the text that starts with a quote, as cells (RFC 4180 quoting: "" is a quote, commas
// and newlines may sit inside quotes). Lines that do not start with a quote are ncu's or the
// application's messages and are skipped.
std::vector<std::vector<std::string>> quoted_records(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  const std::size_t n = text.size();
  std::size_t pos = 0;
  while (pos < n) {
    if (text[pos] != '"') {
      const auto eol = text.find('\n', pos);
      pos = eol == std::string::npos ? n : eol + 1;
      continue;
    }
    std::vector<std::string> cells;
    bool end_of_record = false;
    while (!end_of_record) {
      std::string cell;
      if (pos < n && text[pos] == '"') {
        ++pos;
        while (true) {
          if (pos >= n) throw format_error("ncu CSV: a quoted cell is not closed before the end of the output");
          if (text[pos] == '"') {
            if (pos + 1 < n && text[pos + 1] == '"') {
              cell += '"';
              pos += 2;
              continue;
            }
            ++pos;
            break;
          }
          cell += text[pos++];
        }
      } else {
        while (pos < n && text[pos] != ',' && text[pos] != '\n' && text[pos] != '\r') cell += text[pos++];
      }
      cells.push_back(std::move(cell));
      if (pos < n && text[pos] == ',') {
        ++pos;
        continue;
      }
      // End of record: the line's end, or junk after a closing quote up to it.
      while (pos < n && text[pos] != '\n') ++pos;
      if (pos < n) ++pos;
      end_of_record = true;
    }
    records.push_back(std::move(cells));
  }
  return records;
}

// "(256, 1, 1)" -> 256; NaN when the text is not such a triple.
double dim3_product(const std::string& text) {
  std::string digits;
  double product = 1.0;
  int parts = 0;
  for (const char c : text + ",") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits += c;
    } else if (c == ',' || c == ')') {
      if (digits.empty()) continue;
      product *= std::strtod(digits.c_str(), nullptr);
      digits.clear();
      ++parts;
    } else if (c != '(' && c != ' ') {
      return nan;
    }
  }
  return parts > 0 ? product : nan;
}

double decimal_prefix(const std::string& prefix) {
  if (prefix.empty()) return 1.0;
  if (prefix == "K" || prefix == "k") return 1e3;
  if (prefix == "M") return 1e6;
  if (prefix == "G") return 1e9;
  if (prefix == "T") return 1e12;
  if (prefix == "Ki") return 1024.0;
  if (prefix == "Mi") return 1024.0 * 1024.0;
  if (prefix == "Gi") return 1024.0 * 1024.0 * 1024.0;
  return -1.0;
}

bool contains_token(const std::string& text, const std::string& token) {
  for (auto at = text.find(token); at != std::string::npos; at = text.find(token, at + 1)) {
    const std::size_t end = at + token.size();
    const auto identifier = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    if ((at == 0 || !identifier(text[at - 1])) && (end >= text.size() || !identifier(text[end]))) return true;
  }
  return false;
}

}  // namespace

const std::vector<metric_spec>& metric_specs() {
  using R = profile_record;
  // Thread instructions of one floating-point opcode: the smsp__ name is the one Nsight Compute's roofline
  // sections read; sm__ sums the same counter.
  const auto thread_inst = [](const std::string& precision, const std::string& op, double R::*member) {
    return metric_spec{precision + "_" + op + "_inst",
                       {"smsp__sass_thread_inst_executed_op_" + op + "_pred_on.sum",
                        "sm__sass_thread_inst_executed_op_" + op + "_pred_on.sum"},
                       quantity::count,
                       member};
  };
  // Warp cycles stalled for one reason per issued instruction, the breakdown of Nsight Compute's Warp State
  // Statistics. No fallback: smsp__average_warp_latency_issue_stalled_* is another quantity (2,500 and more
  // where this reads 2.5 on the H200), not another name for this one.
  const auto stall = [](const std::string& reason, double R::*member) {
    return metric_spec{"stall_" + reason,
                       {"smsp__average_warps_issue_stalled_" + reason + "_per_issue_active.ratio"},
                       quantity::count,
                       member};
  };
  // Candidates after the first are names other ncu versions or chips use for the same quantity.
  static const std::vector<metric_spec> specs = [&] {
    std::vector<metric_spec> s{
        {"profiled_duration_s", {"gpu__time_duration.sum"}, quantity::seconds, &R::profiled_duration_s},
        {"dram_bytes_read", {"dram__bytes_read.sum", "dram__bytes_op_read.sum"}, quantity::bytes, &R::dram_bytes_read},
        {"dram_bytes_written",
         {"dram__bytes_write.sum", "dram__bytes_op_write.sum"},
         quantity::bytes,
         &R::dram_bytes_written},
        {"dram_throughput_pct",
         {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
          "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"},
         quantity::percent,
         &R::dram_throughput_pct},
        {"achieved_occupancy_pct",
         {"sm__warps_active.avg.pct_of_peak_sustained_active"},
         quantity::percent,
         &R::achieved_occupancy_pct},
        {"theoretical_occupancy_pct",
         {"sm__maximum_warps_per_active_cycle_pct"},
         quantity::percent,
         &R::theoretical_occupancy_pct},
        {"registers_per_thread", {"launch__registers_per_thread"}, quantity::count},
        {"launch_block_size", {"launch__block_size"}, quantity::count},
        {"grid_size", {"launch__grid_size"}, quantity::count},
        {"global_load_sectors",
         {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"},
         quantity::count,
         &R::global_load_sectors},
        {"global_load_requests",
         {"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"},
         quantity::count,
         &R::global_load_requests},
        {"global_store_sectors",
         {"l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"},
         quantity::count,
         &R::global_store_sectors},
        {"global_store_requests",
         {"l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"},
         quantity::count,
         &R::global_store_requests},
        // The transpose ladder's lesson (the kernel-lab design: 16,252,928 conflicts of a [32][32] tile, 0 padded) and
        // the reuse a tile gets from L2.
        {"shared_bank_conflicts_load",
         {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"},
         quantity::count,
         &R::shared_bank_conflicts_load},
        {"shared_bank_conflicts_store",
         {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"},
         quantity::count,
         &R::shared_bank_conflicts_store},
        {"l2_hit_rate_pct", {"lts__t_sector_hit_rate.pct"}, quantity::percent, &R::l2_hit_rate_pct},
        // Schema 11: the roofline from counters. The tensor path's math ops count a multiply-add as 2 (flops)
        // and cover mma.sync and wgmma alike; the instruction counts say which of the two ran.
        {"tensor_hmma_inst", {"sm__inst_executed_pipe_tensor_op_hmma.sum"}, quantity::count, &R::tensor_hmma_inst},
        {"tensor_gmma_inst", {"sm__inst_executed_pipe_tensor_op_gmma.sum"}, quantity::count, &R::tensor_gmma_inst},
        // fp16 inputs into either accumulator; where ncu has no such sum, fp32 accumulation alone.
        {"tensor_fp16_ops",
         {"sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum"},
         quantity::count,
         &R::tensor_fp16_ops},
        {"tensor_bf16_ops", {"sm__ops_path_tensor_src_bf16_dst_fp32.sum"}, quantity::count, &R::tensor_bf16_ops},
        {"tensor_tf32_ops", {"sm__ops_path_tensor_src_tf32_dst_fp32.sum"}, quantity::count, &R::tensor_tf32_ops},
        {"tensor_fp64_ops", {"sm__ops_path_tensor_src_fp64.sum"}, quantity::count, &R::tensor_fp64_ops},
        {"tensor_fp8_ops", {"sm__ops_path_tensor_src_fp8.sum"}, quantity::count, &R::tensor_fp8_ops},
        {"fma_pipe_pct",
         {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
          "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"},
         quantity::percent,
         &R::fma_pipe_pct},
        // Every tensor op (HMMA and Hopper's GMMA); the HMMA pipe alone where ncu has no such sum.
        {"tensor_pipe_pct",
         {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
          "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"},
         quantity::percent,
         &R::tensor_pipe_pct},
        {"lsu_pipe_pct",
         {"sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"},
         quantity::percent,
         &R::lsu_pipe_pct},
        {"ipc", {"sm__inst_executed.avg.per_cycle_active"}, quantity::count, &R::ipc},
        // Register spills and local arrays: bytes through L1, else what the instructions asked for.
        {"local_load_bytes",
         {"l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "sm__sass_data_bytes_mem_local_op_ld.sum"},
         quantity::bytes,
         &R::local_load_bytes},
        {"local_store_bytes",
         {"l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", "sm__sass_data_bytes_mem_local_op_st.sum"},
         quantity::bytes,
         &R::local_store_bytes},
    };
    // A half-precision instruction may work on a half2's two lanes: the flop weights say so, not the count.
    for (const auto& [precision, op, member] :
         std::vector<std::tuple<std::string, std::string, double R::*>>{{"fp32", "ffma", &R::fp32_ffma_inst},
                                                                        {"fp32", "fadd", &R::fp32_fadd_inst},
                                                                        {"fp32", "fmul", &R::fp32_fmul_inst},
                                                                        {"fp64", "dfma", &R::fp64_dfma_inst},
                                                                        {"fp64", "dadd", &R::fp64_dadd_inst},
                                                                        {"fp64", "dmul", &R::fp64_dmul_inst},
                                                                        {"fp16", "hfma", &R::fp16_hfma_inst},
                                                                        {"fp16", "hadd", &R::fp16_hadd_inst},
                                                                        {"fp16", "hmul", &R::fp16_hmul_inst}})
      s.push_back(thread_inst(precision, op, member));
    for (const auto& [reason, member] :
         std::vector<std::pair<std::string, double R::*>>{{"long_scoreboard", &R::stall_long_scoreboard},
                                                          {"short_scoreboard", &R::stall_short_scoreboard},
                                                          {"mio_throttle", &R::stall_mio_throttle},
                                                          {"lg_throttle", &R::stall_lg_throttle},
                                                          {"wait", &R::stall_wait},
                                                          {"math_pipe_throttle", &R::stall_math_pipe_throttle},
                                                          {"barrier", &R::stall_barrier},
                                                          {"not_selected", &R::stall_not_selected},
                                                          {"selected", &R::stall_selected},
                                                          {"no_instruction", &R::stall_no_instruction},
                                                          {"dispatch_stall", &R::stall_dispatch_stall},
                                                          {"tex_throttle", &R::stall_tex_throttle},
                                                          {"gmma", &R::stall_gmma}})
      s.push_back(stall(reason, member));
    return s;
  }();
  return specs;
}

void clear_counters(profile_record& record) {
  for (const auto& s : metric_specs())
    if (s.member != nullptr) record.*s.member = nan;
}

metric_choice first_choices() {
  metric_choice choice;
  for (const auto& s : metric_specs()) choice[s.field] = s.candidates.front();
  return choice;
}

std::string metrics_argument(const metric_choice& choice) {
  std::string out;
  for (const auto& s : metric_specs()) {  // the specs' order, so the command line reads the same every time
    const auto it = choice.find(s.field);
    if (it != choice.end()) out += (out.empty() ? "" : ",") + it->second;
  }
  return out;
}

std::string error_lines(const std::string& ncu_output) {
  std::istringstream in(ncu_output);
  std::string line, out;
  while (std::getline(in, line))
    if (line.find("==ERROR==") != std::string::npos) out += trim(line) + "\n";
  return out;
}

std::vector<std::string> drop_refused_metrics(const std::string& ncu_output, metric_choice& choice) {
  std::string errors = error_lines(ncu_output);
  errors.erase(std::remove(errors.begin(), errors.end(), '\\'), errors.end());  // ncu quotes names as regexes
  std::vector<std::string> refused;
  for (auto it = choice.begin(); it != choice.end();) {
    const std::string& metric = it->second;
    if (!contains_token(errors, metric.substr(0, metric.find('.')))) {
      ++it;
      continue;
    }
    refused.push_back(metric);
    const auto& candidates = spec_of(it->first)->candidates;
    auto next = std::find(candidates.begin(), candidates.end(), metric);
    if (next != candidates.end() && ++next != candidates.end()) {
      it->second = *next;
      ++it;
    } else {
      it = choice.erase(it);
    }
  }
  return refused;
}

std::string version_line(const std::string& version_output) {
  std::istringstream in(version_output);
  std::string line, last;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.rfind("Version", 0) == 0) return line;
    if (!line.empty()) last = line;
  }
  return last;
}

raw_table parse_raw_csv(const std::string& text) {
  raw_table table;
  bool header = false;
  const auto records = quoted_records(text);
  for (std::size_t r = 0; r < records.size(); ++r) {
    const auto& cells = records[r];
    if (cells.front() == "ID") {
      if (std::find(cells.begin(), cells.end(), "Kernel Name") == cells.end()) continue;
      if (header) {
        if (cells != table.columns) throw format_error("ncu CSV: a second header with other columns");
        continue;
      }
      header = true;
      table.columns = cells;
      table.units.assign(cells.size(), "");
      if (r + 1 < records.size() && records[r + 1].front().empty() && records[r + 1].size() == cells.size()) {
        table.units = records[r + 1];
        ++r;
      }
      continue;
    }
    if (!header || !is_integer(trim(cells.front()))) continue;
    if (cells.size() != table.columns.size())
      throw format_error("ncu CSV: launch " + cells.front() + " has " + std::to_string(cells.size()) +
                         " cells, the header " + std::to_string(table.columns.size()));
    table.rows.push_back(cells);
  }
  if (!header)
    throw format_error("ncu CSV: no header row with \"ID\" and \"Kernel Name\" (not ncu --csv --page raw output)");
  return table;
}

double parse_number(const std::string& text) {
  std::string s = trim(text);
  if (s.empty() || s == "n/a" || s == "N/A") return nan;
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());  // thousands separators
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') throw format_error("ncu CSV: '" + text + "' is not a number");
  return v;
}

double to_base_units(double value, const std::string& raw_unit, quantity kind) {
  const std::string unit = trim(raw_unit);
  const auto refuse = [&](const char* expected) -> double {
    throw format_error("ncu CSV: unit '" + unit + "' is not " + expected);
  };
  switch (kind) {
    case quantity::percent:
      if (unit == "%" || unit == "pct" || unit.empty()) return value;
      return refuse("a percentage");
    case quantity::seconds: {
      // No unit (a raw page without its units row): ncu's base unit for durations, the nanosecond.
      static const std::map<std::string, double> scale{{"second", 1.0},   {"s", 1.0},        {"msecond", 1e-3},
                                                       {"ms", 1e-3},      {"usecond", 1e-6}, {"us", 1e-6},
                                                       {"nsecond", 1e-9}, {"ns", 1e-9},      {"", 1e-9}};
      const auto it = scale.find(unit);
      return it != scale.end() ? value * it->second : refuse("a time");
    }
    case quantity::bytes: {
      std::string prefix;
      if (unit.empty()) return value;  // no units row: ncu's base unit, the byte
      if (unit.size() >= 4 && unit.compare(unit.size() - 4, 4, "byte") == 0)
        prefix = unit.substr(0, unit.size() - 4);
      else if (!unit.empty() && unit.back() == 'B')
        prefix = unit.substr(0, unit.size() - 1);
      else
        return refuse("a byte count");
      const double f = decimal_prefix(prefix);
      return f > 0 ? value * f : refuse("a byte count");
    }
    case quantity::count: {
      // "register/thread", "sector", "Ksector", "Mrequest": an optional decimal prefix on a lowercase word.
      if (unit.size() > 1 && std::string("KMGT").find(unit[0]) != std::string::npos &&
          std::islower(static_cast<unsigned char>(unit[1])))
        return value * decimal_prefix(unit.substr(0, 1));
      return value;
    }
  }
  return value;
}

std::vector<kernel_launch> kernel_launches(const raw_table& table, const metric_choice& choice) {
  const auto column = [&](const std::string& name) -> long {
    const auto it = std::find(table.columns.begin(), table.columns.end(), name);
    return it == table.columns.end() ? -1 : static_cast<long>(it - table.columns.begin());
  };
  const long id_column = column("ID"), name_column = column("Kernel Name");
  const long block_column = column("Block Size"), grid_column = column("Grid Size");
  std::vector<kernel_launch> out;
  for (const auto& row : table.rows) {
    kernel_launch k;
    k.id = static_cast<std::int64_t>(parse_number(row[static_cast<std::size_t>(id_column)]));
    k.name = row[static_cast<std::size_t>(name_column)];
    for (const auto& spec : metric_specs()) {
      double v = nan;
      const auto chosen = choice.find(spec.field);
      const long c = chosen == choice.end() ? -1 : column(chosen->second);
      if (c >= 0) {
        const double raw = parse_number(row[static_cast<std::size_t>(c)]);
        if (!std::isnan(raw)) v = to_base_units(raw, table.units[static_cast<std::size_t>(c)], spec.kind);
      }
      k.values[spec.field] = v;
    }
    // The launch configuration is also in ncu's fixed columns: use them where the metric is missing.
    if (std::isnan(k.values["launch_block_size"]) && block_column >= 0)
      k.values["launch_block_size"] = dim3_product(row[static_cast<std::size_t>(block_column)]);
    if (std::isnan(k.values["grid_size"]) && grid_column >= 0)
      k.values["grid_size"] = dim3_product(row[static_cast<std::size_t>(grid_column)]);
    out.push_back(std::move(k));
  }
  std::stable_sort(out.begin(), out.end(), [](const kernel_launch& a, const kernel_launch& b) { return a.id < b.id; });
  return out;
}

bool is_marker(const std::string& kernel_name) { return kernel_name.find(marker_kernel) != std::string::npos; }

bool is_kokkos_kernel(const std::string& kernel_name) {
  // Demangled ("Kokkos::Impl::cuda_parallel_launch_local_memory<...>"), function-only or mangled names.
  return kernel_name.find("Kokkos::Impl::") != std::string::npos ||
         kernel_name.find("cuda_parallel_launch") != std::string::npos ||
         kernel_name.find("6Kokkos4Impl") != std::string::npos;
}

std::string to_json(const child_report& report) {
  json doc = {{"markers", report.markers}, {"variants", json::array()}};
  for (const auto& v : report.variants) {
    json events = json::array();
    for (const auto& [kind, name] : v.events) events.push_back({kind, name});
    doc["variants"].push_back({{"variant", v.variant},
                               {"layout", v.layout},
                               {"status", v.status},
                               {"gate_passed", v.gate_passed},
                               {"marker", v.marker},
                               {"events", events}});
  }
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

child_report parse_child_report(const std::string& json_text) {
  child_report report;
  try {
    const json doc = json::parse(json_text);
    report.markers = doc.at("markers").get<int>();
    for (const auto& v : doc.at("variants")) {
      child_variant c;
      c.variant = v.at("variant").get<std::string>();
      c.layout = v.at("layout").get<std::string>();
      c.status = v.at("status").get<std::string>();
      c.gate_passed = v.at("gate_passed").get<bool>();
      c.marker = v.at("marker").get<int>();
      for (const auto& e : v.at("events"))
        c.events.emplace_back(e.at(0).get<std::string>(), e.at(1).get<std::string>());
      report.variants.push_back(std::move(c));
    }
  } catch (const json::exception& e) {
    throw format_error(std::string("profiling child's report: ") + e.what());
  }
  return report;
}

std::vector<profile_record> point_records(const point_context& point, const child_report& report,
                                          const std::vector<kernel_launch>& launches) {
  // Split ncu's launches at the markers: segment k holds what ran after marker k.
  std::vector<std::vector<const kernel_launch*>> segments;
  for (const auto& k : launches) {
    if (is_marker(k.name))
      segments.emplace_back();
    else if (segments.empty())
      throw format_error("ncu profiled '" + k.name + "' before the first marker kernel");
    else
      segments.back().push_back(&k);
  }
  if (static_cast<int>(segments.size()) != report.markers)
    throw format_error("ncu profiled " + std::to_string(segments.size()) +
                       " marker kernels, the profiling child launched " + std::to_string(report.markers) +
                       "; the launches cannot be attributed to variants");

  std::vector<profile_record> out;
  for (const auto& v : report.variants) {
    profile_record base;
    base.experiment = point.experiment;
    base.variant = v.variant;
    base.layout = v.layout;
    copy_extents(base, point);
    base.block_size = point.block_size;
    base.point = point.point;
    base.status = v.status;
    base.gate_passed = v.gate_passed;
    clear_counters(base);
    if (v.marker < 0 || v.marker >= static_cast<int>(segments.size())) {
      if (v.marker >= 0) base.status = "failed: its marker kernel was not profiled";
      out.push_back(base);
      continue;
    }
    const auto& kernels = segments[static_cast<std::size_t>(v.marker)];
    if (kernels.empty()) {
      base.status = "failed: no kernel was profiled in its call";
      out.push_back(base);
      continue;
    }
    // Kokkos kernels take the labels of the dispatches in order; a library kernel takes the name of the
    // profiling region pushed before the next dispatch (KokkosBlas::gemv[TPL_CUBLAS,float] for cuBLAS).
    std::size_t next_event = 0;
    std::int32_t launch = 0;
    for (const auto* k : kernels) {
      auto r = base;
      r.launch = launch++;
      r.kernel = k->name;
      if (is_kokkos_kernel(k->name)) {
        while (next_event < v.events.size() && v.events[next_event].first != "kernel") ++next_event;
        if (next_event < v.events.size()) r.label = v.events[next_event++].second;
      } else {
        for (std::size_t e = next_event; e < v.events.size() && v.events[e].first == "region"; ++e)
          r.label = v.events[e].second;
      }
      const auto value = [&](const char* field) { return k->values.at(field); };
      const auto integer = [&](const char* field) {
        const double x = value(field);
        return std::isnan(x) ? std::int64_t{-1} : static_cast<std::int64_t>(std::llround(x));
      };
      r.grid_size = integer("grid_size");
      r.launch_block_size = integer("launch_block_size");
      r.registers_per_thread = integer("registers_per_thread");
      for (const auto& spec : metric_specs())
        if (spec.member != nullptr) r.*spec.member = k->values.at(spec.field);
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string find_ncu(const std::string& explicit_path) {
  const auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (!explicit_path.empty()) return executable(explicit_path) ? explicit_path : std::string();
  if (const char* env = std::getenv("KSTUDY_NCU"); env && *env)
    return executable(env) ? std::string(env) : std::string();
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':'))
      if (!dir.empty() && executable(fs::path(dir) / "ncu")) return (fs::path(dir) / "ncu").string();
  }
  if (executable("/usr/local/cuda/bin/ncu")) return "/usr/local/cuda/bin/ncu";
  // Nsight Compute's own installs, newest version first (e.g. /opt/nvidia/nsight-compute/2025.3.1/ncu).
  std::vector<fs::path> installs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/opt/nvidia/nsight-compute", ec))
    if (executable(entry.path() / "ncu")) installs.push_back(entry.path() / "ncu");
  std::sort(installs.begin(), installs.end());
  return installs.empty() ? std::string() : installs.back().string();
}

}  // namespace kstudy::ncu
