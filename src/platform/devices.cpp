#include "kstudy/platform/devices.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/build_info.hpp"

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>

#include "kstudy/cuda_escape.hpp"
#endif

namespace kstudy::platform {
namespace {

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

std::vector<std::string> split(const std::string& text, const std::string& separators) {
  std::vector<std::string> out;
  std::string current;
  for (const char c : text) {
    if (separators.find(c) != std::string::npos) {
      out.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  out.push_back(current);
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 6 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

class fake_device_source : public device_source {
 public:
  explicit fake_device_source(const std::string& text) : m_devices(parse_fake_devices(text)) {}
  std::vector<device_info> list() const override { return m_devices; }
  std::optional<device_info> current() const override {
    return visible_device(m_devices, std::getenv("CUDA_VISIBLE_DEVICES"));
  }
  std::string name() const override { return "KSTUDY_FAKE_DEVICES"; }

 private:
  std::vector<device_info> m_devices;
};

#ifdef KOKKOS_ENABLE_CUDA
// The CUDA runtime's view; nvidia-smi is not needed (nor always installed in a container).
class cuda_device_source : public device_source {
 public:
  std::vector<device_info> list() const override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) return {};
    int previous = 0;
    cudaGetDevice(&previous);
    std::vector<device_info> devices;
    for (int d = 0; d < count; ++d) {
      devices.push_back(identify(d));
      check_health(devices.back());
    }
    cudaSetDevice(previous);
    return devices;
  }
  std::optional<device_info> current() const override {
    int device = 0, count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 || cudaGetDevice(&device) != cudaSuccess) return {};
    return identify(device);
  }
  std::string name() const override { return "cuda runtime"; }

 private:
  static device_info identify(int d) {
    device_info info;
    info.index = d;
    cudaDeviceProp prop{};
    if (const cudaError_t rc = cudaGetDeviceProperties(&prop, d); rc != cudaSuccess) {
      info.healthy = false;
      info.health_note = std::string("cudaGetDeviceProperties failed: ") + cudaGetErrorString(rc);
      return info;
    }
    info.model = prop.name;
    unsigned char bytes[16];
    std::copy(prop.uuid.bytes, prop.uuid.bytes + 16, bytes);
    info.uuid = format_gpu_uuid(bytes);
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, d) == cudaSuccess) info.pci_bus_id = bus;
    return info;
  }

  // A context, an allocation written and freed, and a synchronisation: what a study does first. The context
  // is released again (cudaDeviceReset), so the per-device processes started next find the device free.
  static void check_health(device_info& info) {
    if (!info.healthy) return;
    const auto fail = [&](const char* call, cudaError_t rc) {
      info.healthy = false;
      info.health_note = std::string(call) + " failed: " + cudaGetErrorString(rc);
    };
    void* p = nullptr;
    if (cudaError_t rc = cudaSetDevice(info.index); rc != cudaSuccess)
      fail("cudaSetDevice", rc);
    else if ((rc = cudaMalloc(&p, 1 << 20)) != cudaSuccess)
      fail("cudaMalloc", rc);
    else if ((rc = cudaMemset(p, 0, 1 << 20)) != cudaSuccess || (rc = cudaDeviceSynchronize()) != cudaSuccess)
      fail("cudaMemset", rc);
    if (p != nullptr) cudaFree(p);
    cudaDeviceReset();
  }
};
#else
class no_device_source : public device_source {
 public:
  std::vector<device_info> list() const override { return {}; }
  std::optional<device_info> current() const override { return std::nullopt; }
  std::string name() const override { return "none (cpu flavour)"; }
};
#endif

}  // namespace

std::string device_info::describe() const {
  std::string text = "device " + std::to_string(index) + " (" + (model.empty() ? "unknown model" : model);
  if (!pci_bus_id.empty()) text += ", " + pci_bus_id;
  if (!uuid.empty()) text += ", " + uuid;
  return text + ")";
}

