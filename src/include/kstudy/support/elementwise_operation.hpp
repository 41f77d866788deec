#pragma once
// The thin base of an operation whose outputs are float32 arrays, each element gated against a float64
// reference value and a bound the operation derives (a stream kernel, an axpy, a transpose). The operation
// writes what is its own:
//   - info (m_info), generate() (an array_problem or a class derived from it), the element counts of its
//     outputs, and expected(problem, output, index): the reference value of one output element and its bound
//     (0 demands the same bits);
//   - essential_traffic, essential_flops, input_bytes;
//   - optionally where() (how the gate names an element) and accept() (a check of the problem beyond its type,
//     e.g. that one class template's problems are not passed between its operations);
// and the base derives the rest from expected(): the relayout of a one-layout operation (a copy), poison
// (NaN), the gate, corrupt() (one element moved just past twice its bound), the conformance hooks
// (reference_outputs, drop_work: the tail of every output left zero), output_bytes and reference_bytes
// (none: the reference is computed from the inputs while the gate runs). CRTP, so the per-element reference
// inlines into the gate's loop. Derived::expected must be public (or the base a friend).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/support/array_operation.hpp"
#include "kstudy/support/array_problem.hpp"
#include "kstudy/support/moved_beyond.hpp"
#include "kstudy/support/operation_helpers.hpp"

namespace kstudy {

// One output element's reference: its float64 value and how far a correct output may lie from it.
struct expected_value {
  double value = 0;
  double bound = 0;
};

// The gate's accumulator over outputs compared one element at a time: counts failures, keeps the first
// failure's description, the largest error and the largest error in bounds. NaN (poison left behind) fails;
// a bound of 0 demands the same bits (so -0 for +0 fails too: a copy moves bits, it computes nothing).
class elementwise_gate {
 public:
  // rtol: the operation's relative tolerance, so that max_relative_error is |error| over the tolerance's own scale
  // (gate_result's unit: the bound over rtol); with rtol 0 (bounds of their own, or bitwise) over |reference|.
  explicit elementwise_gate(double rtol = 0) : m_rtol(rtol) {}

  // Returns whether the element passed; `where` is called for the first failure only.
  template <class Where>
  bool compare(float got, expected_value want, Where&& where) {
    ++m_checked;
    const double error = std::fabs(double(got) - want.value);
    bool ok = error <= want.bound;
    if (ok && want.bound == 0) {
      const float rounded = static_cast<float>(want.value);
      ok = std::memcmp(&got, &rounded, sizeof got) == 0;
    }
    if (std::isfinite(error))
      m_tally.error(error, relative(error, want));
    else
      m_tally.error(std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity());
    if (ok) return true;
    m_tally.fail(m_checked - 1);  // the code: the element's place in this gate's order
    if (m_tally.failures == 1) {
      std::ostringstream os;
      os.precision(9);
      os << where() << " = " << got << ", reference " << want.value << ", bound " << want.bound;
      if (want.bound == 0) os << " (bitwise)";
      m_first = os.str();
    }
    return false;
  }

  // Folds in the tally of the elements that follow this one's: the first failure stays the earliest.
  void merge(const elementwise_gate& later) {
    m_checked += later.m_checked;
    if (m_tally.failures == 0) m_first = later.m_first;
    m_tally.merge(later.m_tally);
  }

  gate_result result(double rtol = 0, double atol = 0) const {
    gate_result g;
    g.rtol = rtol;
    g.atol = atol;
    g.checked = m_checked;
    m_tally.into(g);
    if (!g.passed)
      g.message =
          m_first + "; " + std::to_string(m_tally.failures) + " of " + std::to_string(m_checked) + " elements fail";
    return g;
  }

 private:
  double relative(double error, expected_value want) const {
    if (error == 0) return 0;
    const double scale = m_rtol > 0 && want.bound > 0 ? want.bound / m_rtol : std::fabs(want.value);
    return scale > 0 ? error / scale : std::numeric_limits<double>::infinity();
  }

  double m_rtol;
  std::int64_t m_checked = 0;
  // The failures and largest errors, counted as every operation's gate counts them (its first_bad unused: a
  // later gate's codes restart at 0, so the first failure is kept as its description, m_first).
  gate_tally m_tally;
  std::string m_first;
};

template <class Derived, class Problem = array_problem>
class elementwise_operation : public array_operation<Derived, Problem> {
  using base = array_operation<Derived, Problem>;

