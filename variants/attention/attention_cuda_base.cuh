#pragma once
// What every handwritten CUDA attention variant shares: Q, K, V and O in device memory, uploaded and
// downloaded on the variant's own stream, O poisoned before a run. A variant implements enqueue_run(), and
// where it needs them check_shape() (before any allocation), plan() (after it) and release() (its own buffers).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "attention/attention.hpp"
#include "kstudy/cuda_escape.hpp"
#include "kstudy/support/cuda_buffers.hpp"
#include "kstudy/support/cuda_variant.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::attention {

template <attention_precision P>
using element_t = std::conditional_t<P == attention_precision::fp32, float, std::uint16_t>;

template <attention_precision P, attention_mask M = attention_mask::none>
class attention_cuda_base : public kstudy::cuda_stream_variant<> {
 public:
  using element = element_t<P>;

  ~attention_cuda_base() override { release_all(); }

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = attention_problem(problem, P, M);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    check_shape(data.heads(), data.tokens(), data.head_dim());
    release_all();
    create_stream();
    m_heads = data.heads();
    m_tokens = data.tokens();
    m_head_dim = data.head_dim();
    m_scale = data.scale();
    kstudy::device_alloc(m_q, data.elements());
    kstudy::device_alloc(m_k, data.elements());
    kstudy::device_alloc(m_v, data.elements());
    kstudy::device_alloc(m_o, data.elements());
    plan();
    upload(data.streamed_inputs());
  }

  void poison() override {
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_o, 0xFF, bytes(), m_stream));  // all-ones: NaN in float32, bf16 and fp16
    wait();
  }
  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != 3) throw std::invalid_argument("attention: expected the three inputs Q, K, V");
    element* targets[3] = {m_q, m_k, m_v};
    for (int i = 0; i < 3; ++i)
      KSTUDY_CUDA_CHECK(cudaMemcpyAsync(targets[i], inputs[i].data, bytes(), cudaMemcpyHostToDevice, m_stream));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(o_output(outputs), m_o, bytes(), cudaMemcpyDeviceToHost, m_stream));
  }

 protected:
  // Throws std::invalid_argument for a shape the variant cannot take, before any allocation.
  virtual void check_shape(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim) const {
    if (heads < 1 || tokens < 1 || head_dim < 1)
      throw std::invalid_argument("attention: heads, tokens and head_dim must be positive");
  }
  virtual void plan() {}
  virtual void release() {}  // the variant's own buffers

  std::size_t bytes() const { return static_cast<std::size_t>(m_heads * m_tokens * m_head_dim) * sizeof(element); }

  std::int64_t m_heads = 0, m_tokens = 0, m_head_dim = 0;
  float m_scale = 1.0f;
  element *m_q = nullptr, *m_k = nullptr, *m_v = nullptr, *m_o = nullptr;

 private:
  void release_all() {
    release();
    kstudy::device_free(m_q);
    kstudy::device_free(m_k);
    kstudy::device_free(m_v);
    kstudy::device_free(m_o);
  }
};

}  // namespace kstudy::attention
