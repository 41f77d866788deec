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

namespace kstudy {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr std::int64_t max_file_bytes = 1 << 20;  // an experiment is a page of JSON, not a data set

[[noreturn]] void fail(const std::string& source, const std::string& field, const std::string& problem) {
  throw experiment_error(source + ": " + (field.empty() ? "" : "field '" + field + "': ") + problem);
}

std::string type_name(const json& v) { return v.type_name(); }

std::int64_t positive_integer(const json& v, const std::string& source, const std::string& field, bool allow_zero = false) {
  if (!v.is_number_integer()) fail(source, field, "expected an integer, got " + type_name(v) + " " + v.dump());
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
    fail(source, field, "value " + v.dump() + " does not fit in 64 bits");
  const std::int64_t n = v.get<std::int64_t>();
  if (n < 0 || (n == 0 && !allow_zero))
    fail(source, field, std::string("expected a ") + (allow_zero ? "non-negative" : "positive") + " integer, got " + v.dump());
  return n;
}

// A list of integers, or {"from", "to", "factor"} for a geometric sweep.
std::vector<std::int64_t> integer_axis(const json& v, const std::string& source, const std::string& field, bool allow_zero = false) {
  std::vector<std::int64_t> out;
  if (v.is_object()) {
    for (const auto& [key, _] : v.items())
      if (key != "from" && key != "to" && key != "factor") fail(source, field + "." + key, "unknown key (expected from, to, factor)");
    if (!v.contains("from") || !v.contains("to")) fail(source, field, "a range needs 'from' and 'to'");
    const std::int64_t from = positive_integer(v["from"], source, field + ".from");
    const std::int64_t to = positive_integer(v["to"], source, field + ".to");
    const std::int64_t factor = v.contains("factor") ? positive_integer(v["factor"], source, field + ".factor") : 2;
    if (factor < 2) fail(source, field + ".factor", "must be at least 2");
    if (to < from) fail(source, field, "'to' (" + std::to_string(to) + ") is below 'from' (" + std::to_string(from) + ")");
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
                                     const std::set<std::string>& allowed = {}) {
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

}  // namespace

experiment parse_experiment(const std::string& text, const std::string& source) {
  if (static_cast<std::int64_t>(text.size()) > max_file_bytes)
    fail(source, "", "file is " + std::to_string(text.size()) + " bytes; experiment files are limited to 1 MiB");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers beyond a double
    fail(source, "", std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) fail(source, "", "the top level must be a JSON object, got " + type_name(doc));
  static const std::set<std::string> known = {"name",   "description", "kind",        "rows",   "features",
                                              "variants", "memory",    "block_sizes", "row_padding", "timers",
                                              "protocol", "sizes_bytes", "directions", "shapes"};
  for (const auto& [key, _] : doc.items())
    if (!known.count(key)) fail(source, key, "unknown key");

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
  static const std::set<std::string> kinds = {"scoring", "transfer", "launch", "cold_compile", "transpose"};
  if (!kinds.count(e.kind)) fail(source, "kind", "unknown kind '" + e.kind + "' (expected scoring, transfer, launch, cold_compile or transpose)");

  if (doc.contains("shapes")) {
    // Explicit points (a representative set, e.g. for `kstudy profile`) instead of the rows x features grid.
    if (e.kind != "scoring") fail(source, "shapes", "only kind scoring takes explicit shapes");
    if (doc.contains("rows") || doc.contains("features"))
      fail(source, "shapes", "give either shapes or rows and features, not both");
    const auto& v = doc["shapes"];
    if (!v.is_array() || v.empty()) fail(source, "shapes", "expected a non-empty list of [rows, features] pairs");
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string field = "shapes[" + std::to_string(i) + "]";
      if (!v[i].is_array() || v[i].size() != 2) fail(source, field, "expected a [rows, features] pair, got " + v[i].dump());
      const std::pair<std::int64_t, std::int64_t> shape{positive_integer(v[i][0], source, field + "[0]"),
                                                         positive_integer(v[i][1], source, field + "[1]")};
      if (std::find(e.shapes.begin(), e.shapes.end(), shape) != e.shapes.end())
        fail(source, field, "duplicate shape " + v[i].dump());
      e.shapes.push_back(shape);
    }
  }
  const bool needs_table = (e.kind == "scoring" && e.shapes.empty()) || e.kind == "transpose" || e.kind == "cold_compile";
  if (doc.contains("rows")) e.rows = integer_axis(doc["rows"], source, "rows");
  else if (needs_table) fail(source, "rows", "required for kind " + e.kind);
  if (doc.contains("features")) e.features = integer_axis(doc["features"], source, "features");
  else if (needs_table) fail(source, "features", "required for kind " + e.kind);
  if (doc.contains("block_sizes")) {
    e.block_sizes = integer_axis(doc["block_sizes"], source, "block_sizes", true);
    for (std::size_t i = 0; i < e.block_sizes.size(); ++i)
      if (e.block_sizes[i] > 1024) fail(source, "block_sizes[" + std::to_string(i) + "]", "at most 1024 threads per block");
  }
  if (doc.contains("sizes_bytes")) e.sizes_bytes = integer_axis(doc["sizes_bytes"], source, "sizes_bytes");
  else if (e.kind == "transfer") fail(source, "sizes_bytes", "required for kind transfer");
  if (doc.contains("row_padding")) e.row_padding = positive_integer(doc["row_padding"], source, "row_padding", true);
  if (doc.contains("variants")) e.variants = string_axis(doc["variants"], source, "variants");
  if (doc.contains("memory")) e.memory = string_axis(doc["memory"], source, "memory", {"pageable", "pinned"});
  if (doc.contains("directions")) e.directions = string_axis(doc["directions"], source, "directions", {"h2d", "d2h"});
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
  // Byte counts of every table must fit in 64 bits.
  for (const auto& [r, f] : e.table_shapes())
    if (f + e.row_padding > std::numeric_limits<std::int64_t>::max() / 8 / r)
      fail(source, e.shapes.empty() ? "rows" : "shapes",
           std::to_string(r) + " rows x " + std::to_string(f) + " features overflows a 64-bit byte count");

  if (doc.contains("protocol")) {
    const auto& p = doc["protocol"];
    if (!p.is_object()) fail(source, "protocol", "expected an object, got " + type_name(p));
    static const std::set<std::string> pk = {"warmups", "trials", "replications", "seed", "threads", "shuffle"};
    for (const auto& [key, _] : p.items())
      if (!pk.count(key)) fail(source, "protocol." + key, "unknown key");
    const auto small = [&](const char* key, int lo, int hi) {
      const auto v = positive_integer(p[key], source, std::string("protocol.") + key, lo == 0);
      if (v < lo || v > hi) fail(source, std::string("protocol.") + key, "must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
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
  }
  // The normalised definition is what the archive keeps and what resume/merge compare.
  json norm = doc;
  norm["kind"] = e.kind;
  if (!e.rows.empty()) norm["rows"] = e.rows;
  if (!e.features.empty()) norm["features"] = e.features;
  if (!e.shapes.empty()) {
    norm["shapes"] = json::array();
    for (const auto& [r, f] : e.shapes) norm["shapes"].push_back({r, f});
  }
  norm["block_sizes"] = e.block_sizes;
  norm["variants"] = e.variants;
  norm["memory"] = e.memory;
  norm["row_padding"] = e.row_padding;
  std::vector<std::string> timer_names;
  for (auto t : e.timers) timer_names.push_back(to_string(t));
  norm["timers"] = timer_names;
  if (e.kind == "transfer") {
    norm["sizes_bytes"] = e.sizes_bytes;
    norm["directions"] = e.directions;
  }
  norm["protocol"] = {{"warmups", e.protocol.warmups}, {"trials", e.protocol.trials},
                      {"replications", e.protocol.replications}, {"seed", e.protocol.seed},
                      {"threads", e.protocol.threads}, {"shuffle", e.protocol.shuffle}};
  e.definition_json = norm.dump();
  return e;
}

std::vector<std::pair<std::int64_t, std::int64_t>> experiment::table_shapes() const {
  if (!shapes.empty()) return shapes;
  std::vector<std::pair<std::int64_t, std::int64_t>> grid;
  for (const auto r : rows)
    for (const auto f : features) grid.emplace_back(r, f);
  return grid;
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
    throw experiment_error(path + ": file is " + std::to_string(size) + " bytes; experiment files are limited to 1 MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw experiment_error(path + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_experiment(ss.str(), path);
}

namespace {
std::vector<fs::path> experiment_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("KSTUDY_EXPERIMENTS_DIR")) dirs.emplace_back(env);
#ifdef KSTUDY_SOURCE_DIR
  dirs.emplace_back(fs::path(KSTUDY_SOURCE_DIR) / "experiments");
#endif
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path() / "experiments");                       // bundle layout
    dirs.push_back(exe.parent_path() / ".." / "share" / "kstudy" / "experiments");
  }
  return dirs;
}
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

}  // namespace kstudy
