#include "kstudy/gpu_health.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

// Kokkos first: KOKKOS_ENABLE_CUDA is defined by its configuration header (inside the #ifdef it was
// never defined, and the cuda flavour watched NVML device 0 instead of the device Kokkos runs on).
#include <Kokkos_Core.hpp>
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy {

bool shows_slowdown(const gpu_reading& reading) {
  return reading.available && reading.throttle_reasons >= 0 &&
         (static_cast<std::uint64_t>(reading.throttle_reasons) & throttle_reason::slowdown_mask) != 0;
}

std::string throttle_reason_names(std::int64_t mask) {
  if (mask <= 0) return "";
  static const std::pair<std::uint64_t, const char*> names[] = {
      {throttle_reason::gpu_idle, "gpu_idle"},
      {throttle_reason::applications_clocks, "applications_clocks"},
      {throttle_reason::sw_power_cap, "sw_power_cap"},
      {throttle_reason::hw_slowdown, "hw_slowdown"},
      {throttle_reason::sync_boost, "sync_boost"},
      {throttle_reason::sw_thermal, "sw_thermal"},
      {throttle_reason::hw_thermal, "hw_thermal"},
      {throttle_reason::hw_power_brake, "hw_power_brake"},
      {throttle_reason::display_clocks, "display_clocks"}};
  std::uint64_t rest = static_cast<std::uint64_t>(mask);
  std::string out;
  for (const auto& [bit, name] : names)
    if (rest & bit) {
      out += (out.empty() ? "" : ",") + std::string(name);
      rest &= ~bit;
    }
  if (rest != 0) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(rest));
    out += (out.empty() ? "" : ",") + std::string(hex);
  }
  return out;
}

namespace {

// Each field of a reading beside the health record's columns for it before and after the point: the two
// readings go in by one loop, so a new field cannot be taken before but not after.
// Member pointers through aliases: nvcc's front end re-emits `T C::*name` with parentheses the host compiler
// then warns about (-Wparentheses, an error under -Werror).
using reading_field = std::int64_t gpu_reading::*;
using health_column = std::int64_t health_record::*;
struct reading_columns {
  reading_field field;
  health_column before;
  health_column after;
};
constexpr reading_columns k_reading_columns[] = {
    {&gpu_reading::sm_clock_mhz, &health_record::before_sm_clock_mhz, &health_record::after_sm_clock_mhz},
    {&gpu_reading::memory_clock_mhz, &health_record::before_memory_clock_mhz, &health_record::after_memory_clock_mhz},
    {&gpu_reading::temperature_c, &health_record::before_temperature_c, &health_record::after_temperature_c},
    {&gpu_reading::power_mw, &health_record::before_power_mw, &health_record::after_power_mw},
    {&gpu_reading::throttle_reasons, &health_record::before_throttle_reasons, &health_record::after_throttle_reasons},
};

}  // namespace

void fill_health(health_record& record, const std::string& device, const gpu_reading& before, const gpu_reading& after,
                 double seconds) {
  record.device = device;
  record.available = before.available && after.available;
  for (const auto& column : k_reading_columns) {
    record.*column.before = before.*column.field;
    record.*column.after = after.*column.field;
  }
  record.seconds = seconds;
  record.throttled = shows_slowdown(before) || shows_slowdown(after);
  const std::int64_t seen = (before.throttle_reasons > 0 ? before.throttle_reasons : 0) |
                            (after.throttle_reasons > 0 ? after.throttle_reasons : 0);
  record.reasons = throttle_reason_names(seen);
}

