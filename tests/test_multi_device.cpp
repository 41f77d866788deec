// A study over a node's GPUs without GPUs: the device list (fake devices through KSTUDY_FAKE_DEVICES, as
// the CUDA runtime would list them), --devices selection and health, the per-device processes run at once
// and merged, a failing device reported and resumed, replicas on every device told apart by the device
// every sample records, and the peer-to-peer ceilings' storage and matrix.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kstudy/runner/archive.hpp"
#include "kstudy/runner/devices_p2p.hpp"
#include "kstudy/runner/devices_run.hpp"
#include "kstudy/runner/merge.hpp"
#include "kstudy/platform/devices.hpp"
#include "scratch_dir.hpp"
#include "source_files.hpp"
#include "kstudy_test_paths.hpp"  // KSTUDY_SOURCE_DIR and the build's executables (tests/CMakeLists.txt)

namespace {

namespace fs = std::filesystem;
using namespace kstudy;
using platform::device_info;

const char* const k_three_devices =
    "GPU-aaaa-0,0000:01:00.0,Fake H200;GPU-bbbb-1,0000:02:00.0,Fake H200\n"
    "GPU-cccc-2,0000:03:00.0,Fake H200,fail: ECC errors";

// Sets an environment variable for a test's lifetime (the per-device processes inherit it).
class scoped_env {
 public:
  scoped_env(const char* name, const std::string& value) : m_name(name) {
    if (const char* old = std::getenv(name)) m_old = old, m_had = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~scoped_env() {
    if (m_had)
      ::setenv(m_name, m_old.c_str(), 1);
    else
      ::unsetenv(m_name);
  }

 private:
  const char* m_name;
  std::string m_old;
  bool m_had = false;
};

bool has(const std::vector<std::string>& argv, const std::vector<std::string>& run) {
  return std::search(argv.begin(), argv.end(), run.begin(), run.end()) != argv.end();
}

TEST(Devices, ParsesFakeList) {
  const auto devices = platform::parse_fake_devices(k_three_devices);
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[1].index, 1);
  EXPECT_EQ(devices[1].uuid, "GPU-bbbb-1");
  EXPECT_EQ(devices[1].pci_bus_id, "0000:02:00.0");
  EXPECT_EQ(devices[1].model, "Fake H200");
  EXPECT_TRUE(devices[1].healthy);
  EXPECT_FALSE(devices[2].healthy);
  EXPECT_EQ(devices[2].health_note, "fail: ECC errors");
  EXPECT_EQ(devices[2].describe(), "device 2 (Fake H200, 0000:03:00.0, GPU-cccc-2)");
  EXPECT_TRUE(platform::parse_fake_devices("").empty());
  EXPECT_THROW(platform::parse_fake_devices("GPU-a,0000:01:00.0"), std::invalid_argument);
  EXPECT_THROW(platform::parse_fake_devices(",bus,model"), std::invalid_argument);
}

TEST(Devices, FakeSourceIsSelectedByTheEnvironment) {
  scoped_env fake("KSTUDY_FAKE_DEVICES", k_three_devices);
  scoped_env visible("CUDA_VISIBLE_DEVICES", "GPU-bbbb-1");
  const auto source = platform::make_device_source();
  EXPECT_EQ(source->name(), "KSTUDY_FAKE_DEVICES");
  EXPECT_EQ(source->list().size(), 3u);
  ASSERT_TRUE(source->current().has_value());
  EXPECT_EQ(source->current()->uuid, "GPU-bbbb-1");
}

TEST(Devices, VisibleDeviceFollowsCudaVisibleDevices) {
  const auto devices = platform::parse_fake_devices(k_three_devices);
  EXPECT_EQ(platform::visible_device(devices, nullptr)->index, 0);  // unset: the first
  EXPECT_EQ(platform::visible_device(devices, "2,0")->index, 2);
  EXPECT_EQ(platform::visible_device(devices, "GPU-cccc-2")->index, 2);
  EXPECT_EQ(platform::visible_device(devices, "bbbb")->index, 1);  // a UUID prefix without "GPU-"
  EXPECT_FALSE(platform::visible_device(devices, "7").has_value());
  EXPECT_FALSE(platform::visible_device(devices, "GPU-ffff").has_value());
  EXPECT_FALSE(platform::visible_device({}, "0").has_value());
}

TEST(Devices, SelectsAllOrAList) {
  const auto devices = platform::parse_fake_devices(k_three_devices);
  EXPECT_EQ(platform::select_devices("all", devices).size(), 3u);
  const auto some = platform::select_devices("2, 0", devices);
  ASSERT_EQ(some.size(), 2u);
  EXPECT_EQ(some[0].index, 2);
  EXPECT_EQ(some[1].index, 0);
  EXPECT_THROW(platform::select_devices("0,3", devices), std::invalid_argument);
  EXPECT_THROW(platform::select_devices("1,1", devices), std::invalid_argument);
  EXPECT_THROW(platform::select_devices("first", devices), std::invalid_argument);
  EXPECT_THROW(platform::select_devices("", devices), std::invalid_argument);
}

TEST(Devices, FormatsUuidLikeNvidiaSmi) {
  const unsigned char bytes[16] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                                   0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77};
  EXPECT_EQ(platform::format_gpu_uuid(bytes), "GPU-01234567-89ab-cdef-0011-223344556677");
}

