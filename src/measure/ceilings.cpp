#include "kstudy/ceilings.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kstudy/records.hpp"
#include "kstudy/timers.hpp"
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
#include "kstudy/compute_roofs.hpp"
#include "kstudy/cuda_escape.hpp"
#include "kstudy/probes.hpp"
#endif
#include "kstudy/views/host_buffers.hpp"
#include "detail/wall_times.hpp"

namespace kstudy {

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

namespace {

// The record of `trials` timings of a probe moving `bytes` each, on `clock`: their median.
ceiling_record ceiling_of(const std::string& name, std::int64_t bytes, const std::vector<double>& seconds,
                          timer_kind clock) {
  ceiling_record c;
  c.name = name;
  c.bytes = bytes;
  c.seconds = median(seconds);
  c.bytes_per_second = c.seconds > 0 ? double(bytes) / c.seconds : 0.0;
  c.clock = clock;
  return c;
}

// A roof on the host clock: one warm-up (first touch, module load), then the median of `trials` runs of op,
// which fences its own work (as host variants and resident_wall time theirs).
ceiling_record timed(const std::string& name, std::int64_t bytes, int trials, const std::function<void()>& op) {
  return ceiling_of(name, bytes, detail::wall_times(1, trials, op), timer_kind::host_wall);
}

#ifdef KSTUDY_HAVE_CUDA_VARIANTS
// A roof on the device variants' clock: CUDA events around each trial on the legacy default stream, where
// `enqueue` queues the probe without waiting, after the same warm-up; the median of `trials`.
ceiling_record timed_on_device(const std::string& name, std::int64_t bytes, int trials,
                               const std::function<void()>& enqueue) {
  enqueue();
  cuda_escape::synchronize(nullptr);
  device_event_timer events(true, nullptr);
  std::vector<double> seconds;
  for (int t = 0; t < trials; ++t) {
    events.start();
    enqueue();
    events.stop();
    seconds.push_back(events.seconds());
  }
  return ceiling_of(name, bytes, seconds, timer_kind::device_events);
}

// The same probe on the host clock (queued, then the device synchronised): the roof of resident_wall, which
// times device variants on the host clock through their fence.
ceiling_record timed_on_host(const std::string& name, std::int64_t bytes, int trials,
                             const std::function<void()>& enqueue) {
  return timed(name, bytes, trials, [&] {
    enqueue();
    cuda_escape::synchronize(nullptr);
  });
}

// The fastest of several probes of one bandwidth (each also recorded under its own name) under `name`: a roof
// is what the best probe reaches, not what one probe happens to.
ceiling_record best_of(const std::string& name, const std::vector<ceiling_record>& probes) {
  const auto rate = [](const ceiling_record& c) { return c.flops > 0 ? c.flops_per_second : c.bytes_per_second; };
  ceiling_record best = probes.front();
  for (const auto& p : probes)
    if (rate(p) > rate(best)) best = p;
  best.name = name;
  return best;
}

// The marginal bandwidth of one probe timed at two sizes: the extra bytes over the extra time. What a run
// costs whatever its size (launch, the last wave's tail) cancels, so this is the rate no streaming kernel
// of any size can beat by being larger than the probe.
ceiling_record marginal(const ceiling_record& small, const ceiling_record& large) {
  ceiling_record c = large;
  c.name = small.name + "_marginal";
  c.bytes = large.bytes - small.bytes;
  c.seconds = large.seconds - small.seconds;
  c.bytes_per_second = c.seconds > 0 && c.bytes > 0 ? double(c.bytes) / c.seconds : 0.0;
  return c;
}

// A compute roof: as timed_on_device, each run performing `flops`.
ceiling_record timed_compute(const std::string& name, std::int64_t flops, int trials,
                             const std::function<void()>& enqueue) {
  auto c = timed_on_device(name, 0, trials, enqueue);
  c.flops = flops;
  c.flops_per_second = c.seconds > 0 ? double(flops) / c.seconds : 0.0;
  return c;
}

void measure_compute_roofs(const ceiling_options& options, std::vector<ceiling_record>& out) {
  try {
    const std::int64_t flops = cuda_escape::run_fp32_fma_probe();  // every run performs the same flops
    cuda_escape::synchronize(nullptr);
    out.push_back(timed_compute("device_fp32_fma", flops, options.trials, [] { cuda_escape::run_fp32_fma_probe(); }));
  } catch (const std::exception& ex) {
    std::cerr << "kstudy: the device_fp32_fma roof could not be measured (" << ex.what() << ")\n";
  }
  // Each GEMM roof is the best of cuBLAS at the roof extent and at half of it (each recorded as
  // <name>_<extent>): cuBLAS at 8192^3 alone was beaten by cuBLAS at 4096^3 (51.19 against 50.96 TFLOP/s
  // on the H200, flagged "roof exceeded" by the bench), so one size is not the library's best.
  using cuda_escape::gemm_roof_precision;
  for (const auto precision : cuda_escape::gemm_roof_precisions) {
    const std::string name = cuda_escape::gemm_roof_name(precision);
    std::vector<ceiling_record> probes;
    for (const std::int64_t extent : {options.gemm_roof_extent, options.gemm_roof_extent / 2}) {
      try {
        cuda_escape::cublas_gemm_probe probe(precision, extent);
        probes.push_back(
            timed_compute(name + "_" + std::to_string(extent), probe.flops(), options.trials, [&] { probe.run(); }));
      } catch (const std::exception& ex) {
        std::cerr << "kstudy: the " << name << " roof at " << extent << "^3 could not be measured (" << ex.what()
                  << ")\n";
      }
    }
    if (probes.empty()) continue;
    out.insert(out.end(), probes.begin(), probes.end());
    out.push_back(best_of(name, probes));
  }
  // BF16 (FP16, TF32) GEMMs are divided by device_bf16_tensor (device_fp16_tensor, device_tf32_tensor), the best
  // of the wgmma peak probe and cuBLAS at that input type: a handwritten wgmma GEMM beat cuBLAS BF16 on the H200
  // (data/h200-2026-12-02-s12/hopper_gemm.h5), so cuBLAS alone is not a roof. Where no sm_90a code runs the
  // probe measures nothing and the roof is cuBLAS's.
  for (const auto precision : cuda_escape::tensor_peak_precisions) {
    const std::string probe = cuda_escape::wgmma_probe_name(precision);
    try {
      if (cuda_escape::run_wgmma_peak_probe(precision) > 0) {
        cuda_escape::synchronize(nullptr);
        const std::int64_t flops = cuda_escape::run_wgmma_peak_probe(precision);
        out.push_back(
            timed_compute(probe, flops, options.trials, [precision] { cuda_escape::run_wgmma_peak_probe(precision); }));
      }
    } catch (const std::exception& ex) {
      std::cerr << "kstudy: the " << probe << " roof could not be measured (" << ex.what() << ")\n";
    }
    const std::string cublas = cuda_escape::gemm_roof_name(cuda_escape::cublas_roof_of(precision));
    std::vector<ceiling_record> candidates;
    for (const auto& c : out)
      if (c.name == probe || c.name == cublas) candidates.push_back(c);
    if (!candidates.empty()) out.push_back(best_of(cuda_escape::tensor_roof_name(precision), candidates));
  }
}
#endif

// A read-dominant stream over the buffer, shaped the way the fused kernels read: on a device, one
// element per work item (coalesced); on a host, contiguous blocks per thread with eight independent
// accumulators so the loop is limited by memory, not by the add latency chain.
template <class ExecutionSpace, class View>
double sum_view(const ExecutionSpace& space, const char* label, const View& v) {
  float sum = 0.0f;
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecutionSpace::memory_space>::accessible) {
    constexpr std::int64_t block = 1 << 14;
    const std::int64_t n = v.extent(0);
    const float* data = v.data();
    Kokkos::parallel_reduce(
        label, Kokkos::RangePolicy<ExecutionSpace>(space, 0, (n + block - 1) / block),
        [=](const std::int64_t b, float& s) {
          float acc[8] = {};
          const std::int64_t begin = b * block, end = begin + block < n ? begin + block : n;
          std::int64_t i = begin;
          for (; i + 8 <= end; i += 8)
            for (int k = 0; k < 8; ++k) acc[k] += data[i + k];
          for (; i < end; ++i) acc[0] += data[i];
          for (int k = 0; k < 8; ++k) s += acc[k];
        },
        sum);
  } else {
    Kokkos::parallel_reduce(
        label, Kokkos::RangePolicy<ExecutionSpace>(space, 0, v.extent(0)),
        KOKKOS_LAMBDA(const std::int64_t i, float& s) { s += v(i); }, sum);
  }
  return sum;
}

// The device memory roofs (read, copy): on the device variants' clock and on the host clock, or without a device
// on the host clock in the default execution space.
void measure_device_memory_roofs(const ceiling_options& options, std::vector<ceiling_record>& out) {
  const std::int64_t n_device = options.device_bytes / std::int64_t(sizeof(float));
  std::int64_t n_alloc = n_device;
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  // The device probes also run at large_factor times the size, where two such buffers take at most half of
  // the free device memory.
  std::int64_t n_large = 0;
  if (options.large_factor > 1 && 2 * options.large_factor * options.device_bytes <= probes::device_memory_free() / 2)
    n_alloc = n_large = options.large_factor * n_device;
#endif
  {
    Kokkos::View<float*> a(Kokkos::view_alloc("kstudy::ceiling_a", Kokkos::WithoutInitializing), n_alloc);
    Kokkos::View<float*> b(Kokkos::view_alloc("kstudy::ceiling_b", Kokkos::WithoutInitializing), n_alloc);
    Kokkos::deep_copy(a, 1.0f);
    Kokkos::fence();
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
    // Device roofs on the device variants' clock (CUDA events), each the best of its probes: float4 loads with
    // 4 and 8 in flight per thread, and for the copy also cudaMemcpyAsync. Kokkos 3.4 caps a RangePolicy
    // reduction's grid at the block size, far below what saturates HBM, so no Kokkos kernel is a probe here.
    std::vector<ceiling_record> reads, copies;
    // Each probe at the base size, then (with the memory) at the large size and its marginal bandwidth.
    const auto probe = [&](std::vector<ceiling_record>& into, const std::string& name, std::int64_t bytes_per_float,
                           const std::function<void(std::int64_t)>& enqueue) {
      const auto base = timed_on_device(name, bytes_per_float * n_device, options.trials, [&] { enqueue(n_device); });
      into.push_back(base);
      if (n_large == 0) return;
      auto large =
          timed_on_device(name + "_large", bytes_per_float * n_large, options.trials, [&] { enqueue(n_large); });
      into.push_back(large);
      into.push_back(marginal(base, large));
    };
    for (const int loads : {4, 8}) {
      const std::string suffix = "_vec4x" + std::to_string(loads);
      probe(reads, "device_read" + suffix, sizeof(float),
            [&](std::int64_t n) { cuda_escape::read_buffer(a.data(), n, loads); });
      probe(copies, "device_copy" + suffix, 2 * sizeof(float),
            [&](std::int64_t n) { cuda_escape::copy_buffer(a.data(), b.data(), n, loads); });
    }
    probe(copies, "device_copy_memcpy", 2 * sizeof(float),
          [&](std::int64_t n) { cuda_escape::copy_buffer_memcpy(a.data(), b.data(), n); });
    out.insert(out.end(), reads.begin(), reads.end());
    out.insert(out.end(), copies.begin(), copies.end());
    out.push_back(best_of("device_read", reads));
    out.push_back(best_of("device_copy", copies));
    // On the host clock (resident_wall, the layout conversion): the probes at the base size, the best of each.
    std::vector<ceiling_record> host_reads, host_copies;
    for (const int loads : {4, 8}) {
      host_reads.push_back(timed_on_host("device_read", sizeof(float) * n_device, options.trials,
                                         [&] { cuda_escape::read_buffer(a.data(), n_device, loads); }));
      host_copies.push_back(timed_on_host("device_copy", 2 * sizeof(float) * n_device, options.trials,
                                          [&] { cuda_escape::copy_buffer(a.data(), b.data(), n_device, loads); }));
    }
    host_copies.push_back(timed_on_host("device_copy", 2 * sizeof(float) * n_device, options.trials,
                                        [&] { cuda_escape::copy_buffer_memcpy(a.data(), b.data(), n_device); }));
    out.push_back(best_of("device_read", host_reads));
    out.push_back(best_of("device_copy", host_copies));
#else
    // Without a device the "device" space is the host's default one: its roofs on the host clock.
    Kokkos::DefaultExecutionSpace space;
    out.push_back(timed("device_read", options.device_bytes, options.trials,
                        [&] { sum_view(space, "kstudy::ceiling::device_read", a); }));
    auto copy = timed("device_copy_memcpy", 2 * options.device_bytes, options.trials, [&] {
      Kokkos::deep_copy(space, b, a);
      space.fence();
    });
    out.push_back(copy);
    copy.name = "device_copy";
    out.push_back(copy);
#endif
  }
}

// Each of `threads` host threads sums its own `per_thread` floats of `data`, `passes` times over, in one parallel
// region: after the first pass its share is in its core's caches (the region's entry and exit, a few µs, are
// spread over every pass). Thirty-two accumulators, eight vector chains even at SSE's four floats: with sum_view's
// eight (two chains) the add latency, not the cache, bounds the loop (74 GB/s at every level on a 2-core EPYC).
float resident_sum(const Kokkos::DefaultHostExecutionSpace& space, const float* data, std::int64_t per_thread,
                   int threads, std::int64_t passes) {
  float sum = 0.0f;
  Kokkos::parallel_reduce(
      "kstudy::ceiling::host_read_level", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(space, 0, threads),
      [=](const int t, float& s) {
        const float* x = data + std::int64_t(t) * per_thread;
        float acc[32] = {};
        for (std::int64_t p = 0; p < passes; ++p)
          for (std::int64_t i = 0; i + 32 <= per_thread; i += 32)
            for (int k = 0; k < 32; ++k) acc[k] += x[i + k];
        for (int k = 0; k < 32; ++k) s += acc[k];
      },
      sum);
  return sum;
}

// host_read: the host's default execution space streaming a buffer.
void measure_host_roof(const ceiling_options& options, std::vector<ceiling_record>& out) {
  using host_space = Kokkos::DefaultHostExecutionSpace;
  const std::int64_t n_host = options.host_bytes / std::int64_t(sizeof(float));
  Kokkos::View<float*, Kokkos::HostSpace> h(Kokkos::view_alloc("kstudy::ceiling_host", Kokkos::WithoutInitializing),
                                            n_host);
  Kokkos::deep_copy(h, 1.0f);
  host_space space;
  out.push_back(timed("host_read", options.host_bytes, options.trials,
                      [&] { sum_view(space, "kstudy::ceiling::host_read", h); }));
}

// host_read_l<N> for each data cache level (kstudy/ceilings.hpp): each thread's share of host_cache_fill times the
// level's capacity, re-read until a timed run has read about 256 MiB (a few ms, so that one preempted thread on a
// busy machine costs a share of a run, not the run); the record is one pass.
void measure_host_cache_roofs(const ceiling_options& options, std::vector<ceiling_record>& out) {
  using host_space = Kokkos::DefaultHostExecutionSpace;
  host_space space;
  const int threads = std::max(1, int(space.concurrency()));
  for (const host_cache_level& level : host_cache_levels(threads)) {
    const std::int64_t per_thread = std::int64_t(double(level.capacity) * host_cache_fill) / threads /
                                    std::int64_t(sizeof(float)) / 32 * 32;  // whole 128-byte steps
    if (per_thread < 32) continue;
    const std::int64_t n = per_thread * threads, bytes = n * std::int64_t(sizeof(float));
    Kokkos::View<float*, Kokkos::HostSpace> h(
        Kokkos::view_alloc("kstudy::ceiling_host_level", Kokkos::WithoutInitializing), n);
    Kokkos::deep_copy(h, 1.0f);
    const std::int64_t passes = std::max<std::int64_t>(1, (std::int64_t(256) << 20) / bytes);
    std::vector<double> seconds =
        detail::wall_times(1, options.trials, [&] { resident_sum(space, h.data(), per_thread, threads, passes); });
    for (double& t : seconds) t /= double(passes);
    out.push_back(ceiling_of("host_read_l" + std::to_string(level.level), bytes, seconds, timer_kind::host_wall));
  }
}

#ifdef KOKKOS_ENABLE_CUDA
// Host <-> device copies from pinned and pageable memory, and the pageable-to-pinned staging the pipelined
// strategy runs through.
void measure_transfer_roofs(const ceiling_options& options, std::vector<ceiling_record>& out) {
  using host_space = Kokkos::DefaultHostExecutionSpace;
  const std::int64_t n = options.transfer_bytes / std::int64_t(sizeof(float));
  Kokkos::View<float*> d(Kokkos::view_alloc("kstudy::ceiling_transfer", Kokkos::WithoutInitializing), n);
  for (const host_memory kind : {host_memory::pinned, host_memory::pageable}) {
    host_buffer buffer(kind, options.transfer_bytes);
    Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(buffer.as<float>(), n);
    Kokkos::deep_copy(h, 1.0f);
    const std::string suffix = std::string("_") + std::string(to_string(kind));
    out.push_back(timed("h2d" + suffix, options.transfer_bytes, options.trials, [&] { Kokkos::deep_copy(d, h); }));
    out.push_back(timed("d2h" + suffix, options.transfer_bytes, options.trials, [&] { Kokkos::deep_copy(h, d); }));
  }
  // What bounds a one-shot from pageable memory through pinned staging (the pipelined strategy): host
  // threads copying pageable memory into page-locked chunks, in 64 KiB pieces as the pipeline gathers
  // them. bytes = bytes copied (each is read once and written once).
  host_buffer source(host_memory::pageable, options.transfer_bytes),
      staging(host_memory::pinned, options.transfer_bytes);
  std::fill(source.data(), source.data() + options.transfer_bytes, std::byte{1});
  std::fill(staging.data(), staging.data() + options.transfer_bytes, std::byte{0});
  out.push_back(timed("host_stage_pageable_to_pinned", options.transfer_bytes, options.trials, [&] {
    const std::byte* from = source.data();
    std::byte* to = staging.data();
    const std::int64_t bytes = options.transfer_bytes, piece = std::int64_t(1) << 16;
    Kokkos::parallel_for("kstudy::ceiling::host_stage", Kokkos::RangePolicy<host_space>(0, (bytes + piece - 1) / piece),
                         [=](const std::int64_t p) {
                           const std::int64_t begin = p * piece;
                           std::memcpy(to + begin, from + begin, std::size_t(std::min(piece, bytes - begin)));
                         });
    host_space().fence();
  }));
}
#endif

}  // namespace