namespace {

// What a set of readings saw: their number, lowest SM clock, mean power and every reason bit.
struct reading_summary {
  std::int64_t readings = 0;
  std::int64_t min_sm_clock_mhz = -1;
  double mean_power_mw = std::numeric_limits<double>::quiet_NaN();
  std::int64_t throttle_reasons = -1;
};

template <class It>
reading_summary summarise_readings(It first, It last) {
  reading_summary out;
  double power_sum = 0.0;
  std::int64_t power_count = 0;
  for (auto it = first; it != last; ++it) {
    const gpu_reading& r = *it;
    if (!r.available) continue;
    ++out.readings;
    if (r.sm_clock_mhz >= 0)
      out.min_sm_clock_mhz = out.min_sm_clock_mhz < 0 ? r.sm_clock_mhz : std::min(out.min_sm_clock_mhz, r.sm_clock_mhz);
    if (r.power_mw >= 0) {
      power_sum += double(r.power_mw);
      ++power_count;
    }
    if (r.throttle_reasons >= 0)
      out.throttle_reasons = std::max<std::int64_t>(out.throttle_reasons, 0) | r.throttle_reasons;
  }
  if (power_count > 0) out.mean_power_mw = power_sum / double(power_count);
  return out;
}

bool mask_shows_slowdown(std::int64_t mask) {
  return mask > 0 && (static_cast<std::uint64_t>(mask) & throttle_reason::slowdown_mask) != 0;
}

double joules_between(std::int64_t before_mj, std::int64_t after_mj) {
  if (before_mj < 0 || after_mj < before_mj) return std::numeric_limits<double>::quiet_NaN();
  return double(after_mj - before_mj) / 1000.0;
}

}  // namespace

void record_window(sample_record& sample, const gpu_window& window) {
  sample.energy_joules = window.energy_joules;
  sample.power_watts = window.power_watts;
  sample.min_sm_clock_mhz = window.min_sm_clock_mhz;
  sample.throttle_reasons = window.throttle_reasons;
  sample.throttled = sample.throttled || mask_shows_slowdown(window.throttle_reasons);
}

std::chrono::milliseconds gpu_sampling_period() {
  const char* text = std::getenv("KSTUDY_GPU_SAMPLING_MS");
  if (text == nullptr || *text == '\0') return std::chrono::milliseconds(15);
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 60000)
    throw std::invalid_argument("kstudy: KSTUDY_GPU_SAMPLING_MS='" + std::string(text) +
                                "' is not a whole number of milliseconds in [0, 60000]");
  return std::chrono::milliseconds(value);
}

std::string gpu_sampling_status(const gpu_health_source& source) {
  const auto device = source.device();
  if (device.rfind("unavailable", 0) == 0) return device;
  const auto period = gpu_sampling_period().count();
  if (period == 0) return "off (KSTUDY_GPU_SAMPLING_MS=0); readings around each timed region only";
  return "every " + std::to_string(period) + " ms: power, SM clock, clocks-event reasons";
}

// ------------------------------------------------------------------------------------------------
// NVML, loaded at run time. The handful of declarations needed are restated here (nvml.h is not needed
// to build, and the CI machine has no driver): nvmlReturn_t is an int enum with NVML_SUCCESS = 0, and a
// device handle is an opaque pointer.

namespace {

struct nvml_device_opaque;
using nvml_device = nvml_device_opaque*;
constexpr int nvml_success = 0;
constexpr int nvml_clock_sm = 1;         // NVML_CLOCK_SM
constexpr int nvml_clock_mem = 2;        // NVML_CLOCK_MEM
constexpr int nvml_temperature_gpu = 0;  // NVML_TEMPERATURE_GPU

class nvml_health_source final : public gpu_health_source {
 public:
  nvml_health_source(const std::string& pci_bus_id, const std::string& library) {
    m_library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (m_library == nullptr) {
      const char* why = dlerror();
      m_device_name = "unavailable: " + std::string(why ? why : library + " could not be loaded");
      return;
    }
    if (!resolve()) return;
    if (const int rc = m_init(); rc != nvml_success) {
      m_device_name = "unavailable: nvmlInit_v2 failed: " + error(rc);
      return;
    }
    m_initialised = true;
    const int rc = pci_bus_id.empty() ? m_by_index(0, &m_device) : m_by_pci(pci_bus_id.c_str(), &m_device);
    if (rc != nvml_success) {
      m_device_name = "unavailable: no NVML device " +
                      (pci_bus_id.empty() ? std::string("at index 0") : "with PCI bus id " + pci_bus_id) + ": " +
                      error(rc);
      m_device = nullptr;
      return;
    }
    char name[96] = {};  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
    if (m_name == nullptr || m_name(m_device, name, sizeof name) != nvml_success)
      std::snprintf(name, sizeof name, "GPU");
    m_device_name = std::string(name) + " (" + (pci_bus_id.empty() ? std::string("NVML index 0") : pci_bus_id) + ")";
    unsigned long long energy = 0;
    if (m_energy == nullptr)
      m_energy_status = "unavailable: NVML has no symbol nvmlDeviceGetTotalEnergyConsumption";
    else if (const int energy_rc = m_energy(m_device, &energy); energy_rc != nvml_success)
      m_energy_status = "unavailable: nvmlDeviceGetTotalEnergyConsumption failed: " + error(energy_rc);
    else
      m_energy_status = "nvmlDeviceGetTotalEnergyConsumption (mJ)";
  }
  ~nvml_health_source() override {
    if (m_initialised && m_shutdown) m_shutdown();
    if (m_library) dlclose(m_library);
  }
  nvml_health_source(const nvml_health_source&) = delete;
  nvml_health_source& operator=(const nvml_health_source&) = delete;

