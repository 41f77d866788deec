#pragma once
// GPU health guard: the GPU's clocks, temperature, power and clocks-event (throttle) reasons before and
// after every experiment point, from NVML loaded at run time, so a sample taken while the GPU slowed
// itself down is flagged in the archive instead of silently skewing a median. During the point a sampler
// thread reads power, SM clock and reasons every few milliseconds, and the runner reads the GPU and its
// total-energy counter around each timed region, so a slowdown inside a point is seen too and every timed
// region gets its energy. Nothing here changes a clock or a power limit.
//
// NVML is dlopen()ed (no link-time dependency): a machine without the NVIDIA driver records
// "unavailable: <why>" and the study runs as before. The readings are taken outside every timed region.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <limits>

#include "kstudy/experiment.hpp"
#include "kstudy/records.hpp"
#include "kstudy/sink.hpp"
#include "kstudy/timers.hpp"

namespace kstudy {

// One reading; -1 where NVML could not report the value.
struct gpu_reading {
  bool available = false;
  std::int64_t sm_clock_mhz = -1;
  std::int64_t memory_clock_mhz = -1;
  std::int64_t temperature_c = -1;
  std::int64_t power_mw = -1;
  std::int64_t throttle_reasons = -1;  // nvmlClocksThrottleReason* / nvmlClocksEventReason* bitmask
};

// NVML's clocks-event reason bits (nvml.h). GPU idle and application-clock settings are not slowdowns;
// the others mean the GPU ran below the clocks it would otherwise have used.
namespace throttle_reason {
inline constexpr std::uint64_t gpu_idle = 0x1;
inline constexpr std::uint64_t applications_clocks = 0x2;
inline constexpr std::uint64_t sw_power_cap = 0x4;
inline constexpr std::uint64_t hw_slowdown = 0x8;
inline constexpr std::uint64_t sync_boost = 0x10;
inline constexpr std::uint64_t sw_thermal = 0x20;
inline constexpr std::uint64_t hw_thermal = 0x40;
inline constexpr std::uint64_t hw_power_brake = 0x80;
inline constexpr std::uint64_t display_clocks = 0x100;
// What flags a sample as throttled.
inline constexpr std::uint64_t slowdown_mask = sw_power_cap | hw_slowdown | sw_thermal | hw_thermal | hw_power_brake;
}  // namespace throttle_reason

// True when the reading reports one of the slowdown reasons.
bool shows_slowdown(const gpu_reading& reading);
// "gpu_idle,sw_power_cap"; unknown bits as hex ("0x10000000000"); "" for no bit or an unreported mask.
std::string throttle_reason_names(std::int64_t mask);

// Where readings come from: NVML on a real machine, scripted readings in tests.
class gpu_health_source {
 public:
  virtual ~gpu_health_source() = default;
  // The monitored GPU ("NVIDIA H200 (00000000:65:00.0)") or "unavailable: <why>".
  virtual std::string device() const = 0;
  // Never throws; an unavailable source returns a reading with available = false.
  virtual gpu_reading read() = 0;
  // The device's total-energy counter in mJ (nvmlDeviceGetTotalEnergyConsumption: since the driver was
  // loaded; Volta and later), or -1 where it cannot be read. Never throws.
  virtual std::int64_t energy_mj() { return -1; }
  // "nvmlDeviceGetTotalEnergyConsumption (mJ)" or "unavailable: <why>": said once per run (environment).
  virtual std::string energy_status() const { return "unavailable: this source has no energy counter"; }
};

// What the GPU did over one timed region: the readings at its start and end and the sampler's between
// them. NaN / -1 where nothing was read.
struct gpu_window {
  std::int64_t readings = 0;
  double energy_joules = std::numeric_limits<double>::quiet_NaN();  // counter after - before
  double power_watts = std::numeric_limits<double>::quiet_NaN();    // mean of the readings' power
  std::int64_t min_sm_clock_mhz = -1;
  std::int64_t throttle_reasons = -1;  // every reason bit of every reading
};
// Copies a window's values into the sample timed in it, flagging it as throttled when a reading shows a
// slowdown.
void record_window(sample_record& sample, const gpu_window& window);

// The in-point sampling period: KSTUDY_GPU_SAMPLING_MS (0 turns the sampler off), 15 ms by default. NVML
// updates power and clocks no faster than that, and a reading costs the host tens of microseconds.
std::chrono::milliseconds gpu_sampling_period();
// "every 15 ms: power, SM clock, clocks-event reasons", "off (KSTUDY_GPU_SAMPLING_MS=0)" or "unavailable: <why>".
std::string gpu_sampling_status(const gpu_health_source& source);

// NVML through dlopen(library). pci_bus_id selects the device (nvmlDeviceGetHandleByPciBusId_v2, the
// form cudaDeviceGetPCIBusId gives); empty selects NVML index 0. Never throws: when the library, a
// symbol, nvmlInit or the device lookup fails, device() says so and every read() is unavailable.
std::unique_ptr<gpu_health_source> make_nvml_health_source(const std::string& pci_bus_id,
                                                           const std::string& library = "libnvidia-ml.so.1");

// The runner's source: NVML (KSTUDY_NVML_LIBRARY overrides the library path) on the device Kokkos uses,
// mapped by PCI bus id in the cuda flavour, NVML index 0 in a build without CUDA. Call after
// Kokkos::initialize. Never throws.
std::unique_ptr<gpu_health_source> make_gpu_health_source();

// Fills a health record from the readings around one point: values, throttled (either reading shows a
// slowdown) and the names of every reason bit seen.
void fill_health(health_record& record, const std::string& device, const gpu_reading& before, const gpu_reading& after,
                 double seconds);

// The per-point writer of a replication. It wraps the archive's sink: begin_point() reads the GPU and its
// energy counter, starts the in-point sampler and opens a point; the point's samples, gates, attribution and
// variants rows are held back until flush(), which stops the sampler, reads the GPU again, flags every sample
// of the point as throttled when a reading before, after or during the point showed a slowdown, and writes
// the records and the point's health row before flushing the archive. Outside a point every call is passed
// straight through.
class health_guarded_sink : public result_sink {
 public:
  // sampling_period: how often the sampler thread reads the GPU during a point; 0 runs no thread (the
  // readings around timed regions are still taken).
  health_guarded_sink(result_sink& inner, gpu_health_source& source,
                      std::chrono::milliseconds sampling_period = std::chrono::milliseconds(0));
  ~health_guarded_sink() override;
  health_guarded_sink(const health_guarded_sink&) = delete;
  health_guarded_sink& operator=(const health_guarded_sink&) = delete;

