#pragma once
// The buffers of a handwritten CUDA variant whose inputs and outputs are flat arrays of one element type, the
// CUDA twin of kokkos_arrays.hpp: one device array per streamed input (problem_data::streamed_inputs) and one
// per output (the operation's output_bytes), every copy queued on the variant's own non-blocking stream, poison
// (all-ones bytes: NaN for floats) and the block size of block_size experiments checked once here. A variant
// writes its enqueue_run() and nothing else: launch on cuda_stream() over input(i) and output(o);
// register_cuda_array_variant registers it on the cuda backend and tells it the operation it computes.
// Compiled only by nvcc (a .cu file): kstudy_add_study leaves .cu sources out of a cpu flavour.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/support/cuda_buffers.hpp"
#include "kstudy/support/cuda_variant.hpp"
#include "kstudy/variant.hpp"

namespace kstudy {

template <class T = float>
class cuda_array_variant : public cuda_stream_variant<> {
 public:
  cuda_array_variant() = default;
  ~cuda_array_variant() override {
    // Destructors must not throw: the stream's work ends before its buffers go, errors are dropped.
    if (m_stream != nullptr) cudaStreamSynchronize(m_stream);
    release();
  }

  // The operation whose output_bytes size the outputs: set by register_cuda_array_variant.
  void bind_operation(std::string operation) { m_operation = std::move(operation); }

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto* op = operation_registry::instance().find(m_operation);
    if (op == nullptr) throw std::logic_error("cuda_array_variant: register with register_cuda_array_variant");
    if (options.block_size != 0 && (options.block_size < 32 || options.block_size > 1024 || options.block_size % 32))
      throw std::invalid_argument("block_size must be a multiple of 32 in [32, 1024], got " +
                                  std::to_string(options.block_size));
    m_block_size = options.block_size;
    release();
    create_stream();
    const auto inputs = problem.streamed_inputs();
    for (std::size_t i = 0; i < inputs.size(); ++i) m_inputs.push_back(allocate("input", i, inputs[i].bytes));
    const auto output_bytes = op->output_bytes(problem.shape());
    for (std::size_t o = 0; o < output_bytes.size(); ++o) m_outputs.push_back(allocate("output", o, output_bytes[o]));
    upload(inputs);
  }
  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != m_inputs.size()) throw std::invalid_argument(m_operation + ": wrong number of input arrays");
    for (std::size_t i = 0; i < inputs.size(); ++i)
      KSTUDY_CUDA_CHECK(
          cudaMemcpyAsync(m_inputs[i].data, inputs[i].data, m_inputs[i].bytes(), cudaMemcpyHostToDevice, m_stream));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    if (outputs.size() != m_outputs.size())
      throw std::invalid_argument(m_operation + ": wrong number of output arrays");
    for (std::size_t o = 0; o < outputs.size(); ++o)
      KSTUDY_CUDA_CHECK(
          cudaMemcpyAsync(outputs[o].data, m_outputs[o].data, m_outputs[o].bytes(), cudaMemcpyDeviceToHost, m_stream));
  }
  void poison() override {
    for (auto& o : m_outputs) KSTUDY_CUDA_CHECK(cudaMemsetAsync(o.data, 0xFF, o.bytes(), m_stream));
    wait();
  }

 protected:
  const T* input(std::size_t i) const { return m_inputs.at(i).data; }
  T* output(std::size_t o) const { return m_outputs.at(o).data; }
  std::int64_t input_elements(std::size_t i) const { return m_inputs.at(i).elements; }
  std::int64_t output_elements(std::size_t o) const { return m_outputs.at(o).elements; }
  cudaStream_t cuda_stream() const { return m_stream; }
  // The block size the experiment asked for, or `fallback` where it asked for none (0).
  int block_size(int fallback) const { return m_block_size == 0 ? fallback : m_block_size; }

 private:
  struct device_array {
    T* data = nullptr;
    std::int64_t elements = 0;
    std::size_t bytes() const { return std::size_t(elements) * sizeof(T); }
  };
  device_array allocate(const char* what, std::size_t index, std::int64_t bytes) const {
    if (bytes < 0 || bytes % std::int64_t(sizeof(T)) != 0)
      throw std::invalid_argument(m_operation + ": " + what + " " + std::to_string(index) + " is not whole elements");
    device_array a;
    a.elements = bytes / std::int64_t(sizeof(T));
    device_alloc(a.data, a.elements);
    return a;
  }
  void release() noexcept {
    for (auto* arrays : {&m_inputs, &m_outputs}) {
      for (auto& a : *arrays) device_free(a.data);
      arrays->clear();
    }
  }

  std::string m_operation;
  int m_block_size = 0;
  std::vector<device_array> m_inputs, m_outputs;
};

// Registers Variant on the cuda backend (on the device, block size tunable; handwritten CUDA unless the info names
// another implementation than Kokkos, e.g. a vendor library's), bound to info.operation.
template <class Variant>
int register_cuda_array_variant(variant_info info) {
  info.backend = "cuda";
  info.on_device = true;
  info.tunable_block_size = true;
  if (info.implementation == implementation::kokkos) info.implementation = implementation::handwritten_cuda;
  const std::string operation = info.operation;
  variant_registry::instance().add(std::move(info), [operation] {
    auto v = std::make_unique<Variant>();
    v->bind_operation(operation);
    return std::unique_ptr<variant>(std::move(v));
  });
  return 0;
}

}  // namespace kstudy
