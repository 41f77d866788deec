#include "kstudy/fault_injection.hpp"

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/detail/name_table.hpp"
#include "kstudy/variant_unavailable.hpp"

#ifdef KSTUDY_HAVE_CUDA_VARIANTS
#include "kstudy/cuda_escape.hpp"
#endif

namespace kstudy {

namespace {
// slow_down's name alone: KSTUDY_INJECT_FAULT also takes slow=FACTOR.
constexpr detail::name_table<fault_kind, 7> k_fault_kind_names{{
    {fault_kind::host_exception, "throw"},
    {fault_kind::invalid_launch, "launch"},
    {fault_kind::device_trap, "trap"},
    {fault_kind::corrupt_output, "corrupt"},
    {fault_kind::late_corrupt_output, "corrupt_late"},
    {fault_kind::slow_down, "slow"},
    {fault_kind::unavailable, "unavailable"},
}};
}  // namespace

const char* to_string(fault_kind kind) {
  const char* name = detail::find_name(k_fault_kind_names, kind);
  return name != nullptr ? name : "?";
}

fault_plan parse_fault_plan(const std::string& value) {
  const std::string where = "KSTUDY_INJECT_FAULT='" + value + "': ";
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto colon = value.find(':', start);
    parts.push_back(value.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty())
    throw std::invalid_argument(where +
                                "expected <variant>:<kind>[:<point>], kind one of throw, launch, trap, corrupt, "
                                "corrupt_late, slow[=FACTOR], unavailable");
  fault_plan plan;
  plan.pattern = parts[0];
  const std::string& kind = parts[1];
  if (kind == "slow" || kind.rfind("slow=", 0) == 0) {
    plan.kind = fault_kind::slow_down;
    plan.slowdown = 2.0;
    if (kind != "slow") {
      const std::string factor = kind.substr(5);
      std::size_t used = 0;
      double value = 0;
      try {
        value = std::stod(factor, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (factor.empty() || used != factor.size() || !(value >= 1.0 && value <= 100.0))
        throw std::invalid_argument(where + "slowdown factor '" + factor + "' is not a number from 1 to 100");
      plan.slowdown = value;
    }
  } else if (const fault_kind* named = detail::find_value(k_fault_kind_names, kind))
    plan.kind = *named;
  else
    throw std::invalid_argument(where + "unknown kind '" + kind +
                                "' (throw, launch, trap, corrupt, corrupt_late, slow[=FACTOR] or unavailable)");
  if (parts.size() == 3) {
    const auto& text = parts[2];
    if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument(where + "point '" + text + "' is not a point index (0, 1, ...)");
    plan.point = std::stoll(text);
  }
  const auto matches = variant_registry::instance().match(plan.pattern);
  if (matches.empty())
    throw std::invalid_argument(where + "no variant of this build matches '" + plan.pattern + "' (see `kstudy list`)");
  for (const auto* v : matches) {
    if (plan.kind == fault_kind::invalid_launch || plan.kind == fault_kind::device_trap) {
#ifndef KSTUDY_HAVE_CUDA_VARIANTS
      throw std::invalid_argument(where + "kind '" + kind + "' needs the cuda flavour");
#else
      if (v->info.backend != "cuda")
        throw std::invalid_argument(where + "kind '" + kind + "' needs a variant on the CUDA device; " + v->info.id() +
                                    " is not (name one, e.g. " + v->info.name + "@cuda)");
#endif
    }
    plan.variant_ids.insert(v->info.id());
  }
  return plan;
}

std::optional<fault_plan> fault_plan_from_environment() {
  const char* value = std::getenv("KSTUDY_INJECT_FAULT");
  if (value == nullptr || *value == '\0') return std::nullopt;
  return parse_fault_plan(value);
}

fault_injecting_variant::fault_injecting_variant(std::unique_ptr<variant> inner, fault_kind kind,
                                                 std::string variant_id, const operation& op, double slowdown)
    : m_inner(std::move(inner)),
      m_kind(kind),
      m_variant_id(std::move(variant_id)),
      m_operation(&op),
      m_slowdown(slowdown) {}

void fault_injecting_variant::prepare(const problem_data& problem, const run_options& options) {
  if (m_kind == fault_kind::unavailable)
    throw variant_unavailable("injected fault (unavailable): " + m_variant_id + " cannot run on this machine");
  m_inner->prepare(problem, options);
  m_problem = &problem;
}

void fault_injecting_variant::download(const std::vector<host_span>& outputs) {
  m_inner->download(outputs);
  if (m_kind != fault_kind::corrupt_output && !(m_kind == fault_kind::late_corrupt_output && m_late)) return;
  if (m_problem == nullptr) throw std::logic_error("injected fault (corrupt): " + m_variant_id + " was never prepared");
  try {
    m_operation->corrupt(*m_problem, outputs);
  } catch (const std::logic_error& ex) {
    throw std::logic_error("injected fault (corrupt) in " + m_variant_id + ": " + ex.what());
  }
}

void fault_injecting_variant::run() {
  if (m_kind != fault_kind::slow_down) {
    m_inner->run();
    fire_if_armed();
    return;
  }
  if (m_inner->queues_asynchronously()) {
    // Its run() returns before the work is done: only more work makes the measured time longer.
    const long runs = std::max(2L, std::lround(m_slowdown));
    for (long i = 0; i < runs; ++i) m_inner->run();
    return;
  }
  // A busy wait rather than repeated runs: any factor, not only whole ones, and the slowdown is added to
  // the same run the timer brackets.
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  m_inner->run();
  const auto extra = std::chrono::duration<double>(clock::now() - start) * (m_slowdown - 1.0);
  const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(extra);
  while (clock::now() < until) {
  }
}

// The timed runs of a device variant queue their work (enqueue_run, then wait) so CUDA events can stop
// right behind it; the fault must fire there too, not first in a later one-shot run.
void fault_injecting_variant::enqueue_run() {
  m_inner->enqueue_run();
  if (m_kind == fault_kind::slow_down)
    for (long i = 1; i < std::max(2L, std::lround(m_slowdown)); ++i) m_inner->enqueue_run();
  fire_if_armed();
}

void fault_injecting_variant::fire_if_armed() {
  if (!m_armed) return;
  m_armed = false;
  switch (m_kind) {
    case fault_kind::corrupt_output:
    case fault_kind::slow_down:
    case fault_kind::unavailable:
      return;  // download() corrupts, run() slows down, prepare() refused: nothing fires once
    case fault_kind::late_corrupt_output:
      m_late = true;  // from now on download() corrupts
      return;
    case fault_kind::host_exception:
      throw std::runtime_error("injected fault (throw) in " + m_variant_id);
    case fault_kind::invalid_launch:
    case fault_kind::device_trap:
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
      if (m_kind == fault_kind::invalid_launch)
        cuda_escape::inject_invalid_launch(m_inner->stream());
      else
        cuda_escape::inject_trap(m_inner->stream());
#endif
      throw std::logic_error(std::string("injected fault (") + to_string(m_kind) + ") did not fail in " + m_variant_id);
  }
}

}  // namespace kstudy
