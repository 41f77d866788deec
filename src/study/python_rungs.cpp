// Python rungs (kstudy/runner/python_rungs.hpp): the list from one `describe`, and a variant per rung whose every
// call is a request to its worker process (scripts/kstudy_py/rungs/__main__.py says the protocol).
#include "kstudy/runner/python_rungs.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/platform/process.hpp"
#include "kstudy/resources.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/variant_unavailable.hpp"

namespace kstudy {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Where the interpreter, the kstudy_py package and the rung modules are: found once, shared by every rung.
struct rung_setup {
  std::string python;
  std::string scripts;               // holds kstudy_py/
  std::vector<std::string> folders;  // variants folders that exist
};

std::string getenv_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

// A program name without a slash, searched on PATH as a shell would (execve does not search).
std::string on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  std::stringstream path(getenv_or("PATH", "/usr/local/bin:/usr/bin:/bin"));
  for (std::string dir; std::getline(path, dir, ':');) {
    const auto candidate = (fs::path(dir.empty() ? "." : dir) / program).string();
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

double request_timeout_seconds() {
  const std::string text = getenv_or("KSTUDY_RUNG_TIMEOUT", "600");
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(seconds > 0.0))
    throw std::invalid_argument("KSTUDY_RUNG_TIMEOUT='" + text + "': expected a positive number of seconds");
  return seconds;
}

platform::spawn_options python_command(const rung_setup& setup, std::vector<std::string> arguments) {
  platform::spawn_options options;
  options.argv = {setup.python, "-m", "kstudy_py.rungs"};
  options.argv.insert(options.argv.end(), arguments.begin(), arguments.end());
  options.argv.insert(options.argv.end(), setup.folders.begin(), setup.folders.end());
  const std::string inherited = getenv_or("PYTHONPATH", "");
  options.env = {{"PYTHONPATH", setup.scripts + (inherited.empty() ? "" : ":" + inherited)},
                 {"PYTHONDONTWRITEBYTECODE", "1"}};  // no __pycache__ in a source tree or an install
  options.die_with_parent = true;
  // A forked process keeps the affinity of the thread that forked it, which OpenMP's binding may have pinned to
  // one core: a host rung's BLAS gets every core the C++ host variants get.
  options.reset_affinity = true;
  return options;
}

// Shared memory both processes map: a memfd, which the worker opens through this process's /proc entry, so
// no file is left behind whatever happens to either process.
class shared_region {
 public:
  explicit shared_region(std::int64_t bytes) : m_bytes(std::max<std::int64_t>(bytes, 1)) {
    m_fd = ::memfd_create("kstudy-rung", MFD_CLOEXEC);
    if (m_fd < 0) throw std::runtime_error(std::string("memfd_create failed: ") + std::strerror(errno));
    if (::ftruncate(m_fd, static_cast<off_t>(m_bytes)) != 0) {
      const int error = errno;
      ::close(m_fd);
      throw std::runtime_error("cannot size the shared memory of a Python rung to " + std::to_string(m_bytes) +
                               " bytes: " + std::strerror(error));
    }
    void* map = ::mmap(nullptr, static_cast<std::size_t>(m_bytes), PROT_READ | PROT_WRITE, MAP_SHARED, m_fd, 0);
    if (map == MAP_FAILED) {
      const int error = errno;
      ::close(m_fd);
      throw std::runtime_error(std::string("cannot map the shared memory of a Python rung: ") + std::strerror(error));
    }
    m_data = static_cast<unsigned char*>(map);
  }
  ~shared_region() {
    ::munmap(m_data, static_cast<std::size_t>(m_bytes));
    ::close(m_fd);
  }
  shared_region(const shared_region&) = delete;
  shared_region& operator=(const shared_region&) = delete;
  unsigned char* at(std::int64_t offset) const { return m_data + offset; }
  std::string path() const { return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(m_fd); }

 private:
  std::int64_t m_bytes;
  int m_fd = -1;
  unsigned char* m_data = nullptr;
};

// An array's place in the shared region.
struct placed_array {
  array_description array;
  std::int64_t offset = 0;
  std::int64_t bytes = 0;
};

json describe_for_worker(const placed_array& p) {
  return {{"name", p.array.name}, {"dtype", p.array.dtype}, {"extents", p.array.extents}, {"offset", p.offset}};
}

// One rung, prepared: its worker process and the shared region of its point.
class python_rung final : public variant {
 public:
  python_rung(std::shared_ptr<const rung_setup> setup, std::string id, std::string operation)
      : m_setup(std::move(setup)),
        m_id(std::move(id)),
        m_operation(std::move(operation)),
        m_timeout(request_timeout_seconds()) {}