 public:
  // Nothing stored: expected() computes each element's reference from the inputs while the gate runs.
  std::unique_ptr<reference_data> reference(const problem_data& problem) const override {
    problem_of(problem);
    return std::make_unique<reference_data>();
  }
  std::int64_t reference_bytes(const table_shape&) const override { return 0; }
  std::vector<std::int64_t> output_bytes(const table_shape& shape) const override {
    auto bytes = self().output_elements(shape);
    for (auto& b : bytes) b *= std::int64_t(sizeof(float));
    return bytes;
  }

  void poison(const std::vector<host_span>& outputs) const override {
    for (const auto& o : outputs) std::fill_n(o.as<float>(), elements(o), std::numeric_limits<float>::quiet_NaN());
  }

  // In chunks on every host thread, tallied in order (the first failure is the lowest index, on any thread count).
  gate_result check(const problem_data& problem, const reference_data&,
                    const std::vector<host_span>& outputs) const override {
    const auto& p = problem_of(problem);
    elementwise_gate gate(m_rtol);
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      const float* got = outputs[o].as<const float>();
      const std::int64_t n = elements(outputs[o]), chunks = (n + gate_chunk - 1) / gate_chunk;
      std::vector<elementwise_gate> parts(static_cast<std::size_t>(chunks), elementwise_gate(m_rtol));
#pragma omp parallel for schedule(dynamic, 1)
      for (std::int64_t c = 0; c < chunks; ++c) {
        auto& part = parts[static_cast<std::size_t>(c)];
        const std::int64_t end = std::min(n, (c + 1) * gate_chunk);
        for (std::int64_t i = c * gate_chunk; i < end; ++i)
          part.compare(got[i], self().expected(p, o, i), [&] { return self().where(p, o, i); });
      }
      for (const auto& part : parts) gate.merge(part);
    }
    auto result = gate.result(m_rtol, m_atol);
    if (!result.passed) result.message = m_info.name + ": " + result.message;
    return result;
  }

  // The first element of the first output moved just past twice its bound (one ulp where the bound is 0).
  void corrupt(const problem_data& problem, const std::vector<host_span>& outputs) const override {
    const auto want = self().expected(problem_of(problem), 0, 0);
    float* z = outputs.at(0).as<float>();
    z[0] = moved_beyond(z[0], want.bound);
  }

  bool reference_outputs(const problem_data& problem, const reference_data&,
                         const std::vector<host_span>& outputs) const override {
    const auto& p = problem_of(problem);
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      float* z = outputs[o].as<float>();
      for (std::int64_t i = 0, n = elements(outputs[o]); i < n; ++i)
        z[i] = static_cast<float>(self().expected(p, o, i).value);
    }
    return true;
  }
  // Less work: the tail of every output never written (left zero).
  void drop_work(const problem_data& problem, const reference_data& reference, const std::vector<host_span>& outputs,
                 double fraction) const override {
    reference_outputs(problem, reference, outputs);
    for (const auto& o : outputs) {
      const std::int64_t n = elements(o);
      const auto dropped = std::min(n, std::max<std::int64_t>(1, std::int64_t(std::ceil(fraction * double(n)))));
      std::fill(o.as<float>() + (n - dropped), o.as<float>() + n, 0.0f);
    }
  }

  // How the gate names output element i of output o in its message; an operation may name it by its
  // coordinates instead, declaring a public where() of its own (as it declares expected()).
  std::string where(const Problem&, std::size_t o, std::int64_t i) const {
    return m_info.outputs.at(o) + "[" + std::to_string(i) + "]";
  }

 protected:
  using base::m_info;
  using base::problem_of;
  using base::self;
  double m_rtol = 0, m_atol = 0;  // the tolerance model's constants, archived with each gate result

 private:
  static constexpr std::int64_t gate_chunk = 1 << 16;  // elements a thread checks at a time
  static std::int64_t elements(const host_span& span) { return span.bytes / std::int64_t(sizeof(float)); }
};

}  // namespace kstudy
