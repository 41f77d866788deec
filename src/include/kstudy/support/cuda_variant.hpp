#pragma once
// The stream plumbing of handwritten CUDA variants, built-in or a plug-in's: each queues its work on its own
// non-blocking stream, created on the first prepare() and destroyed last (after the derived class has freed
// its buffers), reported by stream() for CUDA event timing and drained by wait(). Also the device attribute
// query and the event pair that the autotuned variants time their candidates with.
// Empty where CUDA is not compiled (a cpu flavour's .cpp), so a plug-in header may include it unguarded.
#if defined(__CUDACC__) || defined(KSTUDY_HAVE_CUDA_VARIANTS)
#include <cuda_runtime.h>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant.hpp"

namespace kstudy {

// An attribute of the current device.
inline int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  KSTUDY_CUDA_CHECK(cudaGetDevice(&device));
  KSTUDY_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

// CUDA events, destroyed on every path out of the tuning.
class event_pair {
 public:
  event_pair() {
    KSTUDY_CUDA_CHECK(cudaEventCreate(&m_start));
    try {
      KSTUDY_CUDA_CHECK(cudaEventCreate(&m_stop));
    } catch (...) {
      cudaEventDestroy(m_start);
      throw;
    }
  }
  event_pair(const event_pair&) = delete;
  event_pair& operator=(const event_pair&) = delete;
  ~event_pair() {
    cudaEventDestroy(m_start);
    cudaEventDestroy(m_stop);
  }
  cudaEvent_t start() const { return m_start; }
  cudaEvent_t stop() const { return m_stop; }

 private:
  cudaEvent_t m_start = nullptr, m_stop = nullptr;
};

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

}  // namespace kstudy

#endif  // __CUDACC__ || KSTUDY_HAVE_CUDA_VARIANTS
