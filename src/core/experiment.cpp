#include "kstudy/experiment.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "detail/name_table.hpp"
#include "detail/registry_lookup.hpp"
#include "kstudy/experiment_fields.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/resources.hpp"

namespace kstudy {
namespace experiment_fields {

[[noreturn]] void fail(const std::string& source, const std::string& field, const std::string& problem) {
  throw experiment_error(source + ": " + (field.empty() ? "" : "field '" + field + "': ") + problem);
}

namespace {
std::string type_name(const json& v) { return v.type_name(); }
}  // namespace

std::int64_t positive_integer(const json& v, const std::string& source, const std::string& field, bool allow_zero) {
  if (!v.is_number_integer()) fail(source, field, "expected an integer, got " + type_name(v) + " " + v.dump());
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
    fail(source, field, "value " + v.dump() + " does not fit in 64 bits");
  const std::int64_t n = v.get<std::int64_t>();
  if (n < 0 || (n == 0 && !allow_zero))
    fail(source, field,
         std::string("expected a ") + (allow_zero ? "non-negative" : "positive") + " integer, got " + v.dump());
  return n;
}

std::vector<std::int64_t> integer_axis(const json& v, const std::string& source, const std::string& field,
                                       bool allow_zero) {
  std::vector<std::int64_t> out;
  if (v.is_object()) {
    for (const auto& [key, _] : v.items())
      if (key != "from" && key != "to" && key != "factor")
        fail(source, field + "." + key, "unknown key (expected from, to, factor)");
    if (!v.contains("from") || !v.contains("to")) fail(source, field, "a range needs 'from' and 'to'");
    const std::int64_t from = positive_integer(v["from"], source, field + ".from");
    const std::int64_t to = positive_integer(v["to"], source, field + ".to");
    const std::int64_t factor = v.contains("factor") ? positive_integer(v["factor"], source, field + ".factor") : 2;
    if (factor < 2) fail(source, field + ".factor", "must be at least 2");
    if (to < from)
      fail(source, field, "'to' (" + std::to_string(to) + ") is below 'from' (" + std::to_string(from) + ")");
    for (std::int64_t x = from; x <= to; x *= factor) {
      out.push_back(x);
      if (x > std::numeric_limits<std::int64_t>::max() / factor) break;
    }
  } else if (v.is_array()) {
    if (v.empty()) fail(source, field, "empty axis");
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(positive_integer(v[i], source, field + "[" + std::to_string(i) + "]", allow_zero));
  } else {
    fail(source, field, "expected a list of integers or {from, to, factor}, got " + type_name(v));
  }
  return out;
}

std::vector<std::string> string_axis(const json& v, const std::string& source, const std::string& field,
                                     const std::set<std::string>& allowed) {
  if (!v.is_array()) fail(source, field, "expected a list of strings, got " + type_name(v));
  if (v.empty()) fail(source, field, "empty axis");
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (!v[i].is_string()) fail(source, f, "expected a string, got " + type_name(v[i]));
    const auto s = v[i].get<std::string>();
    if (!allowed.empty() && !allowed.count(s)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail(source, f, "unknown value '" + s + "' (expected one of: " + list + ")");
    }
    if (!seen.insert(s).second) fail(source, f, "duplicate value '" + s + "'");
    out.push_back(s);
  }
  return out;
}

void parse_cache_field(const json& doc, experiment& e, json& normalised) {
  if (!doc.contains("cache")) return;  // warm; left out of the definition, so older definitions keep their fingerprint
  const auto& v = doc["cache"];
  const std::set<std::string> modes = {"warm", "cold"};
  if (!v.is_string() && !v.is_array())
    fail(e.source, "cache", std::string("expected \"warm\", \"cold\" or a list of them, got ") + type_name(v));
  if (v.is_string() && !modes.count(v.get<std::string>()))
    fail(e.source, "cache", "unknown cache mode '" + v.get<std::string>() + "' (expected warm or cold)");
  const auto names =
      v.is_string() ? std::vector<std::string>{v.get<std::string>()} : string_axis(v, e.source, "cache", modes);
  e.cache.clear();
  for (const auto& name : names) e.cache.push_back(parse_cache_mode(name));
  normalised["cache"] = v.is_string() ? json(names.front()) : json(names);
}

const std::set<std::string>& operation_field_keys() {
  static const std::set<std::string> keys = {"operation",   "shapes",      "variants", "memory",
                                             "block_sizes", "row_padding", "timers"};
  return keys;
}

namespace {

std::string operation_names() {
  std::string names;
  for (const auto* op : operation_registry::instance().all()) names += (names.empty() ? "" : ", ") + op->info().name;
  return names.empty() ? "none registered" : names;
}

// "operation": a name or a list of names, every one registered, all with the same axes.
void parse_operations(const json& doc, experiment& e) {
  const auto& source = e.source;
  if (!doc.contains("operation"))
    fail(source, "operation", "required (registered operations: " + operation_names() + ")");
  const auto& v = doc["operation"];
  e.operations = v.is_string() ? std::vector<std::string>{v.get<std::string>()} : string_axis(v, source, "operation");
  for (std::size_t i = 0; i < e.operations.size(); ++i) {
    const auto* op = operation_registry::instance().find(e.operations[i]);
    if (op == nullptr)
      fail(source, "operation", "unknown operation '" + e.operations[i] + "' (registered: " + operation_names() + ")");
    if (i == 0)
      e.axes = op->info().axes;
    else if (op->info().axes != e.axes)
      fail(source, "operation",
           "operations '" + e.operations[0] + "' and '" + e.operations[i] +
               "' have different axes; an experiment's operations share their axes");
  }
}

// The problem points: explicit "shapes", or the grid of one key per axis (the first axis varies slowest).
void parse_points(const json& doc, experiment& e) {
  const auto& source = e.source;
  const std::string pair_text = "[" + [&] {
    std::string t;
    for (const auto& a : e.axes) t += (t.empty() ? "" : ", ") + a;
    return t;
  }() + "]";
  if (doc.contains("shapes")) {
    for (const auto& axis : e.axes)
      if (doc.contains(axis)) fail(source, "shapes", "give either shapes or " + pair_text + " axes, not both");
    const auto& v = doc["shapes"];
    if (!v.is_array() || v.empty()) fail(source, "shapes", "expected a non-empty list of " + pair_text + " points");
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string field = "shapes[" + std::to_string(i) + "]";
      if (!v[i].is_array() || v[i].size() != e.axes.size())
        fail(source, field, "expected a " + pair_text + " point, got " + v[i].dump());
      std::vector<std::int64_t> point;
      for (std::size_t a = 0; a < e.axes.size(); ++a)
        point.push_back(positive_integer(v[i][a], source, field + "[" + std::to_string(a) + "]"));
      if (std::find(e.points.begin(), e.points.end(), point) != e.points.end())
        fail(source, field, "duplicate shape " + v[i].dump());
      e.points.push_back(point);
    }
    return;
  }
  std::vector<std::vector<std::int64_t>> values;
  for (const auto& axis : e.axes) {
    if (!doc.contains(axis)) fail(source, axis, "required: an axis of operation " + e.operations.front());
    values.push_back(integer_axis(doc[axis], source, axis));
  }
  e.points = {{}};
  for (const auto& axis_values : values) {
    std::vector<std::vector<std::int64_t>> grid;
    for (const auto& prefix : e.points)
      for (const auto x : axis_values) {
        grid.push_back(prefix);
        grid.back().push_back(x);
      }
    e.points = std::move(grid);
  }
}

}  // namespace