  // keys: the point's identity (experiment, point, replication and its axes); the readings are filled in.
  void begin_point(const health_record& keys);
  // Drops the open point's held records (the point is then closed by the next flush(), with only what
  // was written after the discard); for a point that must not count as finished.
  void discard_point_records();
  bool in_point() const { return m_open; }
  // What flush() does with the open point when it finds it throttled (kstudy::throttle_policy): accept leaves its
  // samples ok (flagged either way); exclude gives its ok samples the status "excluded: throttled (<reasons>)",
  // which no summary takes; remeasure gives them "remeasured: throttled (<reasons>)" and drops the attempt's gate,
  // attribution and variants rows, which the next attempt writes. For the open point only: begin_point() resets it
  // to accept.
  void set_throttle_policy(throttle_policy policy) { m_throttle_policy = policy; }
  // Whether the point the last flush() closed was throttled.
  bool last_point_throttled() const { return m_last_point_throttled; }
  // Adds wall seconds to one phase of the open point (its health row's <phase>_seconds, NaN until a kind
  // adds to it); ignored outside a point.
  void add_phase_seconds(point_phase phase, double seconds);
  const health_record& current_point() const { return m_point; }

  // Around one timed region of the open point, outside it: open_window() reads the GPU and the energy
  // counter, close_window() reads both again and sums up every reading from one to the other.
  void open_window();
  gpu_window close_window();

  void begin(const run_metadata& metadata) override { m_inner.begin(metadata); }
  void begin_experiment(const experiment_record& experiment) override { m_inner.begin_experiment(experiment); }
  void flush() override;  // ends the open point, if any
  void end_experiment(const std::string& name) override { m_inner.end_experiment(name); }
  void finish() override { m_inner.finish(); }

 protected:
  // Inside a point, its samples, gates, attribution and variants rows are held for flush(); every other
  // write, and every write outside a point, passes straight through.
  void do_write(const record_batch& batch) override;

 private:
  // Reads the GPU (serialised with the sampler thread: a source need not be thread-safe) and keeps the
  // reading among the point's.
  gpu_reading take_reading();
  void start_sampler();
  void stop_sampler();

  result_sink& m_inner;
  gpu_health_source& m_source;
  std::chrono::milliseconds m_sampling_period;
  bool m_open = false;
  health_record m_point;
  throttle_policy m_throttle_policy = throttle_policy::accept;
  bool m_last_point_throttled = false;
  gpu_reading m_before;
  std::int64_t m_energy_before_mj = -1;
  wall_timer m_timer;
  std::mutex m_source_mutex;            // one read of m_source at a time; guards m_readings too
  std::vector<gpu_reading> m_readings;  // the point's, in order: sampler and window readings
  std::size_t m_window_first = 0;       // index in m_readings of the open window's first reading
  std::int64_t m_window_energy_mj = -1;
  std::thread m_sampler;
  std::mutex m_sampler_mutex;
  std::condition_variable m_sampler_wake;
  bool m_sampler_stop = false;
  std::vector<sample_record> m_samples;
  std::vector<gate_record> m_gates;
  std::vector<attribution_record> m_attribution;
  std::vector<variant_record> m_variants;
};

}  // namespace kstudy