  void prepare(const problem_data& problem, const run_options&) override {
    const auto* op = operation_registry::instance().find(m_operation);
    if (op == nullptr)
      throw std::logic_error("python rung " + m_id + ": operation " + m_operation + " is not registered");
    const auto inputs = op->external_inputs(problem);
    const auto outputs = op->external_outputs(problem.shape());
    m_inputs.clear();
    m_outputs.clear();
    std::int64_t end = 0;
    const auto place = [&](const array_description& a) {
      placed_array p{a, end, array_bytes(a)};
      end += (p.bytes + 63) / 64 * 64;  // each array 64-byte aligned, as NumPy's own allocations are
      return p;
    };
    for (const auto& [array, span] : inputs.inputs) {
      if (array_bytes(array) != span.bytes)
        throw std::logic_error("operation " + m_operation + ": input " + array.name + " is described as " +
                               std::to_string(array_bytes(array)) + " bytes, its data has " +
                               std::to_string(span.bytes));
      m_inputs.push_back(place(array));
    }
    for (const auto& array : outputs) m_outputs.push_back(place(array));
    m_streamed = inputs.streamed;
    m_worker.reset();  // a second prepare starts afresh
    m_region = std::make_unique<shared_region>(end);
    for (std::size_t i = 0; i < m_inputs.size(); ++i)
      std::memcpy(m_region->at(m_inputs[i].offset), inputs.inputs[i].second.data,
                  static_cast<std::size_t>(m_inputs[i].bytes));
    m_worker = std::make_unique<platform::line_child>(python_command(*m_setup, {"serve", m_id}));
    json request{{"command", "prepare"}, {"file", m_region->path()}, {"streamed", m_streamed}};
    for (const auto& p : m_inputs) request["inputs"].push_back(describe_for_worker(p));
    for (const auto& p : m_outputs) request["outputs"].push_back(describe_for_worker(p));
    request["scalars"] = json::object();
    for (const auto& [name, value] : inputs.scalars) request["scalars"][name] = value;
    m_config.clear();
    keep_config(ask(request));
  }

  void run() override {
    const auto reply = ask({{"command", "run"}});
    m_last = timed(reply);
    keep_config(reply);
  }