std::vector<ceiling_record> measure_ceilings(const ceiling_options& options) {
  std::vector<ceiling_record> out;
  measure_device_memory_roofs(options, out);
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  if (options.compute_roofs) measure_compute_roofs(options, out);
#endif
  measure_host_roof(options, out);
  measure_host_cache_roofs(options, out);
#ifdef KOKKOS_ENABLE_CUDA
  measure_transfer_roofs(options, out);
#endif
  return out;
}

const ceiling_record* find_ceiling(const std::vector<ceiling_record>& ceilings, const std::string& name) {
  for (const auto& c : ceilings)
    if (c.name == name) return &c;
  return nullptr;
}

const ceiling_record* find_ceiling(const std::vector<ceiling_record>& ceilings, const std::string& name,
                                   timer_kind clock) {
  for (const auto& c : ceilings)
    if (c.name == name && c.clock == clock) return &c;
  return nullptr;
}

timer_kind clock_of(timer_kind timer) {
  for (const auto& declared : timer_kinds())
    if (declared.kind == timer) return parse_timer_kind(declared.clock);
  return timer_kind::host_wall;  // not reached: every timer is declared
}

const ceiling_record* roof_for(const std::vector<ceiling_record>& ceilings, bool on_device, timer_kind clock) {
  return find_ceiling(ceilings, on_device ? "device_read" : "host_read", clock);
}

