#pragma once
// Nsight Compute (ncu) for `kstudy profile`: the metrics kstudy asks for, the parser of ncu's
// `--csv --page raw` output, and the mapping of profiled kernels back to variants and points. Free of
// CUDA and Kokkos, so CI tests it on a CPU against committed ncu output (tests/fixtures/ncu_*).
//
// The raw page is one header row ("ID","Process ID",...,"Kernel Name",...,"Block Size","Grid Size",...,
// then one column per metric), one units row (empty cells under the fixed columns), then one row per
// profiled kernel launch; every cell is quoted and numbers may carry thousands separators ("1,048,576").
// Lines of ncu's own (==PROF==, ==WARNING==) and of the application may surround it.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/records.hpp"

namespace kstudy::ncu {

class format_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Name of the one-thread kernel the profiling child launches before each variant's profiled call, so
// the launches of one ncu process split into variants (cuda_escape::launch_profile_marker).
inline constexpr const char* marker_kernel = "kstudy_profile_marker";

enum class quantity { bytes, seconds, percent, count };

// One profile_record field and the ncu metrics that can fill it, in order of preference: names differ
// between ncu versions and chips, and an unknown name makes ncu refuse the whole run.
struct metric_spec {
  std::string field;
  std::vector<std::string> candidates;
  quantity kind;
  // The record's member it fills; null for the integer fields (grid, block size, registers), set by hand.
  using counter = double profile_record::*;
  counter member = nullptr;
};
const std::vector<metric_spec>& metric_specs();
// Every counter of the record NaN (a variant not profiled, or a point whose profile failed).
void clear_counters(profile_record& record);

// field -> the ncu metric chosen for it; fields whose candidates were all refused are absent.
using metric_choice = std::map<std::string, std::string>;
metric_choice first_choices();
std::string metrics_argument(const metric_choice& choice);  // comma-separated, for --metrics

// ncu refused a metric ("==ERROR== Failed to find metric ..."): every field whose chosen metric an error
// line names moves to its next candidate, or is dropped. Returns the refused metric names; empty when
// no error line names a chosen metric (the failure is something else).
std::vector<std::string> drop_refused_metrics(const std::string& ncu_output, metric_choice& choice);

// ncu's ==ERROR== lines, one per line; empty when there are none.
std::string error_lines(const std::string& ncu_output);

// "Version 2025.3.1.0 (build ...)" from `ncu --version`; the last non-empty line when no line says Version.
std::string version_line(const std::string& version_output);

struct raw_table {
  std::vector<std::string> columns;
  std::vector<std::string> units;  // one per column ("" where ncu printed no units row)
  std::vector<std::vector<std::string>> rows;
};
// Throws format_error when there is no header with "ID" and "Kernel Name", or a row's cell count differs.
raw_table parse_raw_csv(const std::string& text);

// "1,048,576" -> 1048576; "" and "n/a" -> NaN; anything else that is not a number throws format_error.
double parse_number(const std::string& text);
// A value in ncu's unit converted to B, s, % or a plain count; throws format_error for a unit that does
// not fit the quantity (e.g. a duration in cycles).
double to_base_units(double value, const std::string& unit, quantity kind);

struct kernel_launch {
  std::int64_t id = 0;
  std::string name;
  std::map<std::string, double> values;  // field -> value in base units; NaN when ncu did not report it
};
// The launches in ncu's order (ID); Block Size / Grid Size columns stand in for launch__* when absent.
std::vector<kernel_launch> kernel_launches(const raw_table& table, const metric_choice& choice);

bool is_marker(const std::string& kernel_name);
// A kernel Kokkos launched for a parallel_for/reduce/scan (as opposed to a library's or a CUDA variant's).
bool is_kokkos_kernel(const std::string& kernel_name);

// What the profiling child did with one variant at its point, in the order it ran them.
struct child_variant {
  std::string variant;
  std::string layout;
  std::string status;  // ok | rejected | failed: ... | skipped: ...
  bool gate_passed = false;
  int marker = -1;  // index of the marker launched before its profiled call; -1: never profiled
  // Kokkos events during the profiled call: ("kernel", label) per parallel dispatch, ("region", name) per
  // pushed profiling region (e.g. KokkosBlas::gemv around a cuBLAS kernel).
  std::vector<std::pair<std::string, std::string>> events;
};
struct child_report {
  std::vector<child_variant> variants;
  int markers = 0;
};
std::string to_json(const child_report& report);
child_report parse_child_report(const std::string& json_text);  // throws format_error

struct point_context {
  std::string experiment;
  std::int64_t point = 0, rows = 0, features = 0, block_size = 0, depth = 1;
};
// One row per profiled kernel launch of each variant (markers dropped), one row with launch -1 for a
// variant that was not profiled. Throws format_error when the markers ncu saw do not match the child's.
std::vector<profile_record> point_records(const point_context& point, const child_report& report,
                                          const std::vector<kernel_launch>& launches);

// The ncu to use: `explicit_path` if given (it must be executable), else $KSTUDY_NCU, ncu on PATH,
// /usr/local/cuda/bin/ncu, then the newest /opt/nvidia/nsight-compute/*/ncu. Empty when none is found.
std::string find_ncu(const std::string& explicit_path);

}  // namespace kstudy::ncu