  void upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != m_streamed)
      throw std::invalid_argument("python rung " + m_id + ": " + std::to_string(inputs.size()) +
                                  " streamed inputs given, " + std::to_string(m_streamed) + " expected");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].bytes != m_inputs[i].bytes)
        throw std::invalid_argument("python rung " + m_id + ": input " + m_inputs[i].array.name + " of " +
                                    std::to_string(inputs[i].bytes) + " bytes, " + std::to_string(m_inputs[i].bytes) +
                                    " expected");
      std::memcpy(m_region->at(m_inputs[i].offset), inputs[i].data, static_cast<std::size_t>(inputs[i].bytes));
    }
    m_last = timed(ask({{"command", "upload"}}));
  }

  void download(const std::vector<host_span>& outputs) override {
    if (outputs.size() != m_outputs.size())
      throw std::invalid_argument("python rung " + m_id + ": " + std::to_string(outputs.size()) + " outputs given, " +
                                  std::to_string(m_outputs.size()) + " expected");
    m_last = timed(ask({{"command", "download"}}));
    for (std::size_t i = 0; i < outputs.size(); ++i)
      std::memcpy(outputs[i].data, m_region->at(m_outputs[i].offset),
                  static_cast<std::size_t>(std::min(outputs[i].bytes, m_outputs[i].bytes)));
  }

  void poison() override { ask({{"command", "poison"}}); }

  bool times_itself() const override { return true; }
  call_seconds last_call_seconds() const override { return m_last; }
  std::vector<std::pair<std::string, std::int64_t>> tuned_parameters() const override { return m_config; }

 private:
  // One request and its reply; a refusal becomes the exception the runner records (variant_unavailable: skipped).
  json ask(const json& request) {
    if (!m_worker) throw std::logic_error("python rung " + m_id + " used before prepare()");
    json reply;
    try {
      m_worker->send(request.dump());
      reply = json::parse(m_worker->receive(m_timeout));
    } catch (const json::exception& ex) {
      throw std::runtime_error("python rung " + m_id + ": its worker answered " + request.value("command", "") +
                               " with something that is not JSON (" + ex.what() + ")");
    } catch (const std::runtime_error& ex) {
      throw std::runtime_error("python rung " + m_id + ", request " + request.value("command", "") + ": " + ex.what());
    }
    if (reply.value("ok", false)) return reply;
    const std::string error = reply.value("error", std::string("no reason given"));
    if (reply.value("unavailable", false)) throw variant_unavailable(error);
    throw std::runtime_error("python rung " + m_id + ": " + error);
  }

  // What the rung chose (its callable's kstudy_config: a Triton tile, a block size), sent at prepare and with every
  // run, since a rung may choose at its first call; kept where it says something.
  void keep_config(const json& reply) {
    const json config = reply.value("config", json::object());  // named: items() only refers to it
    if (config.empty()) return;
    m_config.clear();
    for (const auto& [name, value] : config.items())
      if (value.is_number_integer()) m_config.emplace_back(name, value.get<std::int64_t>());
  }

  static call_seconds timed(const json& reply) {
    call_seconds s;
    s.wall = reply.at("wall").get<double>();  // a reply without its time is the worker's error, not a NaN sample
    const auto device = reply.find("device");
    if (device != reply.end() && device->is_number()) s.device = device->get<double>();
    return s;
  }

  std::shared_ptr<const rung_setup> m_setup;
  std::string m_id, m_operation;
  double m_timeout;  // seconds a request may take (KSTUDY_RUNG_TIMEOUT)
  std::vector<placed_array> m_inputs, m_outputs;
  std::size_t m_streamed = 0;
  std::unique_ptr<shared_region> m_region;
  std::unique_ptr<platform::line_child> m_worker;
  call_seconds m_last;
  std::vector<std::pair<std::string, std::int64_t>> m_config;
};

// The interpreter, the scripts and the folders; a problem leaves `summary.problem` set.
std::shared_ptr<rung_setup> find_setup(python_rungs_summary& summary) {
  auto setup = std::make_shared<rung_setup>();
  const std::string asked = getenv_or("KSTUDY_RUNG_PYTHON", getenv_or("KSTUDY_PYTHON", "python3"));
  if (asked == "none") {
    summary.problem = "KSTUDY_RUNG_PYTHON=none";
    return nullptr;
  }
  setup->python = on_path(asked);
  if (setup->python.empty()) {
    summary.problem = "no " + asked + " on PATH (KSTUDY_RUNG_PYTHON names the interpreter)";
    return nullptr;
  }
  summary.python = setup->python;
  std::error_code ec;
  for (const auto& dir : resource_dirs(resource_kind::scripts))
    if (fs::exists(dir / "kstudy_py" / "rungs" / "__main__.py", ec)) {
      setup->scripts = dir.string();
      break;
    }
  if (setup->scripts.empty()) {
    summary.problem = "kstudy_py/rungs is in none of the scripts folders (KSTUDY_SCRIPTS_DIR)";
    return nullptr;
  }
  for (const auto& dir : resource_dirs(resource_kind::variants))
    if (fs::is_directory(dir, ec)) setup->folders.push_back(dir.string());
  if (setup->folders.empty()) {
    summary.problem = "no variants folder (KSTUDY_VARIANTS_DIR)";
    return nullptr;
  }
  return setup;
}

// The registry fields of one described rung.
variant_info rung_info(const json& r, const python_rungs_summary& summary) {
  variant_info info;
  info.name = r.at("name").get<std::string>();
  info.operation = r.at("operation").get<std::string>();
  info.family = r.at("family").get<std::string>();
  info.fusion = parse_fusion_level(r.at("fusion").get<std::string>());
  info.implementation = parse_implementation(r.at("implementation").get<std::string>());
  info.backend = r.at("backend").get<std::string>();
  info.description = r.at("description").get<std::string>();
  info.layout = parse_table_layout(r.at("layout").get<std::string>());
  info.on_device = r.at("on_device").get<bool>();
  info.kernels_launched = r.at("kernels").get<int>();
  const auto version = r.at("version").get<std::string>();
  info.runtime = "python " + summary.python_version + " (" + summary.python + "), " +
                 r.at("framework").get<std::string>() + (version.empty() ? "" : " " + version);
  info.unavailable = r.at("unavailable").get<std::string>();
  return info;
}

