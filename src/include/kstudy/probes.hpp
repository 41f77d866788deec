#pragma once
// Calibration probes beside the variants: transfer bandwidth, launch overhead, resident transpose.
// Each returns the seconds of every measured trial (warm-ups excluded).
#include <cstdint>
#include <string>
#include <vector>

#include "kstudy/views/host_buffers.hpp"

namespace kstudy::probes {

std::int64_t device_memory_free();

// One copy of `bytes` between a reused host buffer of `kind` and device memory; allocation excluded.
std::vector<double> time_transfers(std::int64_t bytes, host_memory kind, bool host_to_device, int warmups, int trials);

// kokkos_for_1_sync: a one-element parallel_for + fence, per launch.
// kokkos_for_1000_queued: 1,000 such launches queued, one fence; seconds per launch.
// cuda_empty_sync / cuda_empty_1000_queued: the same with an empty handwritten kernel (cuda flavour).
std::vector<std::string> launch_probe_names();
std::vector<double> time_launch_probe(const std::string& name, int warmups, int trials);

// Resident row-major -> feature-major conversion of a rows x features float table.
std::vector<double> time_transpose(std::int64_t rows, std::int64_t features, int warmups, int trials);

}  // namespace kstudy::probes
