#pragma once
// The thin base of an operation whose output is one float64 sum, s = sum_i term(i) over n terms (a reduction, a
// dot product), gated against the terms summed in float64 within fixed blocks, the blocks added in order (the same
// value on every thread count), with the bound rtol(n) * sum_i |term(i)|. The operation writes what is its own:
//   - info (m_info: one axis n, the shape's rows; its one output named there), generate(), terms(problem) (n)
//     and term(problem, i) (the exact
//     float64 value of term i), rtol(n) and rtol_formula(n) (the bound's model as the gate's message states it);
//   - essential_traffic, essential_flops, input_bytes;
// and the base derives the rest: the relayout of a one-layout operation (a copy), the reference and its host
// memory, poison (NaN), the gate (sum_gate), corrupt() (s moved just past twice its bound) and the conformance
// hooks (reference_outputs: the reference rounded to float and widened, the best a float32 accumulation returns;
// drop_work: the tail of the terms skipped). CRTP, as elementwise_operation.hpp; Derived's hooks are public.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/support/array_operation.hpp"
#include "kstudy/support/array_problem.hpp"
#include "kstudy/support/moved_beyond.hpp"
#include "kstudy/support/operation_helpers.hpp"

namespace kstudy {

template <class Derived, class Problem = array_problem>
class sum_operation : public array_operation<Derived, Problem> {
  using base = array_operation<Derived, Problem>;

 public:
  // sum_i term(i) and sum_i |term(i)| (the scale of the bound).
  std::unique_ptr<reference_data> reference(const problem_data& problem) const override {
    const auto& p = problem_of(problem);
    return blocked_sum(self().terms(p), reference_block, [&](std::int64_t i) { return self().term(p, i); });
  }
  std::int64_t reference_bytes(const table_shape& shape) const override {
    return blocked_sum_bytes(shape.rows, reference_block);
  }
  std::vector<std::int64_t> output_bytes(const table_shape&) const override { return {std::int64_t(sizeof(double))}; }
  void poison(const std::vector<host_span>& outputs) const override {
    *sum_output(outputs) = std::numeric_limits<double>::quiet_NaN();
  }

  gate_result check(const problem_data& problem, const reference_data& reference,
                    const std::vector<host_span>& outputs) const override {
    const auto& p = problem_of(problem);
    const std::int64_t n = self().terms(p);
    return sum_gate(*sum_output(outputs), sum_of(reference), self().rtol(n), m_info.name + ": " + m_info.outputs.at(0),
                    self().rtol_formula(n));
  }
  // s moved to the first double further than twice the bound from it: if s was within the bound of the reference,
  // the new value is more than the bound away.
  void corrupt(const problem_data& problem, const std::vector<host_span>& outputs) const override {
    const auto& p = problem_of(problem);
    const double bound = self().rtol(self().terms(p)) * sum_of(*reference(p)).magnitude;
    double& s = *sum_output(outputs);
    s = moved_beyond(s, bound);
  }
  bool reference_outputs(const problem_data& problem, const reference_data& reference,
                         const std::vector<host_span>& outputs) const override {
    problem_of(problem);
    *sum_output(outputs) = double(static_cast<float>(sum_of(reference).value));
    return true;
  }
  // A sum that skipped the tail of the terms (a missed remainder, a grid one block short), in float64.
  void drop_work(const problem_data& problem, const reference_data&, const std::vector<host_span>& outputs,
                 double fraction) const override {
    const auto& p = problem_of(problem);
    const std::int64_t n = self().terms(p);
    const std::int64_t kept = n - std::max<std::int64_t>(1, std::int64_t(std::ceil(fraction * double(n))));
    double s = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (std::int64_t i = 0; i < kept; ++i) s += self().term(p, i);
    *sum_output(outputs) = s;
  }

 protected:
  using base::m_info;
  using base::problem_of;
  using base::self;

 private:
  static constexpr std::int64_t reference_block = 65536;  // terms per float64 block of the reference
  static const sum_reference& sum_of(const reference_data& reference) {
    return dynamic_cast<const sum_reference&>(reference);
  }
  static double* sum_output(const std::vector<host_span>& outputs) { return outputs.at(0).as<double>(); }
};

}  // namespace kstudy