devices_request tiny_request(const test::scratch_dir& dir) {
  devices_request request;
  request.run.experiments = {std::string(KSTUDY_SOURCE_DIR) + "/tests/shard_tiny.json"};
  request.run.out = dir.file("node.h5");
  request.run.quiet = true;
  request.run.trials = 2;
  return request;
}

TEST(DevicesPlan, ShardsThePointsOverTheHealthyDevices) {
  test::scratch_dir dir("devices");
  auto request = tiny_request(dir);
  request.run.variants = {"composed"};
  const auto plan = plan_devices(request, platform::parse_fake_devices(k_three_devices), "/bin/kstudy");
  ASSERT_EQ(plan.parts.size(), 2u);
  ASSERT_EQ(plan.left_out.size(), 1u);
  EXPECT_EQ(plan.left_out[0].uuid, "GPU-cccc-2");
  for (int k = 0; k < 2; ++k) {
    const auto& part = plan.parts[static_cast<std::size_t>(k)];
    EXPECT_EQ(part.shard.text(), std::to_string(k) + "/2");
    EXPECT_EQ(part.argv[0], "/bin/kstudy");
    EXPECT_EQ(part.argv[1], "run");
    EXPECT_TRUE(has(part.argv, {"--shard", part.shard.text()}));
    EXPECT_TRUE(has(part.argv, {"--out", dir.file("node.h5.devices/device-" + std::to_string(k) + ".h5")}));
    EXPECT_TRUE(has(part.argv, {"--trials", "2"}));
    EXPECT_TRUE(has(part.argv, {"--variants", "composed"}));
    EXPECT_TRUE(has(part.argv, {"--quiet"}));
    ASSERT_EQ(part.env.size(), 1u);
    EXPECT_EQ(part.env[0].first, "CUDA_VISIBLE_DEVICES");
    EXPECT_EQ(part.env[0].second, k == 0 ? "GPU-aaaa-0" : "GPU-bbbb-1");
  }
  request.replicate = true;
  request.devices = "1";
  const auto replicas = plan_devices(request, platform::parse_fake_devices(k_three_devices), "/bin/kstudy");
  ASSERT_EQ(replicas.parts.size(), 1u);
  EXPECT_FALSE(has(replicas.parts[0].argv, {"--shard"}));
  EXPECT_EQ(replicas.parts[0].device.uuid, "GPU-bbbb-1");
}

TEST(DevicesPlan, RefusesWhatCannotRun) {
  test::scratch_dir dir("devices");
  auto request = tiny_request(dir);
  const auto devices = platform::parse_fake_devices(k_three_devices);
  request.devices = "2";  // the one that fails its health check
  EXPECT_THROW(plan_devices(request, devices, "kstudy"), std::runtime_error);
  request.devices = "all";
  request.run.shard = {0, 2};
  EXPECT_THROW(plan_devices(request, devices, "kstudy"), std::invalid_argument);
  request.run.shard = {};
  fs::create_directories(dir / "node.h5.devices");
  std::ofstream(dir.file("node.h5.devices/device-0.h5")) << "an earlier run";
  EXPECT_THROW(plan_devices(request, devices, "kstudy"), std::runtime_error);  // neither --resume nor --overwrite
  request.run.overwrite = true;
  EXPECT_TRUE(has(plan_devices(request, devices, "kstudy").parts[0].argv, {"--overwrite"}));
}

