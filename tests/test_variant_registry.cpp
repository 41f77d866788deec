// The variant registry's declarations and bindings: a variant whose code only some builds compile is declared
// in every build (its fields) and bound to its class where the code is compiled, in either static
// initialisation order. The queries that return runnable variants see bound ones only; declared_elsewhere()
// and match_declared() the rest, which is how a CPU build knows the CUDA variants as not in this build.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/experiment.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/platform/devices.hpp"
#include "kstudy/study.hpp"
#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/variant_unavailable.hpp"

namespace {

using kstudy::variant_info;
using kstudy::variant_registry;

// A variant that is never run: the tests only construct it through its factory.
class idle_variant final : public kstudy::variant {
 public:
  void prepare(const kstudy::problem_data&, const kstudy::run_options&) override {}
  void run() override {}
  void upload(const std::vector<kstudy::host_span>&) override {}
  void download(const std::vector<kstudy::host_span>&) override {}
  void poison() override {}
};

kstudy::variant_factory idle_factory() {
  return [] { return std::make_unique<idle_variant>(); };
}

variant_info info_of(const std::string& name, const std::string& family = "fam", const std::string& backend = "cuda") {
  variant_info info;
  info.name = name;
  info.operation = "transpose";
  info.family = family;
  info.backend = backend;
  return info;
}

std::vector<std::string> ids(const std::vector<const kstudy::registered_variant*>& variants) {
  std::vector<std::string> out;
  for (const auto* v : variants) out.push_back(v->info.id());
  return out;
}

std::vector<std::string> ids(const std::vector<const variant_info*>& infos) {
  std::vector<std::string> out;
  for (const auto* info : infos) out.push_back(info->id());
  return out;
}

TEST(VariantDeclarations, DeclaredWithoutAFactoryIsNotRunnable) {
  variant_registry registry;
  registry.declare(info_of("b"));
  registry.declare(info_of("a", "other"));
  registry.add(info_of("c", "fam", "serial"), idle_factory());
  EXPECT_EQ(ids(registry.all()), std::vector<std::string>{"c@serial"});
  EXPECT_EQ(ids(registry.of_operation("transpose")), std::vector<std::string>{"c@serial"});
  EXPECT_EQ(registry.find("b@cuda"), nullptr);
  EXPECT_EQ(ids(registry.match("fam")), std::vector<std::string>{"c@serial"});
  EXPECT_EQ(ids(registry.declared_elsewhere()), (std::vector<std::string>{"a@cuda", "b@cuda"}));
  // Names and families, on any backend or on one, as match() takes them.
  EXPECT_EQ(ids(registry.match_declared("fam")), std::vector<std::string>{"b@cuda"});
  EXPECT_EQ(ids(registry.match_declared("a@cuda")), std::vector<std::string>{"a@cuda"});
  EXPECT_TRUE(registry.match_declared("a@serial").empty());
  EXPECT_TRUE(registry.match_declared("c").empty());  // bound: match() has it
}

TEST(VariantDeclarations, BindAfterDeclare) {
  variant_registry registry;
  registry.declare(info_of("a"));
  registry.bind("a@cuda", idle_factory());
  ASSERT_NE(registry.find("a@cuda"), nullptr);
  EXPECT_NE(registry.find("a@cuda")->make(), nullptr);
  EXPECT_TRUE(registry.declared_elsewhere().empty());
  EXPECT_EQ(registry.find("a@cuda")->info.family, "fam");
}

TEST(VariantDeclarations, BindBeforeDeclareWaitsForIt) {
  variant_registry registry;
  registry.bind("a@cuda", idle_factory());
  registry.declare(info_of("a"));
  ASSERT_NE(registry.find("a@cuda"), nullptr);
  EXPECT_NE(registry.find("a@cuda")->make(), nullptr);
  EXPECT_EQ(ids(registry.all()), std::vector<std::string>{"a@cuda"});
  EXPECT_TRUE(registry.declared_elsewhere().empty());
}

// A bind whose id nothing declares (a misspelt id, or a declaration file left out of the build) is refused by
// every query, so the first look at the registry says which binding is wrong.
TEST(VariantDeclarations, BindNeverDeclaredIsRefusedAtFirstUse) {
  variant_registry registry;
  registry.declare(info_of("a"));
  registry.bind("a@cuda", idle_factory());
  registry.bind("misspelt@cuda", idle_factory());
  EXPECT_THROW(registry.all(), std::logic_error);
  EXPECT_THROW(registry.match("a"), std::logic_error);
  EXPECT_THROW(registry.find("a@cuda"), std::logic_error);
  EXPECT_THROW(registry.of_operation("transpose"), std::logic_error);
  EXPECT_THROW(registry.declared_elsewhere(), std::logic_error);
  EXPECT_THROW(registry.match_declared("a"), std::logic_error);
  try {
    registry.all();
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("misspelt@cuda"), std::string::npos) << e.what();
  }
  registry.declare(info_of("misspelt"));  // declared late: nothing is pending any more
  EXPECT_EQ(ids(registry.all()), (std::vector<std::string>{"a@cuda", "misspelt@cuda"}));
}

