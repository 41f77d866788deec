#pragma once
// Validated reading of experiment-file fields, shared by the kinds' parsers. Every helper throws
// experiment_error naming the file, the field and the problem.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kstudy/experiment.hpp"

namespace kstudy::experiment_fields {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& field, const std::string& problem);
std::int64_t positive_integer(const json& v, const std::string& source, const std::string& field,
                              bool allow_zero = false);
// A list of integers, or {"from", "to", "factor"} for a geometric sweep.
std::vector<std::int64_t> integer_axis(const json& v, const std::string& source, const std::string& field,
                                       bool allow_zero = false);
// A list of distinct strings, each one of `allowed` when that is not empty.
std::vector<std::string> string_axis(const json& v, const std::string& source, const std::string& field,
                                     const std::set<std::string>& allowed = {});

// The fields of a kind over operations: operation (a name or a list of names with the same axes), one key
// per axis or explicit "shapes", variants, memory, block_sizes, row_padding, timers.
void parse_operation_fields(const json& doc, experiment& e, json& normalised);
// "cache": "warm" (the default), "cold", or a list of both (every point is then timed in each mode, in order).
void parse_cache_field(const json& doc, experiment& e, json& normalised);
// The keys parse_operation_fields reads besides the axis names.
const std::set<std::string>& operation_field_keys();

}  // namespace kstudy::experiment_fields
