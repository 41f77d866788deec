#pragma once
// The gate-before-timing step every consumer of variants shares (the study runner, kstudy_bench,
// kstudy profile, a cold first call): an operation's inputs at one problem point, generated once per
// point and copied into each layout a variant asks for, the float64 reference computed once, and a
// variant prepared, poisoned, run once, downloaded and checked against it.
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"

namespace kstudy {

class point_inputs {
 public:
  point_inputs(const operation& op, std::vector<std::int64_t> extents, std::int64_t row_padding, std::uint64_t seed);

  const operation& op() const { return *m_operation; }
  const std::vector<std::int64_t>& extents() const { return m_extents; }
  // The point's shape in a layout (padding included).
  table_shape shape(table_layout layout) const;
  // The inputs in a layout: generated for the first layout asked for, copied from it for the others.
  const problem_data& data(table_layout layout);
  bool has_data(table_layout layout) const { return m_data.count(layout) != 0; }
  const reference_data& reference();
  bool has_reference() const { return m_reference != nullptr; }
  // Wall seconds spent so far making the inputs (generation and copies into other layouts) and the reference: a
  // point run's inputs and reference phases are the differences across it (kstudy::point_phases).
  struct seconds_spent {
    double inputs = 0.0;
    double reference = 0.0;
  };
  seconds_spent spent() const { return m_spent; }

 private:
  const operation* m_operation;
  std::vector<std::int64_t> m_extents;
  std::int64_t m_row_padding;
  std::uint64_t m_seed;
  std::map<table_layout, std::unique_ptr<problem_data>> m_data;
  std::unique_ptr<reference_data> m_reference;
  seconds_spent m_spent;
};

// Prepares the variant on the point's inputs in its layout, poisons its outputs, runs it once, downloads
// into poisoned host arrays and checks them against the reference.
gate_result prepare_and_gate(variant& impl, const registered_variant& entry, point_inputs& inputs,
                             const run_options& options);

}  // namespace kstudy
