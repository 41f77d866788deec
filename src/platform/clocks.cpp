#include "kstudy/timers.hpp"

#include <Kokkos_Core.hpp>

#include <stdexcept>
#include <string>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy {

#ifdef KOKKOS_ENABLE_CUDA
namespace {
void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(rc));
}
}  // namespace

device_event_timer::device_event_timer(bool on_device, void* stream) : m_stream(stream) {
  if (!on_device) return;
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  m_start = a;
  m_stop = b;
}

device_event_timer::~device_event_timer() {
  if (m_start) cudaEventDestroy(static_cast<cudaEvent_t>(m_start));
  if (m_stop) cudaEventDestroy(static_cast<cudaEvent_t>(m_stop));
}

void device_event_timer::start() {
  if (m_start)
    check(cudaEventRecord(static_cast<cudaEvent_t>(m_start), static_cast<cudaStream_t>(m_stream)), "cudaEventRecord");
}

void device_event_timer::stop() {
  if (m_stop)
    check(cudaEventRecord(static_cast<cudaEvent_t>(m_stop), static_cast<cudaStream_t>(m_stream)), "cudaEventRecord");
}

double device_event_timer::seconds() {
  if (!m_stop) return -1.0;
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(m_stop)), "cudaEventSynchronize");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(m_start), static_cast<cudaEvent_t>(m_stop)),
        "cudaEventElapsedTime");
  return ms * 1e-3;
}
#else
device_event_timer::device_event_timer(bool, void* stream) : m_stream(stream) {}
device_event_timer::~device_event_timer() = default;
void device_event_timer::start() {}
void device_event_timer::stop() {}
double device_event_timer::seconds() { return -1.0; }
#endif

}  // namespace kstudy
