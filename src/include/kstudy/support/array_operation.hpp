#pragma once
// What the thin operation bases (elementwise_operation.hpp, sum_operation.hpp) share: the operation's info, the
// relayout of a one-layout operation (a copy of its problem), and every problem handed to a hook downcast to the
// operation's own type and passed through Derived::accept (a check beyond the type; by default none). CRTP:
// Derived is the operation itself, Problem its problem_data type.
#include <memory>
#include <stdexcept>

#include "kstudy/operation.hpp"
#include "kstudy/support/array_problem.hpp"

namespace kstudy {

template <class Derived, class Problem>
class array_operation : public described_operation {
 public:
  // One layout: the same values are a copy.
  std::unique_ptr<problem_data> relayout(const problem_data& source, const table_shape& shape) const override {
    const auto& p = problem_of(source);
    if (p.shape().rows != shape.rows || p.shape().features != shape.features || p.shape().depth != shape.depth)
      throw std::invalid_argument(m_info.name + ": relayout cannot change the shape");
    return std::make_unique<Problem>(p);
  }

  // Every problem the base is handed, once it is of the operation's type; throws std::invalid_argument for one
  // it cannot take. An operation declares its own (public) to refuse more.
  const Problem& accept(const Problem& problem) const { return problem; }

 protected:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
  const Problem& problem_of(const problem_data& problem) const {
    return self().accept(problem_as<Problem>(problem, m_info.name));
  }
};

}  // namespace kstudy