// kstudy itself, behind a script that fails on the second device while the marker file exists.
std::string failing_wrapper(const test::scratch_dir& dir) {
  const auto path = dir.file("kstudy-wrapper.sh");
  std::ofstream(path) << "#!/bin/sh\n"
                      << "if [ \"$CUDA_VISIBLE_DEVICES\" = GPU-bbbb-1 ] && [ -e '" << dir.file("fail-marker")
                      << "' ]; then echo 'simulated device failure' >&2; exit 3; fi\n"
                      << "exec '" << kstudy_exe() << "' \"$@\"\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

std::map<std::string, int> samples_per_device(const std::string& archive) {
  std::map<std::string, int> out;
  for (const auto& s : read_samples(archive, "shard_tiny")) {
    EXPECT_EQ(s.device_model, "Fake H200");
    EXPECT_FALSE(s.device_pci_bus_id.empty());
    ++out[s.device_uuid];
  }
  return out;
}

TEST(DevicesRun, AFailedDeviceIsReportedAndResumed) {
  // The device processes are real kstudy runs: a cuda flavour's child needs the GPU the fake UUID names.
  if (platform::make_device_source()->name() == "cuda runtime")
    GTEST_SKIP() << "fake devices run end to end in the cpu flavour only";
  test::scratch_dir dir("devices");
  scoped_env fake("KSTUDY_FAKE_DEVICES", k_three_devices);
  scoped_env ceilings("KSTUDY_CEILING_BYTES", "33554432");
  const auto exe = failing_wrapper(dir);
  std::ofstream(dir.file("fail-marker")) << "";
  auto request = tiny_request(dir);
  std::ostringstream out, err;
  EXPECT_NE(run_on_devices(request, exe, out, err), 0);
  EXPECT_NE(err.str().find("device 2 (Fake H200, 0000:03:00.0, GPU-cccc-2) failed its health check"), std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("device 1 (Fake H200, 0000:02:00.0, GPU-bbbb-1) failed (exit status 3)"), std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("simulated device failure"), std::string::npos) << err.str();
  EXPECT_FALSE(fs::exists(request.run.out)) << "no merged archive when a device failed";
  EXPECT_EQ(read_metadata(dir.file("node.h5.devices/device-0.h5")).root.at("complete"), "true");

  // Resumed: the finished device is kept, the failed one completes, and the merge holds both.
  fs::remove(dir.file("fail-marker"));
  request.run.resume = true;
  std::ostringstream out2, err2;
  ASSERT_EQ(run_on_devices(request, exe, out2, err2), 0) << err2.str();
  EXPECT_NE(err2.str().find("device-0.h5 (complete: kept)"), std::string::npos) << err2.str();
  const auto root = read_metadata(request.run.out).root;
  EXPECT_EQ(root.at("complete"), "true");
  EXPECT_EQ(root.at("merged_shards"), "0,1");
  const auto per_device = samples_per_device(request.run.out);
  ASSERT_EQ(per_device.size(), 2u);
  EXPECT_GT(per_device.at("GPU-aaaa-0"), 0);
  EXPECT_GT(per_device.at("GPU-bbbb-1"), 0);
}

TEST(DevicesRun, ReplicasRunEveryPointOnEveryDevice) {
  // The device processes are real kstudy runs: a cuda flavour's child needs the GPU the fake UUID names.
  if (platform::make_device_source()->name() == "cuda runtime")
    GTEST_SKIP() << "fake devices run end to end in the cpu flavour only";
  test::scratch_dir dir("devices");
  scoped_env fake("KSTUDY_FAKE_DEVICES", k_three_devices);
  scoped_env ceilings("KSTUDY_CEILING_BYTES", "33554432");
  auto request = tiny_request(dir);
  request.devices = "0,1";
  request.replicate = true;
  std::ostringstream out, err;
  ASSERT_EQ(run_on_devices(request, kstudy_exe(), out, err), 0) << err.str();
  EXPECT_EQ(read_metadata(request.run.out).root.at("device_replicas"), "true");
  const auto per_device = samples_per_device(request.run.out);
  ASSERT_EQ(per_device.size(), 2u);
  EXPECT_EQ(per_device.at("GPU-aaaa-0"), per_device.at("GPU-bbbb-1"));
  // Each replica is the whole run.
  EXPECT_EQ(static_cast<std::size_t>(per_device.at("GPU-aaaa-0")),
            read_samples(dir.file("node.h5.devices/device-0.h5"), "shard_tiny").size());

  // The peer-to-peer ceilings go into every experiment's ceilings of the merged archive.
  merge_request merge;
  merge.out = dir.file("with-p2p.h5");
  merge.shards = {dir.file("node.h5.devices/device-0.h5"), dir.file("node.h5.devices/device-1.h5")};
  merge.device_replicas = true;
  peer_copy_result r;
  r.src = 0, r.dst = 1, r.peer = true, r.bytes = 1 << 30, r.seconds = 0.01, r.bytes_per_second = 1e11;
  merge.extra_ceilings = peer_copy_ceilings({r});
  ASSERT_TRUE(merge_shards(merge).written);
  const auto stored = peer_copies_from_ceilings(read_ceilings(merge.out, "shard_tiny"));
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].src, 0);
  EXPECT_EQ(stored[0].dst, 1);
  EXPECT_TRUE(stored[0].peer);
  EXPECT_DOUBLE_EQ(stored[0].bytes_per_second, 1e11);
}

