#pragma once
// The device arrays of a handwritten CUDA variant and their transfers, written once for every operation: the
// variant allocates its arrays here in prepare(), an input for each of the problem's streamed inputs (in
// their order) and an output for each of the operation's outputs, plus any array of its own; upload copies
// the host inputs in, download copies the outputs back, poison() fills the outputs with all-ones bytes (a NaN
// in float, double and bfloat16), and the arrays are freed together on a re-prepare or the variant's end.
// Also the calculated occupancy of a kernel, as the variants report it.
// cuda_buffers_variant is the built-in variants' base, for kernels that allocate arrays of their own beside the
// streamed ones; a plug-in over flat arrays alone uses kstudy::cuda_array_variant (kstudy/support/cuda_arrays.hpp).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/support/cuda_buffers.hpp"
#include "kstudy/support/cuda_variant.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::detail {

// Active warps / the SM's maximum for `kernel` launched with blocks of `threads`.
template <class Kernel>
double occupancy_of(Kernel kernel, int threads, std::size_t dynamic_shared_bytes = 0) {
  int blocks = 0;
  KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic_shared_bytes));
  return double(blocks * (threads / 32)) / double(device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor) / 32);
}

// A handwritten kernel's block size: options.block_size, or `default_block` for 0; a multiple of 32 in
// [32, 1024] or std::invalid_argument.
inline int warp_multiple_block(const run_options& options, int default_block) {
  const int block = options.block_size == 0 ? default_block : options.block_size;
  if (block < 32 || block > 1024 || block % 32 != 0)
    throw std::invalid_argument("block_size must be a multiple of 32 in [32, 1024], got " +
                                std::to_string(options.block_size));
  return block;
}

// Base is queued_variant where run, upload and download are their enqueue_* forms followed by wait() (see
// cuda_stream_variant); cuda_converting_variant below for a variant whose download is its own.
template <class Base = queued_variant>
class cuda_buffers_variant : public cuda_stream_variant<Base> {
 public:
  ~cuda_buffers_variant() override {
    if (this->m_stream != nullptr) cudaStreamSynchronize(this->m_stream);  // queued work ends before the arrays go
    release_arrays();
  }

  void poison() override {
    for (const auto& output : m_outputs)
      KSTUDY_CUDA_CHECK(cudaMemsetAsync(output.data, 0xFF, output.bytes, this->m_stream));
    this->wait();
  }
  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != m_inputs.size())
      throw std::invalid_argument(m_operation + ": expected " + std::to_string(m_inputs.size()) + " input arrays");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].bytes < std::int64_t(m_inputs[i].bytes))
        throw std::invalid_argument(m_operation + ": input array " + std::to_string(i) + " holds " +
                                    std::to_string(inputs[i].bytes) + " bytes, fewer than the problem's " +
                                    std::to_string(m_inputs[i].bytes));
      KSTUDY_CUDA_CHECK(
          cudaMemcpyAsync(m_inputs[i].data, inputs[i].data, m_inputs[i].bytes, cudaMemcpyHostToDevice, this->m_stream));
    }
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    for (std::size_t i = 0; i < m_outputs.size(); ++i)
      KSTUDY_CUDA_CHECK(cudaMemcpyAsync(outputs.at(i).data, m_outputs[i].data, m_outputs[i].bytes,
                                        cudaMemcpyDeviceToHost, this->m_stream));
  }

 protected:
  // From prepare(), before the new arrays: rejects a negative block size, waits for queued work, frees the
  // arrays, creates the stream on the first call; `operation` names the operation in upload's errors.
  void reset_arrays(std::string operation, const run_options& options) {
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    if (this->m_stream != nullptr) this->wait();  // queued work may still use the arrays freed here
    release_arrays();
    this->create_stream();
    m_operation = std::move(operation);
  }
  // The next streamed input, the next output, or an array of the variant's own: `count` elements of T (at
  // least one), freed by the next reset_arrays() or the destructor.
  template <class T>
  T* input_array(std::int64_t count) {
    return add_array<T>(count, &m_inputs);
  }
  template <class T>
  T* output_array(std::int64_t count) {
    return add_array<T>(count, &m_outputs);
  }
  template <class T>
  T* device_array(std::int64_t count) {
    return add_array<T>(count, nullptr);
  }

 private:
  struct device_span {
    void* data;
    std::size_t bytes;
  };

  template <class T>
  T* add_array(std::int64_t count, std::vector<device_span>* streamed) {
    T* pointer = nullptr;
    device_alloc(pointer, count);
    m_arrays.push_back(pointer);
    if (streamed != nullptr) streamed->push_back({pointer, static_cast<std::size_t>(count) * sizeof(T)});
    return pointer;
  }
  void release_arrays() noexcept {
    for (void*& pointer : m_arrays) device_free(pointer);
    m_arrays.clear();
    m_inputs.clear();
    m_outputs.clear();
  }

  std::string m_operation;
  std::vector<void*> m_arrays;
  std::vector<device_span> m_inputs, m_outputs;
};

// A variant whose download converts a device result on the host after a wait, so it derives from variant
// rather than queued_variant and writes download() itself; run() and upload() are still queued and waited for.
class cuda_converting_variant : public cuda_buffers_variant<variant> {
 public:
  void run() override {
    enqueue_run();
    wait();
  }
  void upload(const std::vector<host_span>& inputs) override {
    enqueue_upload(inputs);
    wait();
  }
  // A download that converts on the host cannot queue: its enqueue form is the download itself.
  void enqueue_download(const std::vector<host_span>& outputs) override { download(outputs); }
};

}  // namespace kstudy::detail