namespace {

// "32K", "1024K", "16M" (sysfs cache sizes), in bytes; 0 where unreadable.
std::int64_t cache_size_bytes(const std::string& text) {
  std::istringstream in(text);
  std::int64_t value = 0;
  char unit = 0;
  if (!(in >> value)) return 0;
  in >> unit;
  return unit == 'K' ? value << 10 : unit == 'M' ? value << 20 : unit == 'G' ? value << 30 : value;
}

// How many CPUs a sysfs cpu list names ("0", "0-1", "0-7,64-71").
int cpu_list_count(const std::string& text) {
  int count = 0;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    const auto dash = part.find('-');
    try {
      count += dash == std::string::npos ? 1 : std::stoi(part.substr(dash + 1)) - std::stoi(part.substr(0, dash)) + 1;
    } catch (const std::exception&) {
      return 0;
    }
  }
  return count;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::vector<host_cache_level> host_cache_levels(int threads) {
  std::vector<host_cache_level> out;
  const int cpus = std::max(1, int(std::thread::hardware_concurrency()));
  const std::string cpu0 = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int index = 0; index < 16; ++index) {
    const std::string dir = cpu0 + std::to_string(index) + "/";
    const std::string type = first_line(dir + "type");
    if (type.empty()) break;
    if (type != "Data" && type != "Unified") continue;  // instruction caches hold no data
    const int level = std::atoi(first_line(dir + "level").c_str());
    const std::int64_t size = cache_size_bytes(first_line(dir + "size"));
    const int sharing = std::max(1, cpu_list_count(first_line(dir + "shared_cpu_list")));
    if (level <= 0 || size <= 0) continue;
    // Spread threads take a cache instance each until there are no more: min(threads, CPUs / sharing).
    const std::int64_t instances = std::min<std::int64_t>(std::max(1, threads), std::max(1, cpus / sharing));
    out.push_back({level, size * instances});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.level < b.level; });
  return out;
}

const ceiling_record* host_roof_for(const std::vector<ceiling_record>& ceilings, double bytes, timer_kind clock) {
  const ceiling_record* best = nullptr;
  int best_level = 0;
  for (const auto& c : ceilings) {
    if (c.clock != clock || c.bytes <= 0 || c.name.rfind("host_read_l", 0) != 0) continue;
    const int level = std::atoi(c.name.c_str() + std::strlen("host_read_l"));
    if (bytes <= double(c.bytes) / host_cache_fill && (best == nullptr || level < best_level)) {
      best = &c;
      best_level = level;
    }
  }
  return best != nullptr ? best : find_ceiling(ceilings, "host_read", clock);
}

const ceiling_record* read_roof(const summary_record& point, const std::vector<ceiling_record>& ceilings) {
  if (point.timer == timer_kind::resident_wall || point.timer == timer_kind::device_events)
    return roof_for(ceilings, true, clock_of(point.timer));
  if (point.timer == timer_kind::host_wall)
    return host_roof_for(ceilings, point.bytes_per_second * point.median, clock_of(point.timer));
  return nullptr;
}

}  // namespace kstudy
