// The CUDA escape path's tools: NVRTC compiles the same kernel source nvcc compiled, occupancy is sane
// for every legal block size, probes launch, and fused_cuda rejects illegal block sizes and empty tables.
#ifdef KSTUDY_HAVE_CUDA_VARIANTS
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kokkos_test_support.hpp"
#include "kstudy/cuda_escape.hpp"
#include "kstudy/variant.hpp"
#include "scoring/data_generator.hpp"
#include "scoring/fused_cuda.hpp"
#include "scoring/scoring_variant.hpp"

namespace {

using kstudy::table_layout;
namespace escape = kstudy::cuda_escape;
namespace scoring = kstudy::scoring_cuda;

const char* const fused_cuda_names[] = {"fused_cuda_row_major", "fused_cuda_feature_major", "fused_cuda_padded",
                                        "fused_cuda_row_major_tiled"};

const kstudy::registered_variant& cuda_variant(const std::string& name) {
  const auto* entry = kstudy::variant_registry::instance().find(name + "@cuda");
  if (entry == nullptr) throw std::logic_error(name + "@cuda is not registered");
  return *entry;
}

TEST(CudaEscape, NvrtcCompilesTheKernelSource) {
  KSTUDY_REQUIRE_KOKKOS();
  const int cc = escape::device_compute_capability();
  EXPECT_GT(scoring::nvrtc_compile_seconds(cc), 0.0);
  const auto timing = scoring::nvrtc_compile_and_load(cc);
  EXPECT_GT(timing.compile_seconds, 0.0);
  EXPECT_GT(timing.load_seconds, 0.0);
  EXPECT_THROW(scoring::nvrtc_compile_seconds(9), std::invalid_argument);
}

TEST(CudaEscape, OccupancyIsAFractionForEveryBlockSize) {
  KSTUDY_REQUIRE_KOKKOS();
  for (int block = 32; block <= 1024; block += 32) {
    for (const auto layout : {table_layout::row_major, table_layout::feature_major, table_layout::padded_row_major}) {
      const double occupancy = scoring::calculated_occupancy(layout, block);
      EXPECT_GT(occupancy, 0.0) << to_string(layout) << " block " << block;
      EXPECT_LE(occupancy, 1.0) << to_string(layout) << " block " << block;
    }
    for (const std::int64_t features : {1, 16, 31, 32, 513, 100000}) {
      const double occupancy = scoring::calculated_occupancy_tiled(block, features);
      EXPECT_GT(occupancy, 0.0) << "tiled block " << block << " features " << features;
      EXPECT_LE(occupancy, 1.0) << "tiled block " << block << " features " << features;
    }
  }
}

TEST(CudaEscape, ProbesLaunch) {
  KSTUDY_REQUIRE_KOKKOS();
  const kstudy::host_dataset data(kstudy::make_shape(64, 4, table_layout::row_major));
  auto variant = kstudy::make_scoring_variant(cuda_variant("fused_cuda_row_major"));
  variant->prepare_table(data.problem(), {});
  ASSERT_NE(variant->stream(), nullptr);
  EXPECT_NO_THROW(escape::launch_empty_kernel(variant->stream()));
  EXPECT_NO_THROW(escape::launch_touch_kernel(variant->stream()));
  EXPECT_NO_THROW(escape::synchronize(variant->stream()));
}

TEST(CudaEscape, RejectsIllegalBlockSizesAndEmptyTables) {
  KSTUDY_REQUIRE_KOKKOS();
  for (const char* name : fused_cuda_names) {
    const auto& entry = cuda_variant(name);
    const kstudy::host_dataset data(kstudy::make_shape(100, 8, entry.info.layout, 3));
    auto variant = kstudy::make_scoring_variant(entry);
    for (const int block : {33, 16, 1056, 2048, -32})
      EXPECT_THROW(variant->prepare_table(data.problem(), kstudy::run_options{block}), std::invalid_argument)
          << name << " block " << block;
    EXPECT_NO_THROW(variant->prepare_table(data.problem(), kstudy::run_options{0})) << name;  // 0: the default
    auto problem = data.problem();
    problem.shape.rows = 0;
    EXPECT_THROW(variant->prepare_table(problem, {}), std::invalid_argument) << name;
    problem = data.problem();
    problem.shape.layout =
        entry.info.layout == table_layout::feature_major ? table_layout::row_major : table_layout::feature_major;
    problem.shape.pitch = problem.shape.features;
    EXPECT_THROW(variant->prepare_table(problem, {}), std::invalid_argument) << name << ": layout mismatch";
  }
}

}  // namespace
#endif  // KSTUDY_HAVE_CUDA_VARIANTS
