#pragma once
// Ceilings measured in the same run as the variants, so every timing can be quoted as a fraction of
// what this machine actually sustains rather than of a datasheet.
#include <cstdint>
#include <string>
#include <vector>

#include "kstudy/records.hpp"

namespace kstudy {

struct ceiling_options {
  std::int64_t device_bytes = std::int64_t(1) << 30;   // per buffer for the device read / copy roofs
  std::int64_t host_bytes = std::int64_t(1) << 30;     // host read roof
  std::int64_t transfer_bytes = std::int64_t(256) << 20;
  // The compute roofs (CUDA flavour): device_fp32_fma and a cuBLAS GEMM of this extent per input precision.
  bool compute_roofs = true;
  std::int64_t gemm_roof_extent = 8192;
  int trials = 7;
};

// device_read (a sum over a buffer: read-dominant, the way the fused kernels run), device_copy
// (bytes read + written; the faster of device_copy_memcpy and, in the cuda flavour, device_copy_kernel,
// both also recorded), host_read (OpenMP sum), and where CUDA is enabled h2d/d2h for pinned and
// pageable host memory and host_stage_pageable_to_pinned (host threads copying pageable memory into
// page-locked memory: the bound of a one-shot from pageable memory through pinned staging), and in the
// CUDA flavour the compute roofs (flops, flops_per_second): device_fp32_fma and cublas_{fp32,tf32,bf16}_gemm at
// gemm_roof_extent^3 (kstudy/compute_roofs.hpp); a compute roof that cannot run (too little memory) is
// left out with a note on stderr. Each is the median of `trials` timed runs after one warm-up.
std::vector<ceiling_record> measure_ceilings(const ceiling_options& options = {});

// The ceiling a variant's bandwidth is quoted against: device_read for device variants, host_read
// for host ones; nullptr when absent.
const ceiling_record* roof_for(const std::vector<ceiling_record>& ceilings, bool on_device);
const ceiling_record* find_ceiling(const std::vector<ceiling_record>& ceilings, const std::string& name);

double median(std::vector<double> values);

}  // namespace kstudy
