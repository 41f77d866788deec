// The foundation: Kokkos initialises with the backends this flavour promises, and Views round-trip
// between the host and the default memory space in both layouts.
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>

#include "kokkos_test_support.hpp"
#include "kstudy/build_info.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/runner/environment.hpp"
#include "kstudy/runner/kokkos_session.hpp"

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

// Kokkos' device-wide settings do not leak into what is measured: after the session started (the test main
// starts it as kstudy does), the device's cache preference is the default again, whatever Kokkos set, and both
// are recorded for the archive.
TEST(Environment, KokkosLeavesTheDeviceCachePreferenceAtItsDefault) {
  KSTUDY_REQUIRE_KOKKOS();
  const auto& settings = kstudy::device_settings_after_kokkos();
#ifdef KOKKOS_ENABLE_CUDA
  cudaFuncCache config = cudaFuncCachePreferShared;
  ASSERT_EQ(cudaDeviceGetCacheConfig(&config), cudaSuccess);
  EXPECT_EQ(config, cudaFuncCachePreferNone);
  EXPECT_EQ(settings.cache_config_measured, "prefer_none");
  EXPECT_FALSE(settings.cache_config_set_by_kokkos.empty());
#if KOKKOS_VERSION < 40000
  // Kokkos 3.4 sets "prefer shared" for the whole device at initialisation (Kokkos_Cuda_Instance.cpp).
  EXPECT_EQ(settings.cache_config_set_by_kokkos, "prefer_shared");
#endif
  // Restoring again is harmless and keeps the record.
  kstudy::restore_device_defaults_after_kokkos();
  EXPECT_EQ(settings.cache_config_measured, "prefer_none");
#else
  EXPECT_TRUE(settings.cache_config_set_by_kokkos.empty());
  EXPECT_TRUE(settings.cache_config_measured.empty());
#endif
}

TEST(Environment, KokkosHasTheExpectedBackends) {
  KSTUDY_REQUIRE_KOKKOS();
  EXPECT_TRUE(Kokkos::is_initialized());
  std::ostringstream config;
  Kokkos::print_configuration(config, true);
#ifdef KOKKOS_ENABLE_CUDA
  EXPECT_NE(config.str().find("KOKKOS_ENABLE_CUDA"), std::string::npos) << config.str();
  EXPECT_EQ(std::string(Kokkos::DefaultExecutionSpace::name()), "Cuda");
#else
  EXPECT_TRUE((std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::OpenMP> ||
               std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::Serial>));
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  EXPECT_GE(Kokkos::OpenMP().concurrency(), 1);
#endif
}

template <class Layout>
void round_trip() {
  const int rows = 37, features = 5;  // odd sizes on purpose
  Kokkos::View<float**, Layout, Kokkos::HostSpace> host("host", rows, features);
  for (int r = 0; r < rows; ++r)
    for (int f = 0; f < features; ++f) host(r, f) = 1000.0f * r + f;
  Kokkos::View<float**, Layout> device("device", rows, features);
  Kokkos::deep_copy(device, host);
  // Touch on the device so the copy is not a host no-op.
  Kokkos::parallel_for(
      "kstudy::test::increment", Kokkos::RangePolicy<>(0, rows), KOKKOS_LAMBDA(const int r) {
        for (int f = 0; f < features; ++f) device(r, f) += 0.5f;
      });
  Kokkos::View<float**, Layout, Kokkos::HostSpace> back("back", rows, features);
  Kokkos::deep_copy(back, device);
  for (int r = 0; r < rows; ++r)
    for (int f = 0; f < features; ++f) ASSERT_EQ(back(r, f), 1000.0f * r + f + 0.5f) << r << "," << f;
}

// What `kstudy run --resume` and `kstudy merge` compare: every build key collect_metadata writes, equal to this
// build's own where nothing differs, each difference named with both values.
TEST(Environment, BuildDifferenceNamesWhatDiffers) {
  int argc = 1;
  char name[] = "kstudy";
  char* argv[] = {name, nullptr};
  const auto written = kstudy::collect_metadata(argc, argv);
  auto archive = written;
  archive.root["schema_version"] = kstudy::archive_schema_version;  // the sink writes it, not collect_metadata
  const bool dirty = std::string(kstudy::build_info::git_dirty) == "true";
  for (const auto& key : kstudy::build_keys()) {
    const auto& map = key.environment ? archive.environment : archive.root;
    const bool written_here = std::string(key.name) != "git_diff_sha256" || dirty;  // a clean tree has no diff
    if (written_here) {
      EXPECT_EQ(map.count(key.name), 1u) << key.name << " is not written by collect_metadata";
    }
  }
  EXPECT_EQ(kstudy::build_difference(archive), "");

  auto other = archive;
  other.root["git_commit"] = std::string(40, '0');
  // A version no Kokkos has had: a real one (3.4.1) is this build's own under the Kokkos 3.4.01 CI stage.
  other.environment["kokkos_version"] = "0.0.0";
  const auto differs = kstudy::build_difference(other);
  EXPECT_NE(differs.find("git_commit: " + std::string(40, '0') + " there, " + kstudy::build_info::git_commit +
                         " in this build"),
            std::string::npos)
      << differs;
  EXPECT_NE(differs.find("kokkos_version: 0.0.0 there"), std::string::npos) << differs;
  other = archive;
  other.environment.erase("build_type");
  EXPECT_NE(kstudy::build_difference(other).find("build_type: (none) there"), std::string::npos);
}

TEST(Environment, ViewRoundTripRowMajor) {
  KSTUDY_REQUIRE_KOKKOS();
  round_trip<Kokkos::LayoutRight>();
}

TEST(Environment, ViewRoundTripFeatureMajor) {
  KSTUDY_REQUIRE_KOKKOS();
  round_trip<Kokkos::LayoutLeft>();
}

}  // namespace
