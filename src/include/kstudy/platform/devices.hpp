#pragma once
// The GPUs of this node, for a study spread over them (kstudy run --devices): one entry per CUDA device
// with the identity every sample records (UUID, PCI bus id, model) and whether it passed a health check.
// Behind a small interface so the process layer is tested without GPUs: KSTUDY_FAKE_DEVICES lists fake
// devices ("UUID,BUS,MODEL[,HEALTH]" entries separated by ';'), and the CUDA runtime is asked otherwise
// (cuda flavour; the cpu flavour has no devices).
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kstudy::platform {

struct device_info {
  int index = 0;           // CUDA runtime ordinal in this process (what CUDA_VISIBLE_DEVICES selects)
  std::string uuid;        // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": the same in CUDA, NVML and nvidia-smi
  std::string pci_bus_id;  // "0000:1B:00.0"
  std::string model;       // cudaDeviceProp::name
  bool healthy = true;
  std::string health_note;  // why the health check failed, else empty

  // "device 2 (NVIDIA H200, 0000:1B:00.0, GPU-...)": how every message names a device.
  std::string describe() const;
};

class device_source {
 public:
  virtual ~device_source() = default;
  // Every device with its health checked (a device that fails is listed, healthy = false).
  virtual std::vector<device_info> list() const = 0;
  // The device this process runs on (the first one CUDA_VISIBLE_DEVICES leaves visible), if any.
  virtual std::optional<device_info> current() const = 0;
  virtual std::string name() const = 0;  // "cuda runtime", "KSTUDY_FAKE_DEVICES", "none (cpu flavour)"
};

// KSTUDY_FAKE_DEVICES when set, else the CUDA runtime (cuda flavour), else a source without devices.
std::unique_ptr<device_source> make_device_source();

// The fake list: "UUID,BUS,MODEL[,HEALTH]" entries separated by ';' or newlines; HEALTH is ok (the default),
// or anything else, which is the health note (e.g. "fail: ECC errors"). Throws std::invalid_argument.
std::vector<device_info> parse_fake_devices(const std::string& text);

// The entry CUDA_VISIBLE_DEVICES's first item names (an index into devices, or a UUID or its prefix as CUDA
// accepts); the first device when it is unset; none when it names nothing.
std::optional<device_info> visible_device(const std::vector<device_info>& devices, const char* cuda_visible_devices);

// --devices: "all" or a comma list of indices ("0,2,3"), checked against the devices listed; the selected
// devices in the order given, each once. Throws std::invalid_argument naming the problem.
std::vector<device_info> select_devices(const std::string& spec, const std::vector<device_info>& devices);

// The compute capability (major * 10 + minor) of the GPU this process runs on, 0 where there is none (the cpu
// flavour, or no device visible); and the one the build's device code targets (KSTUDY_CUDA_ARCH; 0 in the cpu
// flavour). What a variant's gpu_requirement is checked against.
int gpu_compute_capability();
int build_compute_capability();

// 16 raw bytes as the UUID text nvidia-smi prints ("GPU-" and 8-4-4-4-12 hex digits).
std::string format_gpu_uuid(const unsigned char (&bytes)[16]);

}  // namespace kstudy::platform