void parse_operation_fields(const json& doc, experiment& e, json& normalised) {
  const auto& source = e.source;
  parse_operations(doc, e);
  parse_points(doc, e);
  if (doc.contains("block_sizes")) {
    e.block_sizes = integer_axis(doc["block_sizes"], source, "block_sizes", true);
    for (std::size_t i = 0; i < e.block_sizes.size(); ++i)
      if (e.block_sizes[i] > 1024)
        fail(source, "block_sizes[" + std::to_string(i) + "]", "at most 1024 threads per block");
  }
  if (doc.contains("row_padding")) e.row_padding = positive_integer(doc["row_padding"], source, "row_padding", true);
  if (doc.contains("variants")) e.variants = string_axis(doc["variants"], source, "variants");
  if (doc.contains("memory")) e.memory = string_axis(doc["memory"], source, "memory", {"pageable", "pinned"});
  if (doc.contains("timers")) {
    for (const auto& name : string_axis(doc["timers"], source, "timers")) {
      try {
        e.timers.push_back(parse_timer_kind(name));
      } catch (const std::exception& ex) {
        fail(source, "timers", ex.what());
      }
    }
  } else {
    e.timers = {timer_kind::host_wall, timer_kind::resident_wall, timer_kind::device_events, timer_kind::one_shot};
  }
  // Byte counts of every point's inputs must fit in 64 bits; the operation names the axis otherwise.
  for (const auto& point : e.points)
    for (const auto& name : e.operations) {
      const auto* op = operation_registry::instance().find(name);
      try {
        for (const auto layout : op->info().layouts) op->shape(point, layout, e.row_padding);
      } catch (const std::invalid_argument& ex) {
        fail(source, doc.contains("shapes") ? "shapes" : e.axes.front(), ex.what());
      }
    }
  normalised["operation"] = e.operations;
  if (doc.contains("shapes"))
    normalised["shapes"] = e.points;
  else
    for (const auto& axis : e.axes) normalised[axis] = integer_axis(doc[axis], source, axis);
  normalised["block_sizes"] = e.block_sizes;
  normalised["variants"] = e.variants;
  normalised["memory"] = e.memory;
  normalised["row_padding"] = e.row_padding;
  std::vector<std::string> timer_names;
  for (auto t : e.timers) timer_names.push_back(to_string(t));
  normalised["timers"] = timer_names;
}

}  // namespace experiment_fields

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using experiment_fields::fail;