TEST(VariantDeclarations, BoundTwiceOrDeclaredTwiceIsRefused) {
  variant_registry registry;
  registry.declare(info_of("a"));
  registry.bind("a@cuda", idle_factory());
  EXPECT_THROW(registry.bind("a@cuda", idle_factory()), std::logic_error);
  EXPECT_THROW(registry.declare(info_of("a")), std::logic_error);
  EXPECT_THROW(registry.add(info_of("a"), idle_factory()), std::logic_error);
  // Twice before the declaration, too.
  registry.bind("b@cuda", idle_factory());
  EXPECT_THROW(registry.bind("b@cuda", idle_factory()), std::logic_error);
  registry.declare(info_of("b"));
  EXPECT_EQ(ids(registry.all()), (std::vector<std::string>{"a@cuda", "b@cuda"}));
  // The same name on another backend is another variant.
  registry.declare(info_of("a", "fam", "serial"));
  EXPECT_EQ(ids(registry.declared_elsewhere()), std::vector<std::string>{"a@serial"});
}

TEST(VariantDeclarations, IncompleteDeclarationsAndEmptyFactoriesAreRefused) {
  variant_registry registry;
  EXPECT_THROW(registry.declare(info_of("")), std::logic_error);
  EXPECT_THROW(registry.declare(info_of("a", "fam", "")), std::logic_error);
  auto no_operation = info_of("a");
  no_operation.operation.clear();
  EXPECT_THROW(registry.declare(no_operation), std::logic_error);
  EXPECT_THROW(registry.bind("a@cuda", {}), std::logic_error);
  EXPECT_THROW(registry.add(info_of("a"), {}), std::logic_error);
  EXPECT_TRUE(registry.declared_elsewhere().empty());
}

// A declaration without a traffic model gets its operation's essential traffic, as add() gives it.
TEST(VariantDeclarations, UnsetTrafficIsTheOperationsEssentialTraffic) {
  variant_registry registry;
  registry.declare(info_of("a"));
  const auto* op = kstudy::operation_registry::instance().find("transpose");
  ASSERT_NE(op, nullptr);
  const auto shape = op->shape({64, 32}, kstudy::table_layout::row_major, 0);
  ASSERT_EQ(registry.declared_elsewhere().size(), 1u);
  EXPECT_EQ(registry.declared_elsewhere().front()->traffic(shape).total(), op->essential_traffic(shape).total());
  EXPECT_GT(op->essential_traffic(shape).total(), 0);
}

