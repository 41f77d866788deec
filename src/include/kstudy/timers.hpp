#pragma once
// Timers for the study's boundaries. A wall timer brackets fenced work on the host clock; a device
// event timer records CUDA events on the variant's own stream (the Kokkos instance's stream, or the
// escape path's), so nothing else on the device is waited for.
#include <chrono>

namespace kstudy {

class wall_timer {
 public:
  void start() { m_start = std::chrono::steady_clock::now(); }
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count(); }

 private:
  std::chrono::steady_clock::time_point m_start{};
};

// CUDA events on a stream (cudaStream_t passed as void*; null is the legacy default stream, which is
// what Kokkos' default Cuda instance uses). Without CUDA, or for host work, available() is false and
// seconds() returns a negative value.
class device_event_timer {
 public:
  device_event_timer(bool on_device, void* stream);
  ~device_event_timer();
  device_event_timer(const device_event_timer&) = delete;
  device_event_timer& operator=(const device_event_timer&) = delete;
  bool available() const { return m_start != nullptr; }
  void start();
  void stop();
  // Waits for the stop event; seconds between the two events.
  double seconds();

 private:
  // Read only by the CUDA implementation (src/platform/clocks.cpp); a build without CUDA keeps them unread.
  [[maybe_unused]] void* m_stream = nullptr;
  void* m_start = nullptr;
  [[maybe_unused]] void* m_stop = nullptr;
};

// Runs a variant once between the two events (the caller's wall clock spans the whole call). A variant
// that can queue its run (enqueues_run) gets its stop event right behind its queued work and is waited
// for after it, so the events time that work alone, not the host fence and return trip; one that
// cannot stops after run().
template <class Variant>
void run_between_events(Variant& variant, device_event_timer& events) {
  events.start();
  if (variant.enqueues_run()) {
    variant.enqueue_run();
    events.stop();
    variant.wait();
  } else {
    variant.run();
    events.stop();
  }
}

}  // namespace kstudy
