#pragma once
// The stream plumbing of the handwritten CUDA variants (.cu files only): each queues its work on its own
// non-blocking stream, created on the first prepare() and destroyed last (after the derived class has freed
// its buffers), reported by stream() for CUDA event timing and drained by wait().
#include <cuda_runtime.h>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::detail {

// Base is queued_variant for a variant whose run/upload/download are its enqueue_* forms followed by wait();
// a variant with a synchronous piece of its own (a result converted on the host after a wait) derives from
// cuda_stream_variant<variant> and writes run/upload/download itself.
template <class Base = queued_variant>
class cuda_stream_variant : public Base {
 public:
  cuda_stream_variant() = default;
  cuda_stream_variant(const cuda_stream_variant&) = delete;
  cuda_stream_variant& operator=(const cuda_stream_variant&) = delete;
  ~cuda_stream_variant() override {
    if (m_stream != nullptr) cudaStreamDestroy(m_stream);
  }

  void* stream() const override { return static_cast<void*>(m_stream); }
  void wait() override { KSTUDY_CUDA_CHECK(cudaStreamSynchronize(m_stream)); }

 protected:
  // From prepare(): the stream, on the first call only.
  void create_stream() {
    if (m_stream == nullptr) KSTUDY_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
  }

  cudaStream_t m_stream = nullptr;
};

}  // namespace kstudy::detail