  std::string device() const override { return m_device_name; }
  std::string energy_status() const override { return m_energy_status.empty() ? m_device_name : m_energy_status; }

  std::int64_t energy_mj() override {
    unsigned long long energy = 0;
    if (m_device == nullptr || m_energy == nullptr || m_energy(m_device, &energy) != nvml_success) return -1;
    return static_cast<std::int64_t>(energy);
  }

  gpu_reading read() override {
    gpu_reading r;
    if (m_device == nullptr) return r;
    r.available = true;
    // A value the GPU does not support (NVML_ERROR_NOT_SUPPORTED) stays -1; the others are still read.
    unsigned value = 0;
    if (m_clock(m_device, nvml_clock_sm, &value) == nvml_success) r.sm_clock_mhz = value;
    if (m_clock(m_device, nvml_clock_mem, &value) == nvml_success) r.memory_clock_mhz = value;
    if (m_temperature(m_device, nvml_temperature_gpu, &value) == nvml_success) r.temperature_c = value;
    if (m_power(m_device, &value) == nvml_success) r.power_mw = value;
    unsigned long long reasons = 0;
    if (m_reasons(m_device, &reasons) == nvml_success) r.throttle_reasons = static_cast<std::int64_t>(reasons);
    return r;
  }

 private:
  template <class F>
  bool symbol(F& out, const char* name, bool required = true) {
    out = reinterpret_cast<F>(dlsym(m_library, name));
    if (out == nullptr && required) m_device_name = std::string("unavailable: NVML has no symbol ") + name;
    return out != nullptr || !required;
  }

  bool resolve() {
    symbol(m_error_string, "nvmlErrorString", false);
    symbol(m_name, "nvmlDeviceGetName", false);
    symbol(m_energy, "nvmlDeviceGetTotalEnergyConsumption", false);  // Volta and later; drivers before 2017 lack it
    // Renamed to "clocks event reasons" in CUDA 12.2's NVML; both names are exported by current drivers.
    symbol(m_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons", false);
    if (m_reasons == nullptr) symbol(m_reasons, "nvmlDeviceGetCurrentClocksEventReasons", false);
    if (m_reasons == nullptr) {
      m_device_name =
          "unavailable: NVML has neither nvmlDeviceGetCurrentClocksThrottleReasons nor "
          "nvmlDeviceGetCurrentClocksEventReasons";
      return false;
    }
    return symbol(m_init, "nvmlInit_v2") && symbol(m_shutdown, "nvmlShutdown") &&
           symbol(m_by_pci, "nvmlDeviceGetHandleByPciBusId_v2") &&
           symbol(m_by_index, "nvmlDeviceGetHandleByIndex_v2") && symbol(m_clock, "nvmlDeviceGetClockInfo") &&
           symbol(m_temperature, "nvmlDeviceGetTemperature") && symbol(m_power, "nvmlDeviceGetPowerUsage");
  }

  std::string error(int rc) const {
    const char* text = m_error_string ? m_error_string(rc) : nullptr;
    return (text ? std::string(text) : std::string("NVML error")) + " (" + std::to_string(rc) + ")";
  }

  void* m_library = nullptr;
  bool m_initialised = false;
  nvml_device m_device = nullptr;
  std::string m_device_name;
  std::string m_energy_status;
  int (*m_init)() = nullptr;
  int (*m_shutdown)() = nullptr;
  const char* (*m_error_string)(int) = nullptr;
  int (*m_by_pci)(const char*, nvml_device*) = nullptr;
  int (*m_by_index)(unsigned, nvml_device*) = nullptr;
  int (*m_name)(nvml_device, char*, unsigned) = nullptr;
  int (*m_clock)(nvml_device, int, unsigned*) = nullptr;
  int (*m_temperature)(nvml_device, int, unsigned*) = nullptr;
  int (*m_power)(nvml_device, unsigned*) = nullptr;
  int (*m_reasons)(nvml_device, unsigned long long*) = nullptr;
  int (*m_energy)(nvml_device, unsigned long long*) = nullptr;
};

// A source that never has readings (the device could not even be identified).
class unavailable_source final : public gpu_health_source {
 public:
  explicit unavailable_source(std::string why) : m_why("unavailable: " + std::move(why)) {}
  std::string device() const override { return m_why; }
  std::string energy_status() const override { return m_why; }
  gpu_reading read() override { return {}; }

