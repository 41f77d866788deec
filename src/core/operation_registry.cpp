#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "detail/registry_lookup.hpp"
#include "kstudy/operation.hpp"

namespace kstudy {

table_shape operation::shape(const std::vector<std::int64_t>& extents, table_layout layout,
                             std::int64_t row_padding) const {
  const auto& axes = info().axes;
  if (extents.size() != axes.size())
    throw std::invalid_argument("operation " + info().name + " takes " + std::to_string(axes.size()) +
                                " extents, got " + std::to_string(extents.size()));
  for (std::size_t i = 0; i < axes.size(); ++i)
    if (extents[i] < 1)
      throw std::invalid_argument("operation " + info().name + ": axis '" + axes[i] + "' must be positive, got " +
                                  std::to_string(extents[i]));
  if (std::find(info().layouts.begin(), info().layouts.end(), layout) == info().layouts.end())
    throw std::invalid_argument("operation " + info().name + " has no " + std::string(to_string(layout)) + " inputs");
  const std::int64_t rows = extents[0], features = extents.size() > 1 ? extents[1] : 1;
  const std::int64_t depth = extents.size() > 2 ? extents[2] : 1;
  // Every pair of extents spans an array of some operation (GEMM: m x k, k x n, m x n), so each product
  // must give a 64-bit byte count.
  const std::int64_t limit = std::numeric_limits<std::int64_t>::max() / 8;
  if (features + row_padding > limit / rows || depth > limit / rows || depth > limit / features)
    throw std::invalid_argument("operation " + info().name + ": the extents overflow a 64-bit byte count");
  table_shape shape = make_shape(rows, features, layout, row_padding);
  shape.depth = depth;
  return shape;
}

std::unique_ptr<one_shot_pipeline> operation::make_pipeline(const registered_variant&, const problem_data&, host_memory,
                                                            const run_options&) const {
  return nullptr;
}

runtime_compile_timing operation::runtime_compile() const {
  throw std::logic_error("operation " + info().name + " has no kernel source compiled at run time in this build");
}

bool operation::reference_outputs(const problem_data&, const reference_data&, const std::vector<host_span>&) const {
  throw std::logic_error("operation " + info().name +
                         " implements no reference_outputs(): the gate's conformance suite cannot build correct "
                         "outputs for it (see kstudy/operation.hpp)");
}

void operation::drop_work(const problem_data&, const reference_data&, const std::vector<host_span>&, double) const {
  throw std::logic_error("operation " + info().name +
                         " implements no drop_work(): the gate's conformance suite cannot show that its gate "
                         "rejects less work (see kstudy/operation.hpp)");
}

std::int64_t dtype_bytes(const std::string& dtype) {
  if (dtype == "float64" || dtype == "int64" || dtype == "uint64") return 8;
  if (dtype == "float32" || dtype == "int32" || dtype == "uint32") return 4;
  // bfloat16: NumPy has no such type; a worker holds it as its 16-bit patterns (uint16) and a framework with the
  // type (PyTorch) views them as bfloat16.
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16" || dtype == "uint16") return 2;
  if (dtype == "uint8" || dtype == "int8" || dtype == "bool") return 1;
  throw std::invalid_argument("dtype '" + dtype + "': expected a NumPy name such as float32, uint8 or int64");
}

std::int64_t array_bytes(const array_description& array) {
  std::int64_t elements = 1;
  for (const auto extent : array.extents) elements *= extent;
  return elements * dtype_bytes(array.dtype);
}

external_problem operation::external_inputs(const problem_data&) const {
  throw std::logic_error("operation " + info().name +
                         " does not describe its arrays (external_inputs): it has no Python rungs (see "
                         "kstudy/operation.hpp)");
}

std::vector<array_description> operation::external_outputs(const table_shape&) const {
  throw std::logic_error("operation " + info().name +
                         " does not describe its outputs (external_outputs): it has no Python rungs (see "
                         "kstudy/operation.hpp)");
}

namespace {
const std::string& operation_name(const operation& op) { return op.info().name; }
}  // namespace

operation_registry& operation_registry::instance() {
  static operation_registry registry;
  return registry;
}

void operation_registry::add(std::unique_ptr<operation> op) {
  const auto& info = op->info();
  if (info.name.empty() || info.axes.empty() || info.axes.size() > 3 || info.layouts.empty() || info.outputs.empty())
    throw std::logic_error("operation registration " + info.name +
                           " needs a name, one to three axes, at least one layout and one output");
  detail::require_unregistered(m_operations, info.name, operation_name, "operation");
  m_operations.push_back(std::move(op));
}

const operation* operation_registry::find(const std::string& name) const {
  return detail::find_entry(m_operations, name, operation_name);
}

std::vector<const operation*> operation_registry::all() const {
  return detail::sorted_entries(m_operations, operation_name);
}

}  // namespace kstudy
