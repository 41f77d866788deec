#pragma once
// GPU health guard: the GPU's clocks, temperature, power and clocks-event (throttle) reasons before and
// after every experiment point, from NVML loaded at run time, so a sample taken while the GPU slowed
// itself down is flagged in the archive instead of silently skewing a median.
//
// NVML is dlopen()ed (no link-time dependency): a machine without the NVIDIA driver records
// "unavailable: <why>" and the study runs as before. The readings are taken outside every timed region.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
};

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

// The per-point writer of a replication. It wraps the archive's sink: begin_point() reads the GPU and
// opens a point; the point's samples, gates, attribution and variants rows are held back until flush(), which
// reads the GPU again, flags every sample of the point as throttled when either reading showed a
// slowdown, and writes the records and the point's health row before flushing the archive. Outside a
// point every call is passed straight through.
class health_guarded_sink : public result_sink {
 public:
  health_guarded_sink(result_sink& inner, gpu_health_source& source);

  // keys: the point's identity (experiment, point, replication and its axes); the readings are filled in.
  void begin_point(const health_record& keys);
  // Drops the open point's held records (the point is then closed by the next flush(), with only what
  // was written after the discard); for a point that must not count as finished.
  void discard_point_records();
  bool in_point() const { return m_open; }
  const health_record& current_point() const { return m_point; }

  void begin(const run_metadata& metadata) override { m_inner.begin(metadata); }
  void begin_experiment(const experiment_record& experiment) override { m_inner.begin_experiment(experiment); }
  void write_samples(const std::vector<sample_record>& samples) override;
  void write_gates(const std::vector<gate_record>& gates) override;
  void write_ceilings(const std::vector<ceiling_record>& ceilings) override { m_inner.write_ceilings(ceilings); }
  void write_summaries(const std::vector<summary_record>& summaries) override { m_inner.write_summaries(summaries); }
  void write_attribution(const std::vector<attribution_record>& attribution) override;
  void write_health(const std::vector<health_record>& health) override { m_inner.write_health(health); }
  void write_variants(const std::vector<variant_record>& variants) override;
  void write_profile(const std::vector<profile_record>& profile,
                     const std::map<std::string, std::string>& attributes) override {
    m_inner.write_profile(profile, attributes);
  }
  void flush() override;  // ends the open point, if any
  void end_experiment(const std::string& name) override { m_inner.end_experiment(name); }
  void finish() override { m_inner.finish(); }

 private:
  result_sink& m_inner;
  gpu_health_source& m_source;
  bool m_open = false;
  health_record m_point;
  gpu_reading m_before;
  wall_timer m_timer;
  std::vector<sample_record> m_samples;
  std::vector<gate_record> m_gates;
  std::vector<attribution_record> m_attribution;
  std::vector<variant_record> m_variants;
};

}  // namespace kstudy