 private:
  std::string m_why;
};

}  // namespace

std::unique_ptr<gpu_health_source> make_nvml_health_source(const std::string& pci_bus_id, const std::string& library) {
  return std::make_unique<nvml_health_source>(pci_bus_id, library);
}

std::unique_ptr<gpu_health_source> make_gpu_health_source() {
  const char* override_library = std::getenv("KSTUDY_NVML_LIBRARY");
  const std::string library = override_library && *override_library ? override_library : "libnvidia-ml.so.1";
  std::string pci_bus_id;
#ifdef KOKKOS_ENABLE_CUDA
  // The device Kokkos runs on, by PCI bus id: NVML and CUDA number devices differently (and
  // CUDA_VISIBLE_DEVICES renumbers them), the bus id is the same in both.
  const int device = Kokkos::Cuda().cuda_device();
  char bus_id[32] = {};
  if (const cudaError_t rc = cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device); rc != cudaSuccess)
    return std::make_unique<unavailable_source>("cudaDeviceGetPCIBusId(" + std::to_string(device) +
                                                ") failed: " + cudaGetErrorString(rc));
  pci_bus_id = bus_id;
#endif
  return make_nvml_health_source(pci_bus_id, library);
}

// ------------------------------------------------------------------------------------------------

health_guarded_sink::health_guarded_sink(result_sink& inner, gpu_health_source& source,
                                         std::chrono::milliseconds sampling_period)
    : m_inner(inner), m_source(source), m_sampling_period(sampling_period) {}

health_guarded_sink::~health_guarded_sink() { stop_sampler(); }

gpu_reading health_guarded_sink::take_reading() {
  std::lock_guard<std::mutex> lock(m_source_mutex);
  auto reading = m_source.read();
  if (reading.available) m_readings.push_back(reading);
  return reading;
}

void health_guarded_sink::start_sampler() {
  if (m_sampling_period.count() <= 0 || !m_before.available) return;  // no thread where nothing can be read
  m_sampler_stop = false;
  m_sampler = std::thread([this] {
    std::unique_lock<std::mutex> lock(m_sampler_mutex);
    while (!m_sampler_wake.wait_for(lock, m_sampling_period, [this] { return m_sampler_stop; })) {
      lock.unlock();
      take_reading();
      lock.lock();
    }
  });
}

void health_guarded_sink::stop_sampler() {
  if (!m_sampler.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(m_sampler_mutex);
    m_sampler_stop = true;
  }
  m_sampler_wake.notify_all();
  m_sampler.join();
}

void health_guarded_sink::begin_point(const health_record& keys) {
  if (m_open) flush();  // a point left open ends here rather than mixing into the next
  m_point = keys;
  m_throttle_policy = throttle_policy::accept;
  m_open = true;
  m_readings.clear();
  m_before = m_source.read();
  m_energy_before_mj = m_source.energy_mj();
  m_timer.start();
  start_sampler();
}

void health_guarded_sink::add_phase_seconds(point_phase phase, double seconds) {
  if (!m_open) return;
  auto& total = phase_seconds(m_point, phase);
  total = std::isnan(total) ? seconds : total + seconds;
}

