// Peer-to-peer copy bandwidth (kstudy/runner/devices_p2p.hpp): cudaMemcpyPeerAsync between every ordered pair of
// devices, first without peer access (the driver stages the copy through host memory), then with
// cudaDeviceEnablePeerAccess both ways (direct NVLink or PCIe peer writes), timed with CUDA events on a
// stream of the source device: the median of the trials after one untimed warm-up copy.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/runner/devices_p2p.hpp"

namespace kstudy {
namespace {

void check(cudaError_t rc, const std::string& call) {
  if (rc != cudaSuccess) throw std::runtime_error(call + " failed: " + cudaGetErrorString(rc));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median seconds of one copy src -> dst. Throws on a CUDA error (the caller notes it for the pair).
double time_copies(int src, const void* from, int dst, void* to, std::size_t bytes, int trials) {
  check(cudaSetDevice(src), "cudaSetDevice(" + std::to_string(src) + ")");
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::vector<double> seconds;
  cudaError_t rc = cudaEventCreate(&start);
  if (rc == cudaSuccess) rc = cudaEventCreate(&stop);
  if (rc == cudaSuccess) rc = cudaMemcpyPeerAsync(to, dst, from, src, bytes, stream);
  if (rc == cudaSuccess) rc = cudaStreamSynchronize(stream);
  for (int t = 0; t < trials && rc == cudaSuccess; ++t) {
    float ms = 0.0f;
    rc = cudaEventRecord(start, stream);
    if (rc == cudaSuccess) rc = cudaMemcpyPeerAsync(to, dst, from, src, bytes, stream);
    if (rc == cudaSuccess) rc = cudaEventRecord(stop, stream);
    if (rc == cudaSuccess) rc = cudaEventSynchronize(stop);
    if (rc == cudaSuccess) rc = cudaEventElapsedTime(&ms, start, stop);
    seconds.push_back(ms * 1e-3);
  }
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  check(rc, "cudaMemcpyPeerAsync " + std::to_string(src) + " -> " + std::to_string(dst));
  return median(seconds);
}

// Peer access between a and b, both ways (on = enable, else disable); an access already in the state asked
// for is not an error.
cudaError_t set_peer_access(int a, int b, bool on) {
  for (const auto& [from, to] : {std::pair<int, int>{a, b}, std::pair<int, int>{b, a}}) {
    cudaError_t rc = cudaSetDevice(from);
    if (rc == cudaSuccess) rc = on ? cudaDeviceEnablePeerAccess(to, 0) : cudaDeviceDisablePeerAccess(to);
    if (rc == cudaErrorPeerAccessAlreadyEnabled || rc == cudaErrorPeerAccessNotEnabled) {
      cudaGetLastError();  // not sticky: clear it
      rc = cudaSuccess;
    }
    if (rc != cudaSuccess) return rc;
  }
  return cudaSuccess;
}

}  // namespace

bool peer_copy_available() { return true; }

std::vector<peer_copy_result> measure_peer_copies(const std::vector<int>& devices, const peer_copy_options& options) {
  std::vector<peer_copy_result> results;
  if (devices.size() < 2) return results;
  int previous = 0;
  cudaGetDevice(&previous);
  const auto bytes = static_cast<std::size_t>(options.bytes);
  // One buffer per device serves as the source of its copies and the destination of the others'.
  std::vector<void*> buffers(devices.size(), nullptr);
  const auto release = [&] {
    for (std::size_t i = 0; i < devices.size(); ++i) {
      if (cudaSetDevice(devices[i]) != cudaSuccess) continue;
      if (buffers[i] != nullptr) cudaFree(buffers[i]);
      cudaDeviceReset();
    }
    cudaSetDevice(previous);
  };
  try {
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const std::string d = std::to_string(devices[i]);
      check(cudaSetDevice(devices[i]), "cudaSetDevice(" + d + ")");
      check(cudaMalloc(&buffers[i], bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes on device " + d + ")");
      check(cudaMemset(buffers[i], static_cast<int>(i + 1), bytes), "cudaMemset on device " + d);
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize on device " + d);
    }
  } catch (...) {
    release();
    throw;
  }
  // Staged first: no peer access may be enabled while those copies run.
  for (const bool peer : {false, true})
    for (std::size_t s = 0; s < devices.size(); ++s)
      for (std::size_t d = 0; d < devices.size(); ++d) {
        if (s == d) continue;
        peer_copy_result r;
        r.src = devices[s];
        r.dst = devices[d];
        r.peer = peer;
        r.bytes = options.bytes;
        int forward = 0, backward = 0;
        if (peer && (cudaDeviceCanAccessPeer(&forward, r.src, r.dst) != cudaSuccess ||
                     cudaDeviceCanAccessPeer(&backward, r.dst, r.src) != cudaSuccess || !forward || !backward)) {
          r.note = "no peer access between these devices (cudaDeviceCanAccessPeer)";
          results.push_back(r);
          continue;
        }
        try {
          if (peer) check(set_peer_access(r.src, r.dst, true), "cudaDeviceEnablePeerAccess");
          r.seconds = time_copies(r.src, buffers[s], r.dst, buffers[d], bytes, std::max(1, options.trials));
          r.bytes_per_second = r.seconds > 0.0 ? static_cast<double>(r.bytes) / r.seconds : 0.0;
        } catch (const std::exception& e) {
          r.note = e.what();
        }
        if (peer) set_peer_access(r.src, r.dst, false);
        results.push_back(r);
      }
  release();
  return results;
}

}  // namespace kstudy
