// The cuDNN attention variants (variants/attention/attention_cudnn.cu): declared in every build for the four
// bf16 / fp16, unmasked / causal operations as the vendor rung of attention_cuda; they refuse a head_dim over
// cuDNN's 256 before touching the device; and, where a GPU is present, each either passes the gate at odd
// shapes (tokens not a multiple of any tile, head_dim 64 and 128, one head and several, head_dim 7 and 33
// zero-padded to 8 and 40) or reports itself unavailable with cuDNN's reason (skipped, never passed). A GPU of
// compute capability 8.0 or later with cuDNN 9 loaded must find an engine: there, "no cuDNN engine" means the
// graph is built wrong and fails the test. KSTUDY_CUDNN_LOG=1 prints the graph-building steps. test_attention.cpp
// runs every attention variant, these included, through the gate at its own small shapes, the one-shot and
// queued paths and the poison check; the shapes here add head_dim 128 and longer, odd token counts.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/attention.hpp"
#include "kokkos_test_support.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/variant_unavailable.hpp"

#ifdef KSTUDY_HAVE_CUDA_VARIANTS
#include <cuda_runtime.h>
#endif

namespace {

using kstudy::attention::attention_mask;
using kstudy::attention::attention_precision;

struct cudnn_case {
  attention_precision precision;
  attention_mask mask;
};
const cudnn_case k_cases[] = {{attention_precision::bf16, attention_mask::none},
                              {attention_precision::fp16, attention_mask::none},
                              {attention_precision::bf16, attention_mask::causal},
                              {attention_precision::fp16, attention_mask::causal}};
constexpr std::uint64_t k_seed = 20261202;

std::string variant_name(const cudnn_case& c) {
  return std::string(kstudy::attention::operation_name(c.precision, c.mask)) + "_cudnn";
}

// The registered variant, or nullptr where this build only declares it.
const kstudy::registered_variant* built(const cudnn_case& c) {
  const auto* entry = kstudy::variant_registry::instance().find(variant_name(c) + "@cuda");
  return entry != nullptr && entry->make ? entry : nullptr;
}

// Whether this GPU is one cuDNN 9's flash attention runs on (compute capability 8.0 or later).
bool flash_capable_gpu() {
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
  int device = 0;
  cudaDeviceProp properties{};
  return cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&properties, device) == cudaSuccess &&
         properties.major >= 8;
#else
  return false;
#endif
}

TEST(AttentionCudnn, DeclaredAsTheVendorRungOfEveryBf16AndFp16Operation) {
  const auto& registry = kstudy::variant_registry::instance();
  for (const auto& c : k_cases) {
    const std::string id = variant_name(c) + "@cuda";
    const auto* entry = registry.find(id);
    const auto declared = registry.match_declared(id);
    ASSERT_TRUE(entry != nullptr || declared.size() == 1u) << id;
    const auto& info = entry != nullptr ? entry->info : *declared.front();
    EXPECT_EQ(info.operation, kstudy::attention::operation_name(c.precision, c.mask)) << id;
    EXPECT_EQ(info.family, "attention_cuda") << id;
    EXPECT_EQ(info.implementation, kstudy::implementation::vendor_library) << id;
    EXPECT_EQ(info.rung, 0) << id;
    EXPECT_TRUE(info.on_device) << id;
    EXPECT_EQ(info.layout, kstudy::table_layout::row_major) << id;
    EXPECT_NE(info.description.find("cuDNN"), std::string::npos) << id;
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
    EXPECT_NE(entry, nullptr) << id << " is compiled in every CUDA build";
#endif
  }
}

// Refused before the library or the device is touched, so this runs without a GPU too.
TEST(AttentionCudnn, RefusesAHeadDimOverCudnnsLimit) {
  for (const auto& c : k_cases) {
    const auto* entry = built(c);
    if (entry == nullptr) GTEST_SKIP() << variant_name(c) << " is not in this build";
    kstudy::point_inputs inputs(kstudy::operation_of(*entry), {1, 3, 264}, 0, k_seed);
    auto impl = entry->make();
    try {
      impl->prepare(inputs.data(entry->info.layout), {});
      ADD_FAILURE() << variant_name(c) << " accepted head_dim 264";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
    }
  }
}

TEST(AttentionCudnn, PassesTheGateAtOddShapesOrSaysWhyNot) {
  if (!kstudy::test::gpu_present()) GTEST_SKIP() << "no GPU";
  const std::vector<std::vector<std::int64_t>> shapes = {{1, 1, 64},    {3, 1000, 64}, {2, 777, 128},
                                                         {1, 129, 128}, {2, 65, 7},    {1, 300, 33}};
  for (const auto& c : k_cases) {
    const auto* entry = built(c);
    if (entry == nullptr) GTEST_SKIP() << variant_name(c) << " is not in this build";
    const auto& op = kstudy::operation_of(*entry);
    // The first shape tells whether cuDNN runs here at all.
    std::string unavailable;
    try {
      kstudy::point_inputs probe(op, shapes.front(), 0, k_seed);
      entry->make()->prepare(probe.data(entry->info.layout), {});
    } catch (const kstudy::variant_unavailable& e) {
      unavailable = e.what();
    }
    if (!unavailable.empty()) {
      const bool engine_refused = unavailable.find("no cuDNN engine") != std::string::npos;
      if (engine_refused && flash_capable_gpu())
        ADD_FAILURE() << variant_name(c) << ": cuDNN 9 on this GPU refused the graph: " << unavailable;
      GTEST_SKIP() << variant_name(c) << " unavailable: " << unavailable;
    }
    for (const auto& e : shapes)
      kstudy::test::expect_gate_passes(op, *entry, e, k_seed + std::uint64_t(e[0] * 131 + e[1] * 7 + e[2]));
    // The engine choice is recorded.
    kstudy::point_inputs inputs(op, {1, 64, 64}, 0, k_seed);
    auto impl = entry->make();
    impl->prepare(inputs.data(entry->info.layout), {});
    bool has_version = false, has_engine = false;
    for (const auto& [name, value] : impl->tuned_parameters()) {
      has_version |= name == "cudnn_version" && value >= 90000;
      has_engine |= name == "engine";
    }
    EXPECT_TRUE(has_version && has_engine) << variant_name(c);
  }
}

}  // namespace
