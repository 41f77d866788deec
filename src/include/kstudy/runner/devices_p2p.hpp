#pragma once
// Peer-to-peer ceilings: device-to-device copy bandwidth between every ordered pair of a node's GPUs
// (cudaMemcpyPeerAsync), once with peer access enabled (NVLink or PCIe peer writes) and once without (the
// driver stages the copy through host memory), timed with CUDA events. Measured by `kstudy p2p` and by
// `kstudy run --devices` across more than one GPU, stored as ceilings p2p_copy_<src>_<dst>_{peer,staged}.
// The measurement is defined in the cuda flavour only (src/cuda/peer_copy.cu); the rest is plain C++.
#include <cstdint>
#include <string>
#include <vector>

#include "kstudy/records.hpp"

namespace kstudy {

struct peer_copy_result {
  int src = 0, dst = 0;    // CUDA device ordinals of the measuring process
  bool peer = false;       // true: cudaDeviceEnablePeerAccess both ways; false: without peer access (staged)
  std::int64_t bytes = 0;  // bytes per copy
  double seconds = 0.0;    // median over the trials
  double bytes_per_second = 0.0;
  std::string note;  // why there is no number (peer access not supported, a CUDA error), else empty
  bool measured() const { return note.empty() && seconds > 0.0; }
};

struct peer_copy_options {
  std::int64_t bytes = std::int64_t(1) << 30;
  int trials = 5;  // after one untimed warm-up copy
};

// Whether this build can measure (the cuda flavour).
bool peer_copy_available();

// Every ordered pair (src != dst) of `devices`, with and without peer access. Throws std::runtime_error in
// the cpu flavour, or when a device cannot be used at all. Leaves no peer access enabled and resets the
// devices it touched (cudaDeviceReset), so processes started next find them as before.
std::vector<peer_copy_result> measure_peer_copies(const std::vector<int>& devices, const peer_copy_options& options);

// p2p_copy_<src>_<dst>_peer | _staged.
std::string peer_copy_ceiling_name(int src, int dst, bool peer);

// The measured results as ceilings (clock: device_events); pairs without a number are left out.
std::vector<ceiling_record> peer_copy_ceilings(const std::vector<peer_copy_result>& results);

// Read back from ceilings: the results they hold (what the report and the CLI print as a matrix).
std::vector<peer_copy_result> peer_copies_from_ceilings(const std::vector<ceiling_record>& ceilings);

// Two GB/s matrices (rows: source, columns: destination), peer and staged, with "-" on the diagonal and "n/a"
// where a pair has no number; "one device: no pairs" for fewer than two devices.
std::string format_peer_matrix(const std::vector<peer_copy_result>& results, const std::vector<int>& devices);

}  // namespace kstudy
