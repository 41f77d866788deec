#pragma once
// kstudy run --devices: one study over the GPUs of a node, one `kstudy run` process per GPU
// (CUDA_VISIBLE_DEVICES naming it), all at once, each into its own archive in a parts folder, merged into
// OUT as the shards of a Slurm array are (kstudy/runner/merge.hpp). The points are sharded across the devices, or,
// with --replicate-on-every-device, every device runs every point (device-to-device variance).
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/platform/devices.hpp"
#include "kstudy/study.hpp"

namespace kstudy {

struct devices_request {
  run_request run;              // what each device runs; run.out is the merged archive
  std::string devices = "all";  // --devices: all | 0,2,3
  bool replicate = false;       // --replicate-on-every-device
  std::string parts_dir;        // the per-device archives and logs (default: OUT.devices)
  bool peer_copies = true;      // measure the peer-to-peer ceilings when more than one device runs
  std::string command_line;
};

// One device's process.
struct device_part {
  platform::device_info device;
  shard_spec shard;     // its slice of the units (replicas: K/N names the replica, every unit runs)
  std::string archive;  // PARTS/device-K.h5
  std::string log;      // PARTS/device-K.log: its stdout and stderr
  bool done = false;    // --resume: the archive is complete already; not run again
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
};

struct devices_plan {
  std::vector<device_part> parts;
  std::vector<platform::device_info> left_out;  // selected, but failed their health check
};

// The default parts folder: OUT.devices beside OUT.
std::string default_parts_dir(const std::string& out);

// Which devices run what, and how: pure (reads the parts folder on --resume only). Throws
// std::invalid_argument for a bad --devices, std::runtime_error when no selected device is healthy or the
// parts folder holds another run's archives.
devices_plan plan_devices(const devices_request& request, const std::vector<platform::device_info>& listed,
                          const std::string& self_exe);

// Runs the plan's processes concurrently, waits for all, merges their archives into run.out when every one
// succeeded (and never leaves a partial OUT), and says per device what went wrong. Returns the exit code:
// 0, or non-zero when any device failed.
int run_on_devices(const devices_request& request, const std::string& self_exe, std::ostream& out, std::ostream& err);

}  // namespace kstudy