TEST(VariantDeclarations, CudaVariantFieldsAreShared) {
  const auto info = kstudy::cuda_variant(info_of("a", "fam", ""));
  EXPECT_EQ(info.backend, "cuda");
  EXPECT_TRUE(info.on_device);
  EXPECT_EQ(info.implementation, kstudy::implementation::handwritten_cuda);
  EXPECT_EQ(kstudy::cuda_variant(info_of("a"), kstudy::implementation::vendor_library).implementation,
            kstudy::implementation::vendor_library);
}

// Every build declares the CUDA variants (their .cpp declarations are compiled everywhere); only a CUDA
// build binds them.
TEST(VariantDeclarations, EveryBuildDeclaresTheCudaVariants) {
  const auto& registry = variant_registry::instance();
  for (const char* id : {"transpose_naive@cuda", "transpose_cublas@cuda", "gemm_naive@cuda", "reduce_sum_cub@cuda",
                         "fused_cuda_row_major@cuda", "layernorm_cuda_registers@cuda", "softmax_cuda_online@cuda",
                         "triad_cuda@cuda", "attention_fused@cuda", "gemm_bf16_mma_autotuned@cuda"}) {
    const auto declared = registry.match_declared(id);
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
    EXPECT_NE(registry.find(id), nullptr) << id;
    EXPECT_TRUE(declared.empty()) << id;
#else
    EXPECT_EQ(registry.find(id), nullptr) << id;
    ASSERT_EQ(declared.size(), 1u) << id;
    EXPECT_TRUE(declared.front()->on_device) << id;
#endif
  }
#ifndef KSTUDY_HAVE_CUDA_VARIANTS
  const auto naive = registry.match_declared("transpose_naive@cuda");
  ASSERT_EQ(naive.size(), 1u);
  EXPECT_EQ(naive.front()->family, "transpose_cuda");
  EXPECT_EQ(naive.front()->implementation, kstudy::implementation::handwritten_cuda);
  EXPECT_EQ(naive.front()->rung, 1);
  EXPECT_EQ(registry.match_declared("transpose_cublas").front()->implementation,
            kstudy::implementation::vendor_library);
  // Nothing a CPU build declares without code runs on its own backends.
  for (const auto* info : registry.declared_elsewhere()) EXPECT_EQ(info->backend, "cuda") << info->id();
  // softmax_cudnn.cu is compiled only with cuDNN; its declaration is in every build.
  EXPECT_EQ(registry.match_declared("cudnn").size(), 1u);
#endif
}

// One experiment file serves every build: a variant this build declares but did not compile is skipped (with
// a note), a name no build declares is refused.
TEST(VariantDeclarations, AnExperimentNamingAnotherBuildsVariantsRunsWithout) {
  const auto e = kstudy::parse_experiment(
      R"({"name": "t", "operation": "transpose", "shapes": [[8, 4]],
          "variants": ["transpose_kokkos_team", "transpose_naive", "transpose_cuda@cuda", "cublas"]})",
      "t.json");
  const auto selected = kstudy::select_variants(e);
  EXPECT_FALSE(selected.empty());
  for (const auto* v : selected)
    EXPECT_TRUE(v->info.family == "transpose_kokkos_team" || v->info.backend == "cuda") << v->info.id();
  const auto unknown = kstudy::parse_experiment(
      R"({"name": "u", "operation": "transpose", "shapes": [[8, 4]], "variants": ["transpose_naiive"]})", "u.json");
  EXPECT_THROW(kstudy::select_variants(unknown), kstudy::experiment_error);
}

}  // namespace