void health_guarded_sink::open_window() {
  if (!m_open) return;
  {
    std::lock_guard<std::mutex> lock(m_source_mutex);
    m_window_first = m_readings.size();
  }
  take_reading();
  std::lock_guard<std::mutex> lock(m_source_mutex);
  m_window_energy_mj = m_source.energy_mj();  // last: nearest the timed region
}

gpu_window health_guarded_sink::close_window() {
  gpu_window window;
  if (!m_open) return window;
  std::int64_t energy_after = -1;
  {
    std::lock_guard<std::mutex> lock(m_source_mutex);
    energy_after = m_source.energy_mj();  // first: nearest the timed region
  }
  take_reading();
  std::lock_guard<std::mutex> lock(m_source_mutex);
  const auto first = m_readings.begin() + static_cast<std::ptrdiff_t>(std::min(m_window_first, m_readings.size()));
  const auto seen = summarise_readings(first, m_readings.end());
  window.readings = seen.readings;
  window.energy_joules = joules_between(m_window_energy_mj, energy_after);
  window.power_watts = seen.mean_power_mw / 1000.0;
  window.min_sm_clock_mhz = seen.min_sm_clock_mhz;
  window.throttle_reasons = seen.throttle_reasons;
  m_window_energy_mj = -1;
  return window;
}

void health_guarded_sink::discard_point_records() {
  m_samples.clear();
  m_gates.clear();
  m_attribution.clear();
  m_variants.clear();
}

namespace {
// Appends the batch's records to held where they are of its type.
template <class R>
bool hold(const record_batch& batch, std::vector<R>& held) {
  const auto* records = batch.get<R>();
  if (records) held.insert(held.end(), records->begin(), records->end());
  return records != nullptr;
}
}  // namespace

void health_guarded_sink::do_write(const record_batch& batch) {
  if (m_open &&
      (hold(batch, m_samples) || hold(batch, m_gates) || hold(batch, m_attribution) || hold(batch, m_variants)))
    return;
  m_inner.write(batch);
}

void health_guarded_sink::flush() {
  if (m_open) {
    stop_sampler();
    const double seconds = m_timer.seconds();
    const std::int64_t energy_after = m_source.energy_mj();
    const gpu_reading after = m_source.read();
    m_open = false;
    health_record health = m_point;
    fill_health(health, m_source.device(), m_before, after, seconds);
    const auto seen = summarise_readings(m_readings.begin(), m_readings.end());
    m_readings.clear();
    health.energy_joules = joules_between(m_energy_before_mj, energy_after);
    health.sampled_readings = seen.readings;
    health.sampled_min_sm_clock_mhz = seen.min_sm_clock_mhz;
    health.sampled_mean_power_mw = seen.mean_power_mw;
    health.sampled_throttle_reasons = seen.throttle_reasons;
    // A slowdown during the point counts as one before or after it: every sample of the point is flagged.
    if (mask_shows_slowdown(seen.throttle_reasons)) health.throttled = true;
    if (seen.throttle_reasons > 0)
      health.reasons =
          throttle_reason_names(std::max<std::int64_t>(health.before_throttle_reasons, 0) |
                                std::max<std::int64_t>(health.after_throttle_reasons, 0) | seen.throttle_reasons);
    const bool set_aside = health.throttled && m_throttle_policy != throttle_policy::accept;
    const bool again = health.throttled && m_throttle_policy == throttle_policy::remeasure;
    for (auto& s : m_samples) {
      s.throttled = s.throttled || health.throttled;
      if (set_aside && s.status == "ok")
        s.status = std::string(again ? "remeasured" : "excluded") + ": throttled (" + health.reasons + ")";
    }
    m_last_point_throttled = health.throttled;
    if (again) {  // the next attempt writes the point's own
      m_gates.clear();
      m_attribution.clear();
      m_variants.clear();
    }
    // Cleared before the writes: a write that throws (no room) must not leave them to a later flush.
    const auto samples = std::move(m_samples);
    const auto gates = std::move(m_gates);
    const auto attribution = std::move(m_attribution);
    const auto variants = std::move(m_variants);
    discard_point_records();
    m_inner.write_attribution(attribution);
    m_inner.write_gates(gates);
    m_inner.write_variants(variants);
    m_inner.write_samples(samples);
    m_inner.write_health({health});
  }
  m_inner.flush();
}

}  // namespace kstudy