int gpu_compute_capability() {
#ifdef KOKKOS_ENABLE_CUDA
  // cuda_escape's query, which throws where there is no device (no driver, none visible): here that is 0.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return 0;
  try {
    return cuda_escape::device_compute_capability();
  } catch (const std::exception&) {
    return 0;
  }
#else
  return 0;
#endif
}

int build_compute_capability() { return std::atoi(build_info::cuda_arch); }

std::unique_ptr<device_source> make_device_source() {
  if (const char* fake = std::getenv("KSTUDY_FAKE_DEVICES"); fake != nullptr)
    return std::make_unique<fake_device_source>(fake);
#ifdef KOKKOS_ENABLE_CUDA
  return std::make_unique<cuda_device_source>();
#else
  return std::make_unique<no_device_source>();
#endif
}

std::vector<device_info> parse_fake_devices(const std::string& text) {
  std::vector<device_info> devices;
  for (const auto& raw : split(text, ";\n")) {
    const auto entry = trim(raw);
    if (entry.empty()) continue;
    const auto fields = split(entry, ",");
    if (fields.size() < 3 || fields.size() > 4 || trim(fields[0]).empty())
      throw std::invalid_argument("KSTUDY_FAKE_DEVICES: '" + entry + "' is not UUID,BUS,MODEL[,HEALTH]");
    device_info d;
    d.index = static_cast<int>(devices.size());
    d.uuid = trim(fields[0]);
    d.pci_bus_id = trim(fields[1]);
    d.model = trim(fields[2]);
    const auto health = fields.size() == 4 ? trim(fields[3]) : std::string("ok");
    d.healthy = health == "ok" || health == "1";
    if (!d.healthy) d.health_note = health;
    devices.push_back(d);
  }
  return devices;
}

std::optional<device_info> visible_device(const std::vector<device_info>& devices, const char* cuda_visible_devices) {
  if (devices.empty()) return std::nullopt;
  if (cuda_visible_devices == nullptr) return devices.front();
  const auto first = trim(split(cuda_visible_devices, ",").front());
  if (all_digits(first)) {
    const auto i = static_cast<std::size_t>(std::stoi(first));
    if (i < devices.size()) return devices[i];
    return std::nullopt;
  }
  // A UUID, with or without its "GPU-" prefix, or a unique prefix of it (as CUDA accepts).
  const auto bare = [](const std::string& u) { return u.rfind("GPU-", 0) == 0 ? u.substr(4) : u; };
  std::optional<device_info> match;
  for (const auto& d : devices)
    if (!first.empty() && bare(d.uuid).rfind(bare(first), 0) == 0) {
      if (match) return std::nullopt;
      match = d;
    }
  return match;
}

std::vector<device_info> select_devices(const std::string& spec, const std::vector<device_info>& devices) {
  const auto text = trim(spec);
  if (text == "all") return devices;
  std::vector<device_info> out;
  std::set<int> seen;
  for (const auto& raw : split(text, ",")) {
    const auto item = trim(raw);
    if (!all_digits(item))
      throw std::invalid_argument("--devices '" + spec + "': expected all or device indices such as 0,2,3");
    const int i = std::stoi(item);
    if (i >= static_cast<int>(devices.size()))
      throw std::invalid_argument("--devices '" + spec + "': there is no device " + item + " (" +
                                  std::to_string(devices.size()) + " device" + (devices.size() == 1 ? "" : "s") +
                                  " found)");
    if (!seen.insert(i).second) throw std::invalid_argument("--devices '" + spec + "': device " + item + " twice");
    out.push_back(devices[static_cast<std::size_t>(i)]);
  }
  return out;
}

std::string format_gpu_uuid(const unsigned char (&bytes)[16]) {
  std::string text = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    std::snprintf(hex, sizeof hex, "%02x", bytes[i]);
    text += hex;
  }
  return text;
}

}  // namespace kstudy::platform