constexpr std::int64_t max_file_bytes = 1 << 20;  // an experiment is a page of JSON, not a data set

// Adaptive sampling's keys: a precision (a fraction in (0, 0.5]) and its three bounds, each defaulted from the
// fixed counts, which become the least a point gets. The bounds without a precision mean nothing: refused.
template <class Small>
void parse_precision(const json& p, experiment& e, const Small& small) {
  const auto& source = e.source;
  const auto number = [&](const char* key, double lo, double hi) {
    const auto& v = p[key];
    if (!v.is_number())
      fail(source, std::string("protocol.") + key, std::string("expected a number, got ") + v.type_name());
    const double x = v.get<double>();
    if (!(x > lo && x <= hi))
      fail(source, std::string("protocol.") + key,
           "must lie in (" + json(lo).dump() + ", " + json(hi).dump() + "], got " + v.dump());
    return x;
  };
  if (!p.contains("precision")) {
    for (const char* key : {"max_trials", "max_replications", "max_seconds"})
      if (p.contains(key))
        fail(source, std::string("protocol.") + key, "goes with protocol.precision, which is absent");
    return;
  }
  auto& pr = e.protocol;
  pr.precision = number("precision", 0.0, 0.5);
  pr.max_trials = p.contains("max_trials") ? small("max_trials", 1, 1000000) : 20 * pr.trials;
  pr.max_replications = p.contains("max_replications") ? small("max_replications", 1, 1000) : 3 * pr.replications;
  pr.max_seconds = p.contains("max_seconds") ? number("max_seconds", 0.0, 86400.0) : 10.0;
  if (pr.max_trials < pr.trials)
    fail(source, "protocol.max_trials", "is below protocol.trials (" + std::to_string(pr.trials) + ")");
  if (pr.max_replications < pr.replications)
    fail(source, "protocol.max_replications",
         "is below protocol.replications (" + std::to_string(pr.replications) + ")");
}

constexpr detail::name_table<throttle_policy, 3> k_throttle_policy_names{{
    {throttle_policy::accept, "accept"},
    {throttle_policy::exclude, "exclude"},
    {throttle_policy::remeasure, "remeasure"},
}};

// The throttling policy's keys: the policy's name, and under remeasure the cool-down between attempts (seconds,
// default 30) and the most re-measurements of a point (default 2). Those two mean nothing under another policy.
template <class Small>
void parse_throttle_policy(const json& p, experiment& e, const Small& small) {
  const auto& source = e.source;
  auto& pr = e.protocol;
  if (p.contains("throttled")) {
    if (!p["throttled"].is_string()) fail(source, "protocol.throttled", "expected accept, exclude or remeasure");
    const auto name = p["throttled"].get<std::string>();
    const auto* policy = detail::find_value(k_throttle_policy_names, name);
    if (policy == nullptr) fail(source, "protocol.throttled", "'" + name + "': expected accept, exclude or remeasure");
    pr.throttled = *policy;
  }
  if (pr.throttled != throttle_policy::remeasure) {
    for (const char* key : {"cool_down_s", "max_remeasures"})
      if (p.contains(key)) fail(source, std::string("protocol.") + key, "goes with protocol.throttled \"remeasure\"");
    return;
  }
  pr.cool_down_seconds = 30.0;
  if (p.contains("cool_down_s")) {
    const auto& v = p["cool_down_s"];
    if (!v.is_number() || !(v.get<double>() >= 0.0 && v.get<double>() <= 3600.0))
      fail(source, "protocol.cool_down_s", "expected a number of seconds in [0, 3600], got " + v.dump());
    pr.cool_down_seconds = v.get<double>();
  }
  pr.max_remeasures = p.contains("max_remeasures") ? small("max_remeasures", 1, 100) : 2;
}

