// One GoogleTest main for the whole suite: Kokkos is initialised once around RUN_ALL_TESTS.
// In the CUDA flavour Kokkos 3.4 aborts at initialisation without a GPU, so where none is present
// Kokkos stays uninitialised and every test that needs it reports itself skipped (never passed).
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "kokkos_test_support.hpp"
#include "kstudy/runner/kokkos_session.hpp"

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kstudy::test {
bool g_kokkos_ready = false;
bool kokkos_ready() { return g_kokkos_ready; }
bool gpu_present() {
#ifdef KOKKOS_ENABLE_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
#else
  return false;
#endif
}
}  // namespace kstudy::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::strncmp(argv[i], "--gtest_list_tests", 18) == 0;
  if (listing) return RUN_ALL_TESTS();
#ifdef KOKKOS_ENABLE_CUDA
  const bool can_initialize = kstudy::test::gpu_present();
#else
  const bool can_initialize = true;
#endif
  std::optional<kstudy::kokkos_session> guard;
  if (can_initialize) {
    guard.emplace(argc, argv);
    kstudy::test::g_kokkos_ready = true;
  }
  const int rc = RUN_ALL_TESTS();
  return rc;
}
