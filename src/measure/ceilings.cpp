#include "kstudy/ceilings.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <iostream>

#include "kstudy/timers.hpp"
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
#include "kstudy/compute_roofs.hpp"
#include "kstudy/cuda_escape.hpp"
#endif
#include "kstudy/views/host_buffers.hpp"

namespace kstudy {

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

namespace {

ceiling_record timed(const std::string& name, std::int64_t bytes, int trials, const std::function<void()>& op) {
  op();  // warm-up: first-touch, module load
  std::vector<double> seconds;
  for (int t = 0; t < trials; ++t) {
    wall_timer timer;
    timer.start();
    op();
    seconds.push_back(timer.seconds());
  }
  ceiling_record c;
  c.name = name;
  c.bytes = bytes;
  c.seconds = median(seconds);
  c.bytes_per_second = c.seconds > 0 ? double(bytes) / c.seconds : 0.0;
  return c;
}

#ifdef KSTUDY_HAVE_CUDA_VARIANTS
// A compute roof: the median of `trials` synchronised runs of op, each performing `flops`.
ceiling_record timed_compute(const std::string& name, std::int64_t flops, int trials, const std::function<void()>& op) {
  auto c = timed(name, 0, trials, op);
  c.flops = flops;
  c.flops_per_second = c.seconds > 0 ? double(flops) / c.seconds : 0.0;
  return c;
}

void measure_compute_roofs(const ceiling_options& options, std::vector<ceiling_record>& out) {
  try {
    const std::int64_t flops = cuda_escape::run_fp32_fma_probe();  // every run performs the same flops
    out.push_back(timed_compute("device_fp32_fma", flops, options.trials, [] { cuda_escape::run_fp32_fma_probe(); }));
  } catch (const std::exception& ex) {
    std::cerr << "kstudy: the device_fp32_fma roof could not be measured (" << ex.what() << ")\n";
  }
  using cuda_escape::gemm_roof_precision;
  for (const auto precision : {gemm_roof_precision::fp32, gemm_roof_precision::tf32, gemm_roof_precision::bf16}) {
    const char* name = cuda_escape::gemm_roof_name(precision);
    try {
      cuda_escape::cublas_gemm_probe probe(precision, options.gemm_roof_extent);
      out.push_back(timed_compute(name, probe.flops(), options.trials, [&] { probe.run(); }));
    } catch (const std::exception& ex) {
      std::cerr << "kstudy: the " << name << " roof could not be measured (" << ex.what() << ")\n";
    }
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

}  // namespace

std::vector<ceiling_record> measure_ceilings(const ceiling_options& options) {
  std::vector<ceiling_record> out;
  using device_space = Kokkos::DefaultExecutionSpace;
  using host_space = Kokkos::DefaultHostExecutionSpace;
  const std::int64_t n_device = options.device_bytes / std::int64_t(sizeof(float));
  {
    Kokkos::View<float*> a(Kokkos::view_alloc("kstudy::ceiling_a", Kokkos::WithoutInitializing), n_device);
    Kokkos::View<float*> b(Kokkos::view_alloc("kstudy::ceiling_b", Kokkos::WithoutInitializing), n_device);
    Kokkos::deep_copy(a, 1.0f);
    device_space space;
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
    // Kokkos 3.4 caps a RangePolicy reduction's grid at the block size, far below what saturates HBM;
    // the escape path's float4 read kernel measures the roof instead.
    out.push_back(timed("device_read", options.device_bytes, options.trials,
                        [&] { cuda_escape::read_buffer(a.data(), n_device); }));
#else
    out.push_back(timed("device_read", options.device_bytes, options.trials,
                        [&] { sum_view(space, "kstudy::ceiling::device_read", a); }));
#endif
    // The copy roof is the faster of cudaMemcpy (Kokkos deep_copy) and a float4 copy kernel, each also kept
    // under its own name: which one sets the roof is part of the record.
    const auto memcpy_copy = timed("device_copy_memcpy", 2 * options.device_bytes, options.trials, [&] {
      Kokkos::deep_copy(space, b, a);
      space.fence();
    });
    auto roof = memcpy_copy;
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
    const auto kernel_copy = timed("device_copy_kernel", 2 * options.device_bytes, options.trials,
                                   [&] { cuda_escape::copy_buffer(a.data(), b.data(), n_device); });
    out.push_back(kernel_copy);
    if (kernel_copy.seconds < roof.seconds) roof = kernel_copy;
#endif
    out.push_back(memcpy_copy);
    roof.name = "device_copy";
    out.push_back(roof);
  }
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  if (options.compute_roofs) measure_compute_roofs(options, out);
#endif
  {
    const std::int64_t n_host = options.host_bytes / std::int64_t(sizeof(float));
    Kokkos::View<float*, Kokkos::HostSpace> h(Kokkos::view_alloc("kstudy::ceiling_host", Kokkos::WithoutInitializing), n_host);
    Kokkos::deep_copy(h, 1.0f);
    host_space space;
    out.push_back(timed("host_read", options.host_bytes, options.trials,
                        [&] { sum_view(space, "kstudy::ceiling::host_read", h); }));
  }
#ifdef KOKKOS_ENABLE_CUDA
  {
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
    host_buffer source(host_memory::pageable, options.transfer_bytes), staging(host_memory::pinned, options.transfer_bytes);
    std::fill(source.data(), source.data() + options.transfer_bytes, std::byte{1});
    std::fill(staging.data(), staging.data() + options.transfer_bytes, std::byte{0});
    out.push_back(timed("host_stage_pageable_to_pinned", options.transfer_bytes, options.trials, [&] {
      const std::byte* from = source.data();
      std::byte* to = staging.data();
      const std::int64_t bytes = options.transfer_bytes, piece = std::int64_t(1) << 16;
      Kokkos::parallel_for(
          "kstudy::ceiling::host_stage", Kokkos::RangePolicy<host_space>(0, (bytes + piece - 1) / piece),
          [=](const std::int64_t p) {
            const std::int64_t begin = p * piece;
            std::memcpy(to + begin, from + begin, std::size_t(std::min(piece, bytes - begin)));
          });
      host_space().fence();
    }));
  }
#endif
  return out;
}

const ceiling_record* find_ceiling(const std::vector<ceiling_record>& ceilings, const std::string& name) {
  for (const auto& c : ceilings)
    if (c.name == name) return &c;
  return nullptr;
}

const ceiling_record* roof_for(const std::vector<ceiling_record>& ceilings, bool on_device) {
  return find_ceiling(ceilings, on_device ? "device_read" : "host_read");
}

}  // namespace kstudy
