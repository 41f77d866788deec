/* A stand-in for libnvidia-ml.so.1, so the GPU health guard's real NVML path (dlopen, dlsym, the calls
 * and their error handling) runs in tests on machines without a GPU. kstudy loads it through
 * KSTUDY_NVML_LIBRARY (or by path in the unit tests); nothing links it.
 *
 * It exports the functions kstudy resolves, with NVML's C signatures, and answers from the environment:
 *   KSTUDY_FAKE_NVML_REASONS     comma-separated clocks-event reason bitmasks (decimal or 0x hex), one per
 *                                nvmlDeviceGetCurrentClocksThrottleReasons call, cycled; default "0"
 *   KSTUDY_FAKE_NVML_INIT_FAILS  set: nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED
 *   KSTUDY_FAKE_NVML_NO_POWER    set: nvmlDeviceGetPowerUsage answers NVML_ERROR_NOT_SUPPORTED
 *   KSTUDY_FAKE_NVML_ENERGY_STEPS_MJ  comma-separated increments of the total-energy counter, one per
 *                                nvmlDeviceGetTotalEnergyConsumption call, cycled; default "250". The counter
 *                                starts at 5000000 mJ and each call returns it after its increment, so the
 *                                difference of two consecutive reads is the second read's step.
 *   KSTUDY_FAKE_NVML_NO_ENERGY   set: nvmlDeviceGetTotalEnergyConsumption answers NVML_ERROR_NOT_SUPPORTED
 * With n the throttle-reason queries answered so far (a read queries it last): SM clock 1980 - n MHz,
 * memory clock 2619 MHz, temperature 40 + n degC, power 100000 + n mW. The only PCI bus id it knows is
 * 00000000:65:00.0 (CUDA writes it 0000:65:00.0; both are accepted). */
#include <stdlib.h>
#include <string.h>

typedef struct fake_device {
  int unused;
} fake_device;
static fake_device the_device;
static unsigned long long reason_calls;
static unsigned long long energy_calls;
static unsigned long long energy_mj;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_DRIVER_NOT_LOADED 9

static int initialised;

int nvmlInit_v2(void) {
  if (getenv("KSTUDY_FAKE_NVML_INIT_FAILS")) return NVML_ERROR_DRIVER_NOT_LOADED;
  initialised = 1;
  reason_calls = 0;
  energy_calls = 0;
  energy_mj = 5000000ull;
  return NVML_SUCCESS;
}

int nvmlShutdown(void) {
  initialised = 0;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(int result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, fake_device** device) {
  if (!initialised) return NVML_ERROR_UNINITIALIZED;
  if (index != 0 || !device) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &the_device;
  return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, fake_device** device) {
  if (!initialised) return NVML_ERROR_UNINITIALIZED;
  if (!bus_id || !device) return NVML_ERROR_INVALID_ARGUMENT;
  if (strcmp(bus_id, "00000000:65:00.0") != 0 && strcmp(bus_id, "0000:65:00.0") != 0) return NVML_ERROR_NOT_FOUND;
  *device = &the_device;
  return NVML_SUCCESS;
}

int nvmlDeviceGetName(fake_device* device, char* name, unsigned length) {
  if (device != &the_device || !name || length < 16) return NVML_ERROR_INVALID_ARGUMENT;
  strcpy(name, "Fake NVML GPU");
  return NVML_SUCCESS;
}

/* The n-th (from 1) value of a comma-separated list in the environment, cycled; fallback when unset. */
static unsigned long long cycled_value(const char* variable, unsigned long long n, unsigned long long fallback) {
  const char* list = getenv(variable);
  if (!list || !*list) return fallback;
  unsigned long long values[64];
  int count = 0;
  const char* p = list;
  while (*p && count < 64) {
    char* end = NULL;
    values[count++] = strtoull(p, &end, 0);
    if (end == p) break;
    p = *end == ',' ? end + 1 : end;
  }
  return count ? values[(n - 1) % (unsigned long long)count] : fallback;
}

static unsigned long long current_reasons(void) { return cycled_value("KSTUDY_FAKE_NVML_REASONS", reason_calls, 0); }

int nvmlDeviceGetTotalEnergyConsumption(fake_device* device, unsigned long long* energy) {
  if (device != &the_device || !energy) return NVML_ERROR_INVALID_ARGUMENT;
  if (getenv("KSTUDY_FAKE_NVML_NO_ENERGY")) return NVML_ERROR_NOT_SUPPORTED;
  ++energy_calls;
  energy_mj += cycled_value("KSTUDY_FAKE_NVML_ENERGY_STEPS_MJ", energy_calls, 250);
  *energy = energy_mj;
  return NVML_SUCCESS;
}

int nvmlDeviceGetCurrentClocksThrottleReasons(fake_device* device, unsigned long long* reasons) {
  if (device != &the_device || !reasons) return NVML_ERROR_INVALID_ARGUMENT;
  ++reason_calls;
  *reasons = current_reasons();
  return NVML_SUCCESS;
}

int nvmlDeviceGetClockInfo(fake_device* device, int type, unsigned* clock) {
  if (device != &the_device || !clock) return NVML_ERROR_INVALID_ARGUMENT;
  if (type == 1)
    *clock = 1980u - (unsigned)reason_calls; /* NVML_CLOCK_SM */
  else if (type == 2)
    *clock = 2619u; /* NVML_CLOCK_MEM */
  else
    return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

int nvmlDeviceGetTemperature(fake_device* device, int sensor, unsigned* temperature) {
  if (device != &the_device || sensor != 0 || !temperature) return NVML_ERROR_INVALID_ARGUMENT;
  *temperature = 40u + (unsigned)reason_calls;
  return NVML_SUCCESS;
}

int nvmlDeviceGetPowerUsage(fake_device* device, unsigned* power) {
  if (device != &the_device || !power) return NVML_ERROR_INVALID_ARGUMENT;
  if (getenv("KSTUDY_FAKE_NVML_NO_POWER")) return NVML_ERROR_NOT_SUPPORTED;
  *power = 100000u + (unsigned)reason_calls;
  return NVML_SUCCESS;
}
