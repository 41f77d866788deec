#include "kstudy/point_inputs.hpp"

#include <chrono>
#include <utility>

#include "kstudy/host_io.hpp"

namespace kstudy {
namespace {
// Runs make() and adds its wall seconds to `total`.
template <class Make>
auto timed(double& total, Make&& make) {
  const auto start = std::chrono::steady_clock::now();
  auto made = make();
  total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return made;
}
}  // namespace

point_inputs::point_inputs(const operation& op, std::vector<std::int64_t> extents, std::int64_t row_padding,
                           std::uint64_t seed)
    : m_operation(&op), m_extents(std::move(extents)), m_row_padding(row_padding), m_seed(seed) {}

table_shape point_inputs::shape(table_layout layout) const {
  return m_operation->shape(m_extents, layout, m_row_padding);
}

const problem_data& point_inputs::data(table_layout layout) {
  auto& slot = m_data[layout];
  if (!slot) {
    const auto target = shape(layout);
    const problem_data* other = nullptr;
    for (const auto& [l, d] : m_data)
      if (d) other = d.get();
    slot = timed(m_spent.inputs,
                 [&] { return other ? m_operation->relayout(*other, target) : m_operation->generate(target, m_seed); });
  }
  return *slot;
}

const reference_data& point_inputs::reference() {
  if (!m_reference) {
    const problem_data* any = nullptr;
    for (const auto& [l, d] : m_data)
      if (d) any = d.get();
    const auto& from = any ? *any : data(m_operation->info().layouts.front());  // inputs first: their own phase
    m_reference = timed(m_spent.reference, [&] { return m_operation->reference(from); });
  }
  return *m_reference;
}

gate_result prepare_and_gate(variant& impl, const registered_variant& entry, point_inputs& inputs,
                             const run_options& options) {
  const auto& data = inputs.data(entry.info.layout);
  const auto& reference = inputs.reference();
  impl.prepare(data, options);
  impl.poison();
  impl.run();
  host_outputs outputs(inputs.op(), data.shape());
  const auto spans = outputs.spans();
  inputs.op().poison(spans);
  impl.download(spans);
  return inputs.op().check(data, reference, spans);
}

}  // namespace kstudy