namespace {

using kstudy::gpu_requirement;
using kstudy::unmet_requirement;

// What a variant needs from the GPU, in the words the runner records as the skip: every case that refuses
// names the requirement and what falls short; the cases that run answer "".
TEST(GpuRequirement, NothingNeededRunsAnywhere) {
  EXPECT_EQ(kstudy::describe(gpu_requirement{}), "");
  EXPECT_EQ(unmet_requirement({}, 0, 0), "");
  EXPECT_EQ(unmet_requirement({}, 75, 75), "");
}

TEST(GpuRequirement, DescribesCapabilityFeaturesAndArchSpecificTargets) {
  EXPECT_EQ(kstudy::describe({80, false, "cp.async"}), "sm_80 (cp.async)");
  EXPECT_EQ(kstudy::describe({90, true, "wgmma"}), "sm_90a (wgmma)");
  EXPECT_EQ(kstudy::describe({80, false, ""}), "sm_80");
}

TEST(GpuRequirement, ALeastCapabilityIsMetByThatGpuAndEveryLaterOne) {
  const gpu_requirement sm80{80, false, "cp.async"};
  EXPECT_EQ(unmet_requirement(sm80, 80, 80), "");
  EXPECT_EQ(unmet_requirement(sm80, 86, 86), "");
  EXPECT_EQ(unmet_requirement(sm80, 90, 90), "");
  EXPECT_EQ(unmet_requirement(sm80, 120, 120), "");
  EXPECT_EQ(unmet_requirement(sm80, 90, 80), "");  // sm_80 code on a Hopper card: the driver runs it
  // One below: a T4, or sm_80's code not in the binary.
  EXPECT_EQ(unmet_requirement(sm80, 75, 75), "needs sm_80 (cp.async); this GPU is sm_75 (compute capability 7.5)");
  const auto old_build = unmet_requirement(sm80, 90, 75);
  EXPECT_NE(old_build.find("this build's device code targets sm_75 (KSTUDY_CUDA_ARCH=75)"), std::string::npos)
      << old_build;
  EXPECT_NE(old_build.find("build with KSTUDY_CUDA_ARCH=90"), std::string::npos) << old_build;
  EXPECT_EQ(unmet_requirement(sm80, 0, 90), "needs sm_80 (cp.async); no CUDA GPU is visible");
}

TEST(GpuRequirement, AnArchSpecificTargetRunsOnThatGenerationOnly) {
  const gpu_requirement sm90a{90, true, "wgmma"};
  EXPECT_EQ(unmet_requirement(sm90a, 90, 90), "");
  EXPECT_NE(unmet_requirement(sm90a, 120, 120).find("only that GPU generation runs; this GPU is sm_120"),
            std::string::npos);
  EXPECT_NE(unmet_requirement(sm90a, 80, 80).find("this GPU is sm_80"), std::string::npos);
  EXPECT_NE(unmet_requirement(sm90a, 90, 80).find("targets sm_80"), std::string::npos);
}

// The registry checks a bound variant's requirement each time it is made, so every entry point (study, bench,
// profile, tests) refuses it the same way: variant_unavailable, which the runner records as skipped. This
// process has no GPU to meet it (the cpu flavour, or a machine without one), so make() refuses; a variant
// with no requirement is made as before.
TEST(GpuRequirement, RegistryRefusesToMakeAVariantThisMachineCannotRun) {
  if (kstudy::platform::gpu_compute_capability() > 0) GTEST_SKIP() << "a GPU is visible: covered by the GPU suite";
  variant_registry registry;
  auto needy = info_of("needy");
  needy.needs = {80, false, "cp.async"};
  registry.declare(needy);
  registry.bind("needy@cuda", idle_factory());
  registry.add(info_of("plain"), idle_factory());
  try {
    registry.find("needy@cuda")->make();
    FAIL() << "made a variant that needs sm_80 without a GPU";
  } catch (const kstudy::variant_unavailable& e) {
    EXPECT_EQ(std::string(e.what()), "needs sm_80 (cp.async); no CUDA GPU is visible");
  }
  EXPECT_NE(registry.find("plain@cuda")->make(), nullptr);
  // Bound before its declaration: checked the same way.
  variant_registry reversed;
  reversed.bind("needy@cuda", idle_factory());
  reversed.declare(needy);
  EXPECT_THROW(reversed.find("needy@cuda")->make(), kstudy::variant_unavailable);
}

}  // namespace
