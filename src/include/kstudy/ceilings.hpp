#pragma once
// Ceilings measured in the same run as the variants, so every timing can be quoted as a fraction of
// what this machine actually sustains rather than of a datasheet.
#include <cstdint>
#include <string>
#include <vector>

#include "kstudy/records.hpp"

namespace kstudy {

struct ceiling_options {
  std::int64_t device_bytes = std::int64_t(1) << 30;  // per buffer for the device read / copy roofs
  int large_factor = 4;  // the device probes again at this multiple of device_bytes (their marginal bandwidth)
  std::int64_t host_bytes = std::int64_t(1) << 30;  // host read roof
  std::int64_t transfer_bytes = std::int64_t(256) << 20;
  // The compute roofs (CUDA flavour): device_fp32_fma and a cuBLAS GEMM of this extent per input precision.
  bool compute_roofs = true;
  std::int64_t gemm_roof_extent = 8192;
  int trials = 7;
};

// device_read (a sum over a buffer: read-dominant, the way the fused kernels run), device_copy
// (bytes read + written), host_read (OpenMP sum) and its cache levels' (host_read_l1 ...; below), and where CUDA is
// enabled h2d/d2h for pinned and pageable host memory and host_stage_pageable_to_pinned (host threads copying pageable
// memory into page-locked memory: the bound of a one-shot from pageable memory through pinned staging), and in the CUDA
// flavour the compute roofs (flops, flops_per_second): device_fp32_fma and cublas_{fp32,tf32,bf16}_gemm, the best of
// cuBLAS at gemm_roof_extent^3 and at half that extent (each also recorded as <name>_<extent>;
// kstudy/compute_roofs.hpp); a compute roof that cannot run (too little memory) is
// left out with a note on stderr. Each is the median of `trials` timed runs after one warm-up, on the clock
// of the numbers it bounds (ceiling_record::clock): in the CUDA flavour the device roofs are timed with CUDA
// events, as device variants are, each the best of several probes (device_read_vec4x4, _vec4x8;
// device_copy_vec4x4, _vec4x8, _memcpy, all recorded). Each device probe runs at device_bytes and at
// large_factor times that (where the device has the memory), and its marginal bandwidth — the extra bytes over
// the extra time, `<probe>_marginal` — is a probe too: a fixed launch and tail cost per run makes any probe
// at one size slower per byte than a kernel streaming more bytes, so without it a larger kernel "beats" the
// roof. device_read is also measured once more on the host clock for resident_wall; host roofs and transfers
// on the host clock.
std::vector<ceiling_record> measure_ceilings(const ceiling_options& options = {});

// The ceiling a variant's bandwidth is quoted against: device_read for device variants, host_read for host
// ones, timed on `clock` (clock_of the variant's timer); nullptr when absent: a number is never divided by a
// roof of another clock.
const ceiling_record* roof_for(const std::vector<ceiling_record>& ceilings, bool on_device, timer_kind clock);

// The host's data caches, level by level (Linux sysfs, CPU 0's view; none where it cannot be read), each with
// the capacity `threads` host threads reach together when spread over the CPUs (OMP_PROC_BIND=spread): one
// instance a thread, up to the instances there are (CPUs / the CPUs sharing one).
struct host_cache_level {
  int level = 0;
  std::int64_t capacity = 0;  // bytes, over the threads
};
std::vector<host_cache_level> host_cache_levels(int threads);

// A point on the host reads its working set from the fastest level that holds it, so one DRAM roof (host_read)
// understates a point of a few MB: it "exceeds" it. Beside host_read, the host roofs of each cache level
// (host_read_l1, host_read_l2, host_read_l3) are measured with every thread re-reading its share of a working set
// of host_cache_fill times the level's capacity (so it stays there; ceiling_record::bytes is that working set,
// and seconds one pass over it). Such a roof bounds the points whose working set fits the whole level, that is
// up to its bytes / host_cache_fill. The report's Python (scripts/kstudy_py/archive.py, HOST_CACHE_FILL) applies
// the same rule.
inline constexpr double host_cache_fill = 0.5;
// The host roof on `clock` for a point moving `bytes` a call: the first level roof whose level holds them, else
// host_read; nullptr where neither was timed on that clock.
const ceiling_record* host_roof_for(const std::vector<ceiling_record>& ceilings, double bytes, timer_kind clock);
// The clock a timer reads: device_events for device_events, the host clock (host_wall) for every other.
timer_kind clock_of(timer_kind timer);
// An experiment kind's roof rule (experiment_kind::roof): the ceiling, measured in the same run and timed on the
// point's own clock, that a point's bandwidth is a fraction of; nullptr for none.
using roof_rule = const ceiling_record* (*)(const summary_record& point, const std::vector<ceiling_record>& ceilings);
// The default rule: the device read roof for a device variant's resident timings (resident_wall, device_events),
// the host roof of the level its working set fits (host_roof_for) for host_wall, none for the rest (one-shot and
// first calls cross boundaries no roof bounds).
const ceiling_record* read_roof(const summary_record& point, const std::vector<ceiling_record>& ceilings);
const ceiling_record* find_ceiling(const std::vector<ceiling_record>& ceilings, const std::string& name);
const ceiling_record* find_ceiling(const std::vector<ceiling_record>& ceilings, const std::string& name,
                                   timer_kind clock);

double median(std::vector<double> values);

// A roof is the median of a few timed runs, so a variant that runs the roof's own code (cuBLAS at the GEMM
// roof's extent, a copy that is cudaMemcpy) lands on either side of it by that noise: the share of a roof is
// "exceeded" only beyond roof_tolerance, and a share within it is shown as the whole roof. The report's Python
// (scripts/kstudy_py/archive.py, ROOF_TOLERANCE) applies the same rule.
inline constexpr double roof_tolerance = 0.01;
inline bool roof_exceeded(double fraction_of_roof) { return fraction_of_roof > 1.0 + roof_tolerance; }

}  // namespace kstudy
