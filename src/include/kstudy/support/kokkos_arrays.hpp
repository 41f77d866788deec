#pragma once
// The buffers of a Kokkos variant whose inputs and outputs are flat arrays of one element type: one View per
// streamed input (problem_data::streamed_inputs) and one per output (the operation's output_bytes), on the
// variant's own execution-space instance. prepare, the one-shot copies and poison (NaN) are written here once,
// so a variant writes its launch() and nothing else; register_kokkos_array_variant registers it on every
// enabled backend and tells it the operation it computes (where its output sizes come from).
#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/support/kokkos_support.hpp"
#include "kstudy/variant.hpp"

namespace kstudy {

template <class ExecutionSpace, class T = float>
class kokkos_array_variant : public kokkos_queued_variant<ExecutionSpace> {
  using base = kokkos_queued_variant<ExecutionSpace>;
  using host_view = Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

 public:
  // Device<space, memory>: a library call on a host view would otherwise run on the default host space
  // (OpenMP) whatever the variant's space.
  using view = Kokkos::View<T*, Kokkos::Device<ExecutionSpace, typename ExecutionSpace::memory_space>>;

  // own_stream: see space_instance (a variant calling a library on the default stream passes false).
  explicit kokkos_array_variant(bool own_stream = true) : base(own_stream) {}
  ~kokkos_array_variant() override { this->m_instance.drain(); }  // queued work ends before the buffers go

  // The operation whose output_bytes size the outputs: set by register_kokkos_array_variant, or by a variant
  // registered otherwise in its constructor.
  void bind_operation(std::string operation) { m_operation = std::move(operation); }

  void prepare(const problem_data& problem, const run_options&) override {
    const auto* op = operation_registry::instance().find(m_operation);
    if (op == nullptr) throw std::logic_error("kokkos_array_variant: register with register_kokkos_array_variant");
    const auto inputs = problem.streamed_inputs();
    m_inputs.clear();
    m_outputs.clear();
    for (std::size_t i = 0; i < inputs.size(); ++i) m_inputs.push_back(allocate("input", i, inputs[i].bytes));
    const auto output_bytes = op->output_bytes(problem.shape());
    for (std::size_t o = 0; o < output_bytes.size(); ++o) m_outputs.push_back(allocate("output", o, output_bytes[o]));
    this->upload(inputs);
  }
  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != m_inputs.size()) throw std::invalid_argument(m_operation + ": wrong number of input arrays");
    for (std::size_t i = 0; i < inputs.size(); ++i)
      Kokkos::deep_copy(this->m_space, m_inputs[i], host_view(inputs[i].as<T>(), m_inputs[i].extent(0)));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    if (outputs.size() != m_outputs.size())
      throw std::invalid_argument(m_operation + ": wrong number of output arrays");
    for (std::size_t o = 0; o < outputs.size(); ++o)
      Kokkos::deep_copy(this->m_space, host_view(outputs[o].as<T>(), m_outputs[o].extent(0)), m_outputs[o]);
  }
  void poison() override {
    for (auto& o : m_outputs) Kokkos::deep_copy(this->m_space, o, std::numeric_limits<T>::quiet_NaN());
    this->m_space.fence();
  }

 protected:
  const view& input(std::size_t i) const { return m_inputs.at(i); }
  const view& output(std::size_t o) const { return m_outputs.at(o); }

 private:
  view allocate(const char* what, std::size_t index, std::int64_t bytes) const {
    if (bytes < 0 || bytes % std::int64_t(sizeof(T)) != 0)
      throw std::invalid_argument(m_operation + ": " + what + " " + std::to_string(index) + " is not whole elements");
    const std::string label = "kstudy::" + m_operation + "::" + what + std::to_string(index);
    return view(Kokkos::view_alloc(label, Kokkos::WithoutInitializing), std::size_t(bytes) / sizeof(T));
  }

  std::string m_operation;
  std::vector<view> m_inputs, m_outputs;
};

// Registers Variant<Space> for every enabled execution space, backend and device flag filled in.
template <template <class> class Variant>
int register_kokkos_array_variant(const variant_info& info) {
  return for_each_enabled_space([&](auto tag) {
    using space = typename decltype(tag)::type;
    auto registered = info;
    registered.backend = backend_name<space>();
    registered.on_device = !is_host_space_v<space>;
    variant_registry::instance().add(std::move(registered), [operation = info.operation] {
      auto v = std::make_unique<Variant<space>>();
      v->bind_operation(operation);
      return std::unique_ptr<variant>(std::move(v));
    });
  });
}

}  // namespace kstudy
