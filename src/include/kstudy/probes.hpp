#pragma once
// Calibration probes beside the variants: transfer bandwidth, launch overhead, resident transpose.
// Each returns the seconds of every measured trial (warm-ups excluded).
#include <cstdint>
#include <string>
#include <vector>

#include "kstudy/views/host_buffers.hpp"

namespace kstudy::probes {

std::int64_t device_memory_free();
// Host memory a new allocation can take without swapping: MemAvailable of /proc/meminfo, capped by the
// address-space limit (RLIMIT_AS) where one is set; INT64_MAX when neither can be read.
std::int64_t host_memory_available();

// After an error from device code: true when the CUDA context is unusable (a sticky error such as an
// illegal address or a device-side trap), with the error text in why. A non-sticky error (an invalid
// launch configuration, an out-of-memory allocation) is cleared here and leaves the context usable.
// Always false in a build without CUDA.
bool device_context_lost(std::string& why);

// One copy of `bytes` between a reused host buffer of `kind` and device memory; allocation excluded.
std::vector<double> time_transfers(std::int64_t bytes, host_memory kind, bool host_to_device, int warmups, int trials);

// The cost of page-locking `bytes` of host memory, per call: a fresh cudaHostAlloc (cudaFreeHost after
// each trial, untimed), or cudaHostRegister of an existing, touched pageable buffer (cudaHostUnregister
// untimed). What pinning costs before a pinned one-shot can save anything (transfer_calibration).
enum class pin_call { host_alloc, host_register };
const char* to_string(pin_call call);
pin_call parse_pin_call(const std::string& name);  // throws std::invalid_argument naming the accepted names
std::vector<double> time_pinning(std::int64_t bytes, pin_call call, int warmups, int trials);

// kokkos_for_1_sync: a one-element parallel_for + fence, per launch.
// kokkos_for_1000_queued: 1,000 such launches queued, one fence; seconds per launch.
// cuda_empty_sync / cuda_empty_1000_queued: the same with an empty handwritten kernel (cuda flavour).
std::vector<std::string> launch_probe_names();
std::vector<double> time_launch_probe(const std::string& name, int warmups, int trials);

// Resident row-major -> feature-major conversion of a rows x features float table.
std::vector<double> time_layout_conversion(std::int64_t rows, std::int64_t features, int warmups, int trials);

}  // namespace kstudy::probes