void parse_protocol(const json& doc, experiment& e) {
  using experiment_fields::positive_integer;
  const auto& source = e.source;
  if (!doc.contains("protocol")) return;
  const auto& p = doc["protocol"];
  if (!p.is_object()) fail(source, "protocol", std::string("expected an object, got ") + p.type_name());
  static const std::set<std::string> pk = {
      "warmups",    "trials",           "replications", "seed",      "threads",     "shuffle",       "precision",
      "max_trials", "max_replications", "max_seconds",  "throttled", "cool_down_s", "max_remeasures"};
  for (const auto& [key, _] : p.items())
    if (!pk.count(key)) fail(source, "protocol." + key, "unknown key");
  const auto small = [&](const char* key, int lo, int hi) {
    const auto v = positive_integer(p[key], source, std::string("protocol.") + key, lo == 0);
    if (v < lo || v > hi)
      fail(source, std::string("protocol.") + key,
           "must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int>(v);
  };
  if (p.contains("warmups")) e.protocol.warmups = small("warmups", 0, 1000);
  if (p.contains("trials")) e.protocol.trials = small("trials", 1, 100000);
  if (p.contains("replications")) e.protocol.replications = small("replications", 1, 1000);
  if (p.contains("threads")) e.protocol.threads = small("threads", 1, 4096);
  if (p.contains("seed")) {
    if (!p["seed"].is_number_unsigned() && !(p["seed"].is_number_integer() && p["seed"].get<std::int64_t>() >= 0))
      fail(source, "protocol.seed", "expected a non-negative integer");
    e.protocol.seed = p["seed"].get<std::uint64_t>();
  }
  if (p.contains("shuffle")) {
    if (!p["shuffle"].is_boolean()) fail(source, "protocol.shuffle", "expected true or false");
    e.protocol.shuffle = p["shuffle"].get<bool>();
  }
  parse_precision(p, e, small);
  parse_throttle_policy(p, e, small);
}

std::string kind_names() {
  std::string names;
  for (const auto* k : experiment_kind_registry::instance().all()) names += (names.empty() ? "" : ", ") + k->name;
  return names;
}

// The keys a document of this kind may hold: the common ones, the kind's, and its operations' axes.
void check_keys(const json& doc, const experiment_kind& kind, const experiment& e) {
  static const std::set<std::string> common = {"name", "description", "kind", "protocol"};
  std::set<std::string> axes;
  if (kind.takes_operations && doc.contains("operation")) {
    const auto& v = doc["operation"];
    std::vector<std::string> names;
    if (v.is_string())
      names.push_back(v.get<std::string>());
    else if (v.is_array())
      for (const auto& n : v)
        if (n.is_string()) names.push_back(n.get<std::string>());
    for (const auto& n : names)
      if (const auto* op = operation_registry::instance().find(n))
        axes.insert(op->info().axes.begin(), op->info().axes.end());
  }
  for (const auto& [key, _] : doc.items())
    if (!common.count(key) && !kind.keys.count(key) && !axes.count(key))
      fail(e.source, key, "unknown key for kind " + kind.name);
}

}  // namespace

namespace {
const std::string& kind_name(const experiment_kind& kind) { return kind.name; }
}  // namespace

experiment_kind_registry& experiment_kind_registry::instance() {
  static experiment_kind_registry registry;
  return registry;
}

void experiment_kind_registry::add(experiment_kind kind) {
  if (kind.name.empty() || !kind.parse || !kind.point_count || !kind.run)
    throw std::logic_error("experiment kind registration " + kind.name +
                           " needs a name, a parser, a point count and a runner");
  detail::require_unregistered(m_kinds, kind.name, kind_name, "experiment kind");
  m_kinds.push_back(std::move(kind));
}

const experiment_kind* experiment_kind_registry::find(const std::string& name) const {
  return detail::find_entry(m_kinds, name, kind_name);
}

std::vector<const experiment_kind*> experiment_kind_registry::all() const {
  return detail::sorted_entries(m_kinds, kind_name);
}

const experiment_kind& kind_of(const experiment& e) {
  const auto* kind = experiment_kind_registry::instance().find(e.kind);
  if (kind == nullptr) throw experiment_error(e.source + ": kind '" + e.kind + "' is not run by this build");
  return *kind;
}

