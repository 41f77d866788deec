#pragma once
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/host_io.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/variant_unavailable.hpp"

namespace kstudy::test {
extern bool g_kokkos_ready;
bool kokkos_ready();
bool gpu_present();
// A registered operation by name; throws std::logic_error naming it when it is not registered.
inline const operation& registered_operation(const std::string& name) {
  const auto* found = operation_registry::instance().find(name);
  if (found == nullptr) throw std::logic_error(name + " is not registered");
  return *found;
}

// The one-shot path (poison, upload, run, download; twice, so buffers are reused) and the queued path
// (enqueue_run, wait, download) of one variant both leave outputs that pass the operation's gate.
inline void expect_one_shot_and_queued_paths_pass(const operation& op, const registered_variant& entry,
                                                  const std::vector<std::int64_t>& extents, std::uint64_t seed) {
  point_inputs inputs(op, extents, 0, seed);
  const auto& data = inputs.data(entry.info.layout);
  auto impl = entry.make();
  impl->prepare(data, {});
  const host_inputs in(data, host_memory::pageable);
  host_outputs out(op, data.shape());
  for (int round = 0; round < 2; ++round) {
    impl->poison();
    op.poison(out.spans());
    impl->upload(in.spans());
    impl->run();
    impl->download(out.spans());
    const auto g = op.check(data, inputs.reference(), out.spans());
    EXPECT_TRUE(g.passed) << entry.info.id() << " round " << round << ": " << g.message;
  }
  impl->poison();
  op.poison(out.spans());
  impl->enqueue_run();
  impl->wait();
  impl->download(out.spans());
  const auto g = op.check(data, inputs.reference(), out.spans());
  EXPECT_TRUE(g.passed) << entry.info.id() << " queued: " << g.message;
}

// A fresh instance of the variant passes the gate at one shape (seed: the shape's own, so shapes differ).
inline void expect_gate_passes(const operation& op, const registered_variant& entry,
                               const std::vector<std::int64_t>& extents, std::uint64_t seed) {
  point_inputs inputs(op, extents, 0, seed);
  auto impl = entry.make();
  const auto g = prepare_and_gate(*impl, entry, inputs, {});
  std::string at;
  for (const auto e : extents) at += (at.empty() ? "" : "x") + std::to_string(e);
  EXPECT_TRUE(g.passed) << entry.info.id() << " at " << at << ": " << g.message;
}

// The gate's verdict on what a prepared, poisoned variant downloads when nothing runs, over host arrays
// of zeros (not the host poison, so only the variant's poison can fail them).
inline gate_result poisoned_outputs_gate(const operation& op, const registered_variant& entry,
                                         const std::vector<std::int64_t>& extents, std::uint64_t seed) {
  point_inputs inputs(op, extents, 0, seed);
  const auto& data = inputs.data(entry.info.layout);
  auto impl = entry.make();
  impl->prepare(data, {});
  impl->poison();
  host_outputs out(op, data.shape());
  for (const auto& span : out.spans()) std::memset(span.data, 0, static_cast<std::size_t>(span.bytes));
  impl->download(out.spans());
  return op.check(data, inputs.reference(), out.spans());
}

}  // namespace kstudy::test

// Skips (never passes) a test when this build's Kokkos could not be initialised here.
#define KSTUDY_REQUIRE_KOKKOS()                                                                   \
  do {                                                                                            \
    if (!::kstudy::test::kokkos_ready())                                                          \
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

// The fixture of a test parameterised over variant ids (derive an empty one per suite): the registered
// variant, its operation, and a skip where this build cannot run it (Kokkos not initialised; a device
// variant without a GPU).
class registered_variant_test : public ::testing::TestWithParam<std::string> {
 protected:
  const registered_variant& entry() const { return *variant_registry::instance().find(GetParam()); }
  const operation& op() const { return operation_of(entry()); }
  void SetUp() override {
    KSTUDY_REQUIRE_KOKKOS();
    if (entry().info.on_device && !gpu_present()) GTEST_SKIP() << "no GPU";
    const std::string why = unavailable_reason(entry());
    if (!why.empty()) GTEST_SKIP() << entry().info.id() << ": " << why;
  }

 private:
  // Why this machine cannot run the variant at all (variant_unavailable from a prepare() at extents of 1), or ""
  // where it can; asked once per variant and process, not once per test. Any other error of this probe is left
  // for the tests themselves to report.
  static std::string unavailable_reason(const registered_variant& v) {
    static std::map<std::string, std::string> known;
    const auto found = known.find(v.info.id());
    if (found != known.end()) return found->second;
    std::string why;
    try {
      const auto& o = operation_of(v);
      point_inputs inputs(o, std::vector<std::int64_t>(o.info().axes.size(), 1), 0, 1);
      v.make()->prepare(inputs.data(v.info.layout), {});
    } catch (const variant_unavailable& unavailable) {
      why = unavailable.what();
    } catch (const std::exception&) {
    }
    return known[v.info.id()] = why;
  }
};

// A test name GoogleTest accepts for a variant id (name@backend -> name_backend).
inline std::string variant_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (auto& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

}  // namespace kstudy::test
