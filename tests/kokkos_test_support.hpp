#pragma once
#include <gtest/gtest.h>

namespace kstudy::test {
extern bool g_kokkos_ready;
bool kokkos_ready();
bool gpu_present();
}  // namespace kstudy::test

// Skips (never passes) a test when this build's Kokkos could not be initialised here.
#define KSTUDY_REQUIRE_KOKKOS()                                                                \
  do {                                                                                         \
    if (!::kstudy::test::kokkos_ready())                                                       \
      GTEST_SKIP() << "Kokkos not initialised: the CUDA flavour needs a GPU and none is present"; \
  } while (0)