TEST(DevicesRun, NoDevicesIsOneLine) {
  if (platform::make_device_source()->name() == "cuda runtime") GTEST_SKIP() << "the cuda flavour lists real GPUs";
  test::scratch_dir dir("devices");
  std::ostringstream out, err;
  EXPECT_NE(run_on_devices(tiny_request(dir), kstudy_exe(), out, err), 0);
  EXPECT_NE(err.str().find("no GPU found"), std::string::npos) << err.str();
}

TEST(PeerCopy, CeilingsAndMatrix) {
  std::vector<peer_copy_result> results;
  for (const bool peer : {false, true})
    for (const auto& [s, d] : {std::pair<int, int>{0, 1}, std::pair<int, int>{1, 0}}) {
      peer_copy_result r;
      r.src = s, r.dst = d, r.peer = peer, r.bytes = 1 << 30;
      if (peer && s == 1) {
        r.note = "no peer access between these devices (cudaDeviceCanAccessPeer)";
      } else {
        r.seconds = peer ? 0.004 : 0.05;
        r.bytes_per_second = static_cast<double>(r.bytes) / r.seconds;
      }
      results.push_back(r);
    }
  EXPECT_EQ(peer_copy_ceiling_name(3, 5, true), "p2p_copy_3_5_peer");
  EXPECT_EQ(peer_copy_ceiling_name(5, 3, false), "p2p_copy_5_3_staged");
  const auto ceilings = peer_copy_ceilings(results);
  ASSERT_EQ(ceilings.size(), 3u);  // the pair without a number is left out
  for (const auto& c : ceilings) EXPECT_EQ(c.clock, timer_kind::device_events);
  const auto back = peer_copies_from_ceilings(ceilings);
  ASSERT_EQ(back.size(), 3u);
  const auto matrix = format_peer_matrix(results, {0, 1});
  EXPECT_NE(matrix.find("peer access enabled"), std::string::npos) << matrix;
  EXPECT_NE(matrix.find("268.4"), std::string::npos) << matrix;  // 2^30 B in 4 ms
  EXPECT_NE(matrix.find("21.5"), std::string::npos) << matrix;   // 2^30 B in 50 ms, staged
  EXPECT_NE(matrix.find("n/a"), std::string::npos) << matrix;
  EXPECT_NE(matrix.find("1 -> 0 (peer): no peer access"), std::string::npos) << matrix;
  EXPECT_EQ(format_peer_matrix({}, {0}), "one device: no pairs\n");
  if (!peer_copy_available()) {
    EXPECT_THROW(measure_peer_copies({0, 1}, {}), std::runtime_error);
  }
}

}  // namespace