experiment parse_experiment(const std::string& text, const std::string& source) {
  if (static_cast<std::int64_t>(text.size()) > max_file_bytes)
    fail(source, "", "file is " + std::to_string(text.size()) + " bytes; experiment files are limited to 1 MiB");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers beyond a double
    fail(source, "", std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) fail(source, "", std::string("the top level must be a JSON object, got ") + doc.type_name());

  experiment e;
  e.source = source;
  if (!doc.contains("name") || !doc["name"].is_string() || doc["name"].get<std::string>().empty())
    fail(source, "name", "required non-empty string");
  e.name = doc["name"].get<std::string>();
  for (const char c : e.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'))
      fail(source, "name", "'" + e.name + "' may only contain letters, digits, '_' and '-'");
  if (doc.contains("description")) {
    if (!doc["description"].is_string()) fail(source, "description", "expected a string");
    e.description = doc["description"].get<std::string>();
  }
  if (doc.contains("kind")) {
    if (!doc["kind"].is_string()) fail(source, "kind", "expected a string");
    e.kind = doc["kind"].get<std::string>();
  }
  const auto* kind = experiment_kind_registry::instance().find(e.kind);
  if (kind == nullptr) fail(source, "kind", "unknown kind '" + e.kind + "' (expected one of: " + kind_names() + ")");
  // The normalised definition is what the archive keeps and what resume/merge compare. The kind parses
  // first: an operation kind must know its operations' axes before it can tell an unknown key.
  json norm = doc;
  norm["kind"] = e.kind;
  if (!kind->takes_operations) check_keys(doc, *kind, e);
  kind->parse(doc, e, norm);
  if (kind->takes_operations) check_keys(doc, *kind, e);
  parse_protocol(doc, e);
  norm["protocol"] = {{"warmups", e.protocol.warmups},           {"trials", e.protocol.trials},
                      {"replications", e.protocol.replications}, {"seed", e.protocol.seed},
                      {"threads", e.protocol.threads},           {"shuffle", e.protocol.shuffle}};
  // Only an adaptive protocol names its keys: a fixed one's definition, and so its fingerprint, stays as it was.
  if (e.protocol.adaptive()) {
    norm["protocol"]["precision"] = e.protocol.precision;
    norm["protocol"]["max_trials"] = e.protocol.max_trials;
    norm["protocol"]["max_replications"] = e.protocol.max_replications;
    norm["protocol"]["max_seconds"] = e.protocol.max_seconds;
  }
  // The same for the throttling policy: the default (accept) leaves the definition as it was.
  if (e.protocol.throttled != throttle_policy::accept) norm["protocol"]["throttled"] = to_string(e.protocol.throttled);
  if (e.protocol.throttled == throttle_policy::remeasure) {
    norm["protocol"]["cool_down_s"] = e.protocol.cool_down_seconds;
    norm["protocol"]["max_remeasures"] = e.protocol.max_remeasures;
  }
  e.definition_json = norm.dump();
  return e;
}

std::string experiment::fingerprint() const {
  // FNV-1a 64 over the normalised definition: stable across runs, machines and compilers.
  std::uint64_t h = 1469598103934665603ULL;
  for (const unsigned char c : definition_json) h = (h ^ c) * 1099511628211ULL;
  std::ostringstream os;
  os << std::hex << h;
  return os.str();
}

experiment load_experiment(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw experiment_error(path + ": no such experiment file");
  const auto size = fs::file_size(path, ec);
  if (!ec && size > std::uintmax_t(max_file_bytes))
    throw experiment_error(path + ": file is " + std::to_string(size) +
                           " bytes; experiment files are limited to 1 MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw experiment_error(path + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_experiment(ss.str(), path);
}

namespace {
std::vector<fs::path> experiment_dirs() { return resource_dirs(resource_kind::experiments); }
}  // namespace

std::string resolve_experiment_path(const std::string& name_or_path) {
  std::error_code ec;
  if (name_or_path.find('/') != std::string::npos || fs::path(name_or_path).extension() == ".json") {
    if (!fs::exists(name_or_path, ec)) throw experiment_error(name_or_path + ": no such experiment file");
    return name_or_path;
  }
  for (const auto& dir : experiment_dirs()) {
    const auto p = dir / (name_or_path + ".json");
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  std::string names;
  for (const auto& n : builtin_experiment_names()) names += (names.empty() ? "" : ", ") + n;
  throw experiment_error("no built-in experiment named '" + name_or_path + "' (built in: " + names + ")");
}

std::vector<std::string> builtin_experiment_names() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& dir : experiment_dirs()) {
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".json") names.insert(entry.path().stem().string());
  }
  return {names.begin(), names.end()};
}

const char* to_string(throttle_policy policy) {
  return detail::name_of(k_throttle_policy_names, policy, "throttle_policy");
}
throttle_policy parse_throttle_policy(const std::string& name) {
  return detail::value_of(k_throttle_policy_names, name, "throttle policy");
}

}  // namespace kstudy