// What one process found (where, and describe's answer), handed to its children in the environment: a study's
// replication children (and a worker) then register the same rungs without starting Python again, which cost a
// kstudy process 0.1 to 1 s (an interpreter behind a pyenv shim) on a loaded 2-core machine.
constexpr const char* handoff_variable = python_rungs_handoff_variable;

void hand_down(const rung_setup* setup, const python_rungs_summary& summary, const json& described) {
  json found{{"problem", summary.problem}, {"described", described}};
  if (setup != nullptr)
    found.update({{"python", setup->python}, {"scripts", setup->scripts}, {"folders", setup->folders}});
  ::setenv(handoff_variable, found.dump().c_str(), 1);
}

// The parent's findings, where this process is its child; false where there are none (or they do not parse).
bool handed_down(std::shared_ptr<rung_setup>& setup, python_rungs_summary& summary, json& described) {
  const char* text = std::getenv(handoff_variable);
  if (text == nullptr || *text == '\0') return false;
  try {
    const auto found = json::parse(text);
    summary.problem = found.at("problem").get<std::string>();
    described = found.at("described");
    if (summary.problem.empty()) {
      setup = std::make_shared<rung_setup>();
      setup->python = found.at("python").get<std::string>();
      setup->scripts = found.at("scripts").get<std::string>();
      setup->folders = found.at("folders").get<std::vector<std::string>>();
      summary.python = setup->python;
    }
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

// Asks the interpreter for the rungs; leaves `summary.problem` set where it cannot.
json describe(const rung_setup& setup, python_rungs_summary& summary) {
  auto options = python_command(setup, {"describe"});
  options.stdout_target = platform::stream_target::capture;
  try {
    const auto result = platform::run_process(options);
    if (result.status() != 0) throw std::runtime_error("exit status " + std::to_string(result.status()));
    return json::parse(result.output);
  } catch (const std::exception& ex) {
    summary.problem = setup.python + " -m kstudy_py.rungs describe failed (" + ex.what() + ")";
    return json::object();
  }
}

python_rungs_summary discover() {
  python_rungs_summary summary;
  std::shared_ptr<rung_setup> setup;
  json described;
  if (!handed_down(setup, summary, described)) {
    setup = find_setup(summary);
    if (setup) described = describe(*setup, summary);
    hand_down(summary.problem.empty() ? setup.get() : nullptr, summary, described);
  }
  if (!summary.problem.empty()) return summary;
  summary.python_version = described.value("python_version", std::string());
  for (const auto& e : described.value("errors", json::array())) summary.errors.push_back(e.get<std::string>());
  const std::shared_ptr<const rung_setup> shared = setup;
  for (const auto& r : described.value("rungs", json::array())) {
    const auto id = r.value("id", std::string("(no id)"));
    try {
      auto info = rung_info(r, summary);
      const auto* op = operation_registry::instance().find(info.operation);
      if (op == nullptr) throw std::invalid_argument("operation " + info.operation + " is not in this build");
      // An operation that does not describe its arrays has no Python rungs (it throws, naming itself): said here,
      // once, rather than as the rung's failure at every point.
      const auto& o = op->info();
      op->external_outputs(op->shape(std::vector<std::int64_t>(o.axes.size(), 1), o.layouts.front(), 0));
      const auto operation = info.operation;
      variant_registry::instance().add(std::move(info), [shared, id, operation]() -> std::unique_ptr<variant> {
        return std::make_unique<python_rung>(shared, id, operation);
      });
      ++summary.registered;
    } catch (const std::exception& ex) {  // a field out of range, a clash with a registered id
      summary.errors.push_back("rung " + id + ": " + ex.what());
    }
  }
  return summary;
}

}  // namespace

const python_rungs_summary& register_python_rungs() {
  static const python_rungs_summary summary = discover();
  return summary;
}

}  // namespace kstudy
