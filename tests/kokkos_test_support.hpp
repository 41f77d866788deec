#pragma once
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "kstudy/variant.hpp"

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

namespace kstudy::test {

// Ids of the registered variants `keep` accepts, for tests parameterised over every variant of a build.
template <class Keep>
std::vector<std::string> variant_ids(Keep keep) {
  std::vector<std::string> ids;
  for (const auto* v : variant_registry::instance().all())
    if (keep(v->info)) ids.push_back(v->info.id());
  return ids;
}

// A test name GoogleTest accepts for a variant id (name@backend -> name_backend).
inline std::string variant_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (auto& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

}  // namespace kstudy::test
