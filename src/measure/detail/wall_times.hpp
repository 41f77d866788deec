// The host-clock timing loop the roofs and the probes share.
#pragma once

#include <utility>
#include <vector>

#include "kstudy/timers.hpp"

namespace kstudy::detail {

// `warmups` untimed runs of op (first touch, module load), then the seconds of each of `trials` runs on the
// host clock. op fences its own work, as host variants and resident_wall time theirs.
template <class F>
std::vector<double> wall_times(int warmups, int trials, F&& op) {
  for (int w = 0; w < warmups; ++w) op();
  std::vector<double> out;
  for (int t = 0; t < trials; ++t) {
    wall_timer timer;
    timer.start();
    op();
    out.push_back(timer.seconds());
  }
  return out;
}

}  // namespace kstudy::detail
