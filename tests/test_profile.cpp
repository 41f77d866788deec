// `kstudy profile` without a GPU: the ncu raw-CSV parser on committed ncu output, units, metric
// fallbacks, the attribution of launches to variants and Kokkos labels, the profile table of the archive,
// and the fixture archives that tests/check_profile_report.py reads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "scratch_dir.hpp"
#include "source_files.hpp"
#include "kstudy/runner/archive.hpp"
#include "kstudy/experiment.hpp"
#include "kstudy/runner/ncu.hpp"
#include "kstudy/runner/profile.hpp"
#include "kstudy/variant.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kstudy;

std::string fixture_text(const std::string& name) {
  std::ifstream in(source_file("tests/fixtures/" + name), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Each test gets its own folder (tests/scratch_dir.hpp).
class scratch_dir : public kstudy::test::scratch_dir {
 public:
  scratch_dir() : kstudy::test::scratch_dir("profile") {}
};

// The committed sample: ncu's raw page for point 0 of profile_layouts (1048576 x 16), with the report the
// profiling child wrote beside it.
std::vector<profile_record> fixture_records() {
  const auto table = ncu::parse_raw_csv(fixture_text("ncu_raw_profile_layouts_point0.csv"));
  const auto launches = ncu::kernel_launches(table, ncu::first_choices());
  const auto report = ncu::parse_child_report(fixture_text("ncu_child_profile_layouts_point0.json"));
  return ncu::point_records({"profile_layouts", 0, 1048576, 16, 0}, report, launches);
}

TEST(NcuCsv, ParsesTheRawPage) {
  const auto table = ncu::parse_raw_csv(fixture_text("ncu_raw_profile_layouts_point0.csv"));
  ASSERT_EQ(table.rows.size(), 12u);
  EXPECT_EQ(table.columns[4], "Kernel Name");
  EXPECT_EQ(table.columns.size(), table.units.size());
  const auto at = [&](const std::string& c) {
    return static_cast<std::size_t>(std::find(table.columns.begin(), table.columns.end(), c) - table.columns.begin());
  };
  EXPECT_EQ(table.units[at("gpu__time_duration.sum")], "nsecond");
  EXPECT_EQ(table.units[at("dram__bytes_read.sum")], "byte");
  // Kokkos' demangled names carry commas and parentheses inside the quotes.
  EXPECT_NE(table.rows[5][4].find("Kokkos::Impl::cuda_parallel_launch_local_memory<Kokkos::Impl::ParallelReduce<"),
            std::string::npos);

  const auto launches = ncu::kernel_launches(table, ncu::first_choices());
  ASSERT_EQ(launches.size(), 12u);
  const auto& k = launches[1];
  EXPECT_EQ(k.id, 1);
  EXPECT_EQ(k.name, "fused_cuda_feature_major");
  EXPECT_DOUBLE_EQ(k.values.at("dram_bytes_read"), 67371008.0);  // "67,371,008"
  EXPECT_DOUBLE_EQ(k.values.at("dram_bytes_written"), 5275648.0);
  EXPECT_NEAR(k.values.at("profiled_duration_s"), 24640e-9, 1e-15);  // "24,640" nsecond
  EXPECT_DOUBLE_EQ(k.values.at("grid_size"), 1056.0);
  EXPECT_DOUBLE_EQ(k.values.at("registers_per_thread"), 32.0);
  EXPECT_DOUBLE_EQ(k.values.at("achieved_occupancy_pct"), 87.21);
  EXPECT_DOUBLE_EQ(k.values.at("theoretical_occupancy_pct"), 100.0);
  EXPECT_DOUBLE_EQ(k.values.at("global_load_sectors") / k.values.at("global_load_requests"), 2099200.0 / 524800.0);
  EXPECT_DOUBLE_EQ(k.values.at("shared_bank_conflicts_load"), 0.0);  // no shared memory in this kernel
  EXPECT_DOUBLE_EQ(k.values.at("l2_hit_rate_pct"), 12.41);
  // The tiled kernel stages rows in shared memory: its bank conflicts, with thousands separators.
  EXPECT_DOUBLE_EQ(launches[3].values.at("shared_bank_conflicts_load"), 16384.0);  // "16,384"
  EXPECT_DOUBLE_EQ(launches[3].values.at("shared_bank_conflicts_store"), 8192.0);
  EXPECT_DOUBLE_EQ(launches[3].values.at("l2_hit_rate_pct"), 13.02);
  EXPECT_TRUE(ncu::is_marker(launches[0].name));
  EXPECT_TRUE(ncu::is_kokkos_kernel(launches[5].name));
  EXPECT_FALSE(ncu::is_kokkos_kernel(launches[10].name));  // cuBLAS gemv
}

// A real recording: ncu 2025.3.1 on the H200 (the retired data/h200-2026-11-30-s2 dataset), point 0 of profile_layouts:
// seven variants, each call preceded by the marker kernel. Every field the profile table needs is present.
TEST(NcuCsv, ParsesAnH200Recording) {
  const auto table = ncu::parse_raw_csv(fixture_text("ncu_h200_profile_layouts_point0.csv"));
  const auto launches = ncu::kernel_launches(table, ncu::first_choices());
  std::size_t markers = 0, kernels = 0;
  for (const auto& k : launches) {
    if (ncu::is_marker(k.name)) {
      ++markers;
      continue;
    }
    ++kernels;
    EXPECT_GT(k.values.at("dram_bytes_read"), 0.0) << k.name;
    EXPECT_GT(k.values.at("profiled_duration_s"), 0.0) << k.name;
    EXPECT_GT(k.values.at("registers_per_thread"), 0.0) << k.name;
    EXPECT_GT(k.values.at("achieved_occupancy_pct"), 0.0) << k.name;
    EXPECT_GT(k.values.at("global_load_requests"), 0.0) << k.name;
  }
  // That recording predates the bank-conflict and L2 hit-rate metrics: their columns are absent, read as NaN.
  for (const auto& k : launches) {
    EXPECT_TRUE(std::isnan(k.values.at("shared_bank_conflicts_load"))) << k.name;
    EXPECT_TRUE(std::isnan(k.values.at("l2_hit_rate_pct"))) << k.name;
  }
  EXPECT_EQ(markers, 7u);
  EXPECT_EQ(kernels, 1u + 1u + 1u + 1u + 1u + 3u + 5u);  // fused x5, partial fusion 3, composed 5
  // The feature-major CUDA kernel at 1,048,576 x 16 reads the 64 MiB table once.
  const auto fm = std::find_if(launches.begin(), launches.end(),
                               [](const auto& k) { return k.name == "fused_cuda_feature_major"; });
  ASSERT_NE(fm, launches.end());
  EXPECT_NEAR(fm->values.at("dram_bytes_read"), 67108864.0, 0.05 * 67108864.0);
}

// A real recording of the schema 11 counters (tests/fixtures/README.md): ncu 2025.3.1 on the H200 over the probe
// kernels of tests/fixtures/ncu_roofline_probe.cu, whose executed instructions and flops are known exactly:
// 264 blocks of 256 threads, 1,000 iterations each.
std::vector<ncu::kernel_launch> probe_launches() {
  return ncu::kernel_launches(ncu::parse_raw_csv(fixture_text("ncu_h200_roofline_probe.csv")), ncu::first_choices());
}

TEST(NcuCsv, ReadsTheRooflineCountersOfAnH200Recording) {
  const auto launches = probe_launches();
  ASSERT_EQ(launches.size(), 10u);
  const auto at = [&](std::size_t id, const char* field) { return launches.at(id).values.at(field); };
  const double threads_x_iterations = 264.0 * 256.0 * 1000.0;
  EXPECT_EQ(launches[0].name, "ffma_loop(float *, int)");
  EXPECT_DOUBLE_EQ(at(0, "fp32_ffma_inst"), threads_x_iterations);  // "67,584,000"
  EXPECT_DOUBLE_EQ(at(0, "fma_pipe_pct"), 62.89);
  EXPECT_DOUBLE_EQ(at(0, "ipc"), 3.06);            // "inst/cycle"
  EXPECT_DOUBLE_EQ(at(0, "stall_selected"), 1.0);  // every issued instruction was selected once
  EXPECT_DOUBLE_EQ(at(0, "stall_wait"), 2.53);     // a dependent FMA chain waits on fixed latency
  EXPECT_DOUBLE_EQ(at(0, "tensor_bf16_ops"), 0.0);
  EXPECT_DOUBLE_EQ(at(1, "fp32_fadd_inst"), threads_x_iterations);
  EXPECT_DOUBLE_EQ(at(1, "fp32_fmul_inst"), threads_x_iterations + 264.0 * 256.0);  // and one outside the loop
  // One HFMA2 per iteration and thread, counted once: the flop weights make it a half2's 4 flops.
  EXPECT_DOUBLE_EQ(at(2, "fp16_hfma_inst"), 264.0 * 256.0 * 1001.0);
  EXPECT_DOUBLE_EQ(at(4, "fp64_dfma_inst"), threads_x_iterations);
  // One warp per block, 1,000 wmma 16x16x16 bf16 products: mma.sync through the tensor path, 2 * 16^3 flops each.
  EXPECT_DOUBLE_EQ(at(5, "tensor_bf16_ops"), 2.0 * 16 * 16 * 16 * 264 * 1000);
  EXPECT_DOUBLE_EQ(at(5, "tensor_hmma_inst"), 2.0 * 264 * 1000);  // two HMMA.16816 per 16x16x16
  EXPECT_DOUBLE_EQ(at(5, "tensor_gmma_inst"), 0.0);
  // A dynamically indexed local array: local-memory traffic, and the stalls it causes.
  EXPECT_DOUBLE_EQ(at(6, "local_load_bytes"), 27033600.0);
  EXPECT_DOUBLE_EQ(at(6, "local_store_bytes"), 17301504.0);
  EXPECT_DOUBLE_EQ(at(6, "stall_lg_throttle"), 1.49);
  EXPECT_DOUBLE_EQ(at(6, "stall_long_scoreboard"), 3.75);
  // cuBLAS's bf16 GEMM at 4096^3 runs wgmma (GMMA) on Hopper: the tensor path counts its 2 * 4096^3 flops
  // exactly, and the HMMA instruction count includes the GMMA ones there.
  EXPECT_NE(launches[7].name.find("nvjet_sm90"), std::string::npos);
  EXPECT_DOUBLE_EQ(at(7, "tensor_bf16_ops"), 2.0 * 4096.0 * 4096.0 * 4096.0);
  EXPECT_DOUBLE_EQ(at(7, "tensor_gmma_inst"), 2097152.0);
  EXPECT_DOUBLE_EQ(at(7, "tensor_hmma_inst"), 2097152.0);
  EXPECT_DOUBLE_EQ(at(7, "tensor_pipe_pct"), 90.74);
  EXPECT_DOUBLE_EQ(at(7, "stall_gmma"), 3.68);
  EXPECT_DOUBLE_EQ(at(7, "dram_bytes_read"), 150575104.0);
  EXPECT_DOUBLE_EQ(at(7, "fp32_ffma_inst"), 0.0);
  // The last launch failed under ncu (tests/fixtures/README.md): every counter "nan", read as not reported.
  for (const auto& spec : ncu::metric_specs()) {
    if (spec.member != nullptr) {
      EXPECT_TRUE(std::isnan(at(9, spec.field.c_str()))) << spec.field;
    }
  }
  // A fallback name fills the same field: the FMA pipe's instruction share beside its active cycles.
  auto choice = ncu::first_choices();
  choice["fma_pipe_pct"] = "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active";
  const auto fallback = ncu::kernel_launches(ncu::parse_raw_csv(fixture_text("ncu_h200_roofline_probe.csv")), choice);
  EXPECT_DOUBLE_EQ(fallback[0].values.at("fma_pipe_pct"), 62.83);
}

// The counters reach the profile records: the probe's launches as one variant's call after its marker kernel.
TEST(ProfileRecords, CarryTheRooflineCounters) {
  auto launches = probe_launches();
  ncu::kernel_launch marker;
  marker.id = -1;
  marker.name = ncu::marker_kernel;
  launches.insert(launches.begin(), marker);
  ncu::child_report report;
  report.markers = 1;
  report.variants.push_back({"roofline_probe@cuda", "row_major", "ok", true, 0, {}});
  const auto rows = ncu::point_records({"probe", 0, 4096, 4096, 0, 4096}, report, launches);
  ASSERT_EQ(rows.size(), 10u);
  EXPECT_EQ(rows[7].launch, 7);
  EXPECT_DOUBLE_EQ(rows[7].tensor_bf16_ops, 2.0 * 4096.0 * 4096.0 * 4096.0);
  EXPECT_DOUBLE_EQ(rows[7].stall_gmma, 3.68);
  EXPECT_DOUBLE_EQ(rows[0].fp32_ffma_inst, 67584000.0);
  EXPECT_DOUBLE_EQ(rows[6].local_store_bytes, 17301504.0);
  EXPECT_TRUE(std::isnan(rows[9].fp32_ffma_inst));
  // A variant that was not profiled: every counter NaN, the schema 11 ones too.
  profile_record unprofiled;
  ncu::clear_counters(unprofiled);
  for (const double* d : {&unprofiled.dram_bytes_read, &unprofiled.l2_hit_rate_pct, &unprofiled.fp16_hfma_inst,
                          &unprofiled.stall_long_scoreboard, &unprofiled.local_load_bytes})
    EXPECT_TRUE(std::isnan(*d));
}

TEST(NcuCsv, SkipsMessagesAndHandlesQuoting) {
  const std::string text =
      "==PROF== Connected to process 1 (/x/kstudy)\r\n"
      "some application output, with a comma\n"
      "\"ID\",\"Process ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\",\"gpu__time_duration.sum\","
      "\"dram__bytes_read.sum\"\r\n"
      "\"\",\"\",\"\",\"\",\"\",\"usecond\",\"Mbyte\"\r\n"
      "\"1\",\"9\",\"k<\"\"a, b\"\">(int)\",\"(32, 2, 1)\",\"(10, 1, 1)\",\"1.5\",\"2.25\"\r\n"
      "==PROF== Disconnected from process 1\n"
      "\"0\",\"9\",\"first\",\"(1, 1, 1)\",\"(1, 1, 1)\",\"n/a\",\"\"\n";
  const auto table = ncu::parse_raw_csv(text);
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[0][2], "k<\"a, b\">(int)");
  const auto launches = ncu::kernel_launches(table, ncu::first_choices());
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].name, "first");  // ordered by ID
  EXPECT_TRUE(std::isnan(launches[0].values.at("profiled_duration_s")));
  EXPECT_DOUBLE_EQ(launches[1].values.at("profiled_duration_s"), 1.5e-6);
  EXPECT_DOUBLE_EQ(launches[1].values.at("dram_bytes_read"), 2.25e6);
  EXPECT_DOUBLE_EQ(launches[1].values.at("launch_block_size"), 64.0);  // from "Block Size" when the metric is absent
  EXPECT_DOUBLE_EQ(launches[1].values.at("grid_size"), 10.0);
  EXPECT_TRUE(std::isnan(launches[1].values.at("achieved_occupancy_pct")));  // not collected
}

TEST(NcuCsv, RefusesWhatIsNotARawPage) {
  EXPECT_THROW(ncu::parse_raw_csv("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n"),
               ncu::format_error);
  EXPECT_THROW(ncu::parse_raw_csv("\"ID\",\"Kernel Name\"\n\"0\",\"k\",\"extra\"\n"), ncu::format_error);
  EXPECT_THROW(ncu::parse_raw_csv("\"ID\",\"Kernel Name\"\n\"0\",\"never closed\n"), ncu::format_error);
  EXPECT_THROW(ncu::parse_number("12 ms"), ncu::format_error);
}

TEST(NcuCsv, ConvertsUnitsToBaseUnits) {
  using ncu::quantity;
  EXPECT_DOUBLE_EQ(ncu::to_base_units(3, "msecond", quantity::seconds), 3e-3);
  EXPECT_DOUBLE_EQ(ncu::to_base_units(3, "ns", quantity::seconds), 3e-9);
  EXPECT_DOUBLE_EQ(ncu::to_base_units(3, "second", quantity::seconds), 3.0);
  EXPECT_DOUBLE_EQ(ncu::to_base_units(2, "Kbyte", quantity::bytes), 2e3);
  EXPECT_DOUBLE_EQ(ncu::to_base_units(2, "GB", quantity::bytes), 2e9);
  EXPECT_DOUBLE_EQ(ncu::to_base_units(2, "byte", quantity::bytes), 2.0);
  EXPECT_DOUBLE_EQ(ncu::to_base_units(2, "Msector", quantity::count), 2e6);
  EXPECT_DOUBLE_EQ(ncu::to_base_units(40, "register/thread", quantity::count), 40.0);
  EXPECT_DOUBLE_EQ(ncu::to_base_units(40, "%", quantity::percent), 40.0);
  EXPECT_DOUBLE_EQ(ncu::to_base_units(5, "", quantity::seconds), 5e-9);  // no units row: ncu's base units
  EXPECT_DOUBLE_EQ(ncu::to_base_units(5, "", quantity::bytes), 5.0);
  EXPECT_THROW(ncu::to_base_units(1, "cycle", quantity::seconds), ncu::format_error);
  EXPECT_THROW(ncu::to_base_units(1, "sector", quantity::bytes), ncu::format_error);
  EXPECT_THROW(ncu::to_base_units(1, "byte", quantity::percent), ncu::format_error);
  EXPECT_DOUBLE_EQ(ncu::parse_number(" 1,048,576 "), 1048576.0);
  EXPECT_TRUE(std::isnan(ncu::parse_number("n/a")));
}

TEST(NcuMetrics, RefusedMetricsFallBackThenDrop) {
  auto choice = ncu::first_choices();
  EXPECT_EQ(choice.at("dram_throughput_pct"), "dram__throughput.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(choice.at("shared_bank_conflicts_load"), "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum");
  EXPECT_EQ(choice.at("shared_bank_conflicts_store"), "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum");
  EXPECT_EQ(choice.at("l2_hit_rate_pct"), "lts__t_sector_hit_rate.pct");
  EXPECT_NE(ncu::metrics_argument(choice).find("lts__t_sector_hit_rate.pct"), std::string::npos);
  const std::string first =
      "==PROF== Connected to process 7\n"
      "==ERROR== Failed to find metric regex:^dram__throughput\\.avg\\.pct_of_peak_sustained_elapsed$\n";
  EXPECT_EQ(ncu::drop_refused_metrics(first, choice),
            std::vector<std::string>{"dram__throughput.avg.pct_of_peak_sustained_elapsed"});
  EXPECT_EQ(choice.at("dram_throughput_pct"), "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(choice.at("dram_bytes_read"), "dram__bytes_read.sum");  // untouched
  EXPECT_EQ(ncu::drop_refused_metrics(
                "==ERROR== Failed to find metric gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", choice),
            std::vector<std::string>{"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"});
  EXPECT_EQ(choice.count("dram_throughput_pct"), 0u);  // no candidate left: dropped
  // A chip or ncu without the bank-conflict metric: that field alone is dropped.
  EXPECT_EQ(ncu::drop_refused_metrics(
                "==ERROR== Failed to find metric regex:^l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st\\.sum$\n",
                choice),
            std::vector<std::string>{"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"});
  EXPECT_EQ(choice.count("shared_bank_conflicts_store"), 0u);
  EXPECT_EQ(choice.count("shared_bank_conflicts_load"), 1u);
  EXPECT_EQ(ncu::metrics_argument(choice).find("dram_throughput"), std::string::npos);
  // Before Hopper there is no GMMA pipe: that field alone is dropped; the fp16 tensor ops fall back to the fp32
  // accumulators' counter where ncu has no sum over both.
  EXPECT_EQ(choice.at("tensor_gmma_inst"), "sm__inst_executed_pipe_tensor_op_gmma.sum");
  EXPECT_EQ(
      ncu::drop_refused_metrics("==ERROR== Failed to find metric regex:^sm__inst_executed_pipe_tensor_op_gmma\\.sum$\n"
                                "==ERROR== Failed to find metric regex:^sm__ops_path_tensor_src_fp16\\.sum$\n",
                                choice),
      (std::vector<std::string>{"sm__ops_path_tensor_src_fp16.sum", "sm__inst_executed_pipe_tensor_op_gmma.sum"}));
  EXPECT_EQ(choice.count("tensor_gmma_inst"), 0u);
  EXPECT_EQ(choice.at("tensor_fp16_ops"), "sm__ops_path_tensor_src_fp16_dst_fp32.sum");
  EXPECT_EQ(choice.at("tensor_bf16_ops"), "sm__ops_path_tensor_src_bf16_dst_fp32.sum");  // a longer name, untouched
  EXPECT_EQ(choice.at("stall_long_scoreboard"),
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio");
  EXPECT_EQ(choice.at("fp16_hfma_inst"), "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum");
  // Something else went wrong: nothing to drop, and the metric names in the command are not errors.
  EXPECT_TRUE(ncu::drop_refused_metrics("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n"
                                        "ncu --metrics dram__bytes_read.sum\n",
                                        choice)
                  .empty());
  EXPECT_EQ(ncu::error_lines("==PROF== ok\n==ERROR== one\nx\n==ERROR== two\n"), "==ERROR== one\n==ERROR== two\n");
  EXPECT_EQ(ncu::version_line("NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA\n"
                              "Version 2025.3.1.0 (build 36398880) (public-release)\n"),
            "Version 2025.3.1.0 (build 36398880) (public-release)");
}

TEST(ProfileRecords, LaunchesMapToVariantsAndKokkosLabels) {
  const auto rows = fixture_records();
  ASSERT_EQ(rows.size(), 1u + 1u + 1u + 5u + 1u);  // markers dropped; one row for the skipped variant
  for (const auto& r : rows) {
    EXPECT_EQ(r.experiment, "profile_layouts");
    EXPECT_EQ(r.rows, 1048576);
    EXPECT_EQ(r.features, 16);
    EXPECT_FALSE(ncu::is_marker(r.kernel));
  }
  EXPECT_EQ(rows[0].variant, "fused_cuda_feature_major@cuda");
  EXPECT_EQ(rows[0].kernel, "fused_cuda_feature_major");
  EXPECT_EQ(rows[0].launch, 0);
  EXPECT_EQ(rows[0].label, "");
  EXPECT_EQ(rows[0].layout, "feature_major");
  EXPECT_EQ(rows[0].launch_block_size, 256);
  EXPECT_EQ(rows[0].grid_size, 1056);
  EXPECT_EQ(rows[1].variant, "fused_cuda_row_major_tiled@cuda");
  EXPECT_EQ(rows[1].registers_per_thread, 40);
  EXPECT_DOUBLE_EQ(rows[1].shared_bank_conflicts_load, 16384.0);
  EXPECT_DOUBLE_EQ(rows[1].shared_bank_conflicts_store, 8192.0);
  EXPECT_DOUBLE_EQ(rows[1].l2_hit_rate_pct, 13.02);
  EXPECT_EQ(rows[2].label, "kstudy::fused_kokkos<feature_major>");
  const std::vector<std::string> composed{"kstudy::composed::standardize", "kstudy::composed::clip",
                                          "kstudy::composed::weight", "KokkosBlas::gemv[TPL_CUBLAS,float]",
                                          "kstudy::composed::threshold"};
  for (std::size_t i = 0; i < composed.size(); ++i) {
    EXPECT_EQ(rows[3 + i].variant, "composed_feature_major@cuda");
    EXPECT_EQ(rows[3 + i].launch, static_cast<int>(i));
    EXPECT_EQ(rows[3 + i].label, composed[i]);
    EXPECT_EQ(rows[3 + i].status, "ok");
    EXPECT_TRUE(rows[3 + i].gate_passed);
  }
  EXPECT_NE(rows[6].kernel.find("gemv"), std::string::npos);
  const auto& skipped = rows.back();
  EXPECT_EQ(skipped.variant, "fused_kokkos_row_major@cuda");
  EXPECT_EQ(skipped.launch, -1);
  EXPECT_EQ(skipped.status.rfind("skipped: ", 0), 0u);
  EXPECT_TRUE(std::isnan(skipped.dram_bytes_read));
  EXPECT_TRUE(std::isnan(skipped.shared_bank_conflicts_load));
  EXPECT_TRUE(std::isnan(skipped.l2_hit_rate_pct));
  EXPECT_TRUE(std::isnan(skipped.tensor_bf16_ops));
  EXPECT_EQ(skipped.registers_per_thread, -1);
  // The hand-made sample predates the schema 11 counters: their columns are absent, read as not reported.
  EXPECT_TRUE(std::isnan(rows[0].fp32_ffma_inst));
  EXPECT_TRUE(std::isnan(rows[0].stall_wait));

  // Markers that do not match the child's report: nothing can be attributed.
  auto report = ncu::parse_child_report(fixture_text("ncu_child_profile_layouts_point0.json"));
  report.markers = 5;
  const auto launches = ncu::kernel_launches(ncu::parse_raw_csv(fixture_text("ncu_raw_profile_layouts_point0.csv")),
                                             ncu::first_choices());
  EXPECT_THROW(ncu::point_records({"x", 0, 1, 1, 0}, report, launches), ncu::format_error);
  // The child's report round-trips through its JSON form.
  report.markers = 4;
  const auto again = ncu::parse_child_report(ncu::to_json(report));
  ASSERT_EQ(again.variants.size(), report.variants.size());
  EXPECT_EQ(again.variants[3].events, report.variants[3].events);
  EXPECT_THROW(ncu::parse_child_report("{\"markers\": 1}"), ncu::format_error);
}

TEST(Profile, PointsSpreadOverTheSweep) {
  EXPECT_EQ(spread_points(15, 3), (std::vector<std::int64_t>{0, 7, 14}));
  EXPECT_EQ(spread_points(3, 3), (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(spread_points(2, 3), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(spread_points(5, 0), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(spread_points(5, 1), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(spread_points(10, 4), (std::vector<std::int64_t>{0, 3, 6, 9}));
}

TEST(Profile, TheBuiltInExperimentHasThreeShapes) {
  const auto e = load_experiment(resolve_experiment_path("profile_layouts"));
  EXPECT_EQ(e.points, (std::vector<std::vector<std::int64_t>>{{1048576, 16}, {16777216, 16}, {262144, 256}}));
}

experiment_record profile_experiment() {
  const auto e = load_experiment(resolve_experiment_path("profile_layouts"));
  return {e.name, e.definition_json, nlohmann::json::parse(e.definition_json)["protocol"].dump(), e.fingerprint()};
}

const std::map<std::string, std::string> k_attributes{{"ncu_version", "Version 2025.3.1.0 (fixture)"},
                                                      {"ncu_command", "ncu --clock-control none ..."}};

TEST(ProfileArchive, RoundTripsWithItsAttributes) {
  scratch_dir dir;
  const std::string path = dir.file("profile.h5"), json_path = dir.file("profile.json");
  const auto rows = fixture_records();
  {
    hdf5_sink sink(path, open_mode::create);
    json_sink copy(json_path);
    for (result_sink* s : std::initializer_list<result_sink*>{&sink, &copy}) {
      s->begin_experiment(profile_experiment());
      s->write_profile(rows, k_attributes);
      s->end_experiment("profile_layouts");
      s->finish();
    }
  }
  const auto back = read_profile(path, "profile_layouts");
  ASSERT_EQ(back.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(back[i].variant, rows[i].variant);
    EXPECT_EQ(back[i].kernel, rows[i].kernel);
    EXPECT_EQ(back[i].label, rows[i].label);
    EXPECT_EQ(back[i].launch, rows[i].launch);
    EXPECT_EQ(back[i].grid_size, rows[i].grid_size);
    EXPECT_EQ(back[i].status, rows[i].status);
    EXPECT_EQ(std::isnan(back[i].dram_bytes_read), std::isnan(rows[i].dram_bytes_read));
    if (!std::isnan(rows[i].dram_bytes_read)) {
      EXPECT_EQ(back[i].dram_bytes_read, rows[i].dram_bytes_read);
    }
    EXPECT_EQ(back[i].profiled_duration_s == rows[i].profiled_duration_s, !std::isnan(rows[i].profiled_duration_s));
    EXPECT_TRUE(std::isnan(back[i].tensor_bf16_ops));  // the hand-made sample has no schema 11 columns
  }
  // The schema 11 counters round-trip too (the H200 probe's launches as one variant's call).
  {
    auto launches = probe_launches();
    ncu::kernel_launch marker;
    marker.name = ncu::marker_kernel;
    marker.id = -1;
    launches.insert(launches.begin(), marker);
    ncu::child_report report;
    report.markers = 1;
    report.variants.push_back({"roofline_probe@cuda", "row_major", "ok", true, 0, {}});
    const auto probe = ncu::point_records({"profile_layouts", 0, 4096, 4096, 0, 4096}, report, launches);
    const std::string probe_path = dir.file("probe.h5");
    hdf5_sink sink(probe_path, open_mode::create);
    sink.begin_experiment(profile_experiment());
    sink.write_profile(probe, k_attributes);
    sink.end_experiment("profile_layouts");
    sink.finish();
    const auto read = read_profile(probe_path, "profile_layouts");
    ASSERT_EQ(read.size(), probe.size());
    EXPECT_DOUBLE_EQ(read[7].tensor_bf16_ops, 2.0 * 4096.0 * 4096.0 * 4096.0);
    EXPECT_DOUBLE_EQ(read[7].tensor_gmma_inst, 2097152.0);
    EXPECT_DOUBLE_EQ(read[6].stall_lg_throttle, 1.49);
    EXPECT_DOUBLE_EQ(read[0].ipc, 3.06);
    EXPECT_TRUE(std::isnan(read[9].fp64_dfma_inst));
  }
  const auto attributes = read_profile_attributes(path, "profile_layouts");
  EXPECT_EQ(attributes.at("ncu_version"), "Version 2025.3.1.0 (fixture)");
  EXPECT_NE(attributes.at("units").find("never a timing"), std::string::npos);
  // The five tables of every experiment are there too, empty: a profile archive is an ordinary archive.
  EXPECT_TRUE(read_samples(path, "profile_layouts").empty());
  EXPECT_TRUE(read_summaries(path, "profile_layouts").empty());

  std::ifstream in(json_path);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["experiments"]["profile_layouts"]["profile"].size(), rows.size());
  EXPECT_EQ(doc["experiments"]["profile_layouts"]["profile_attributes"]["ncu_version"], "Version 2025.3.1.0 (fixture)");
}

TEST(ProfileArchive, TimingArchivesHaveNoProfileTable) {
  scratch_dir dir;
  const std::string path = dir.file("run.h5");
  hdf5_sink sink(path);
  sink.begin_experiment(profile_experiment());
  sink.end_experiment("profile_layouts");
  sink.finish();
  EXPECT_TRUE(read_profile(path, "profile_layouts").empty());
  EXPECT_TRUE(read_profile_attributes(path, "profile_layouts").empty());
}

// The variants rows a schema-4 archive stores beside what it measured at 1,048,576 x 16 (what kstudy run and
// kstudy profile write through describe_variant; the CPU build has no @cuda variants to describe).
std::vector<variant_record> fixture_variants(const std::vector<std::pair<std::string, std::string>>& ids) {
  const table_shape shape = make_shape(1048576, 16, table_layout::feature_major);
  std::vector<variant_record> rows;
  for (const auto& [id, layout] : ids) {
    variant_record r;
    r.variant = id;
    r.operation = "scoring";
    r.family = id.substr(0, id.rfind(layout) - 1);
    r.fusion_level = r.family == "composed" ? "none" : "full";
    r.layout = layout;
    r.backend = "cuda";
    r.on_device = true;
    r.kernels_launched = r.family == "composed" ? 5 : 1;
    r.rows = shape.rows;
    r.features = shape.features;
    const auto& op = *operation_registry::instance().find("scoring");
    r.operation = "scoring";
    r.axes = "rows,features";
    r.essential_bytes = op.essential_traffic(shape).total();
    r.essential_flops = op.essential_flops(shape);
    r.modelled_bytes_read = op.essential_traffic(shape).bytes_read;
    r.modelled_bytes_written = op.essential_traffic(shape).bytes_written;
    rows.push_back(r);
  }
  return rows;
}

// Writes the archives tests/check_profile_report.py reads (ctest fixture profile_fixture): the profile of
// the committed ncu sample, and a timing archive of the same experiment whose samples are invented here
// (round numbers for the report's arithmetic, not measurements). Run alone, it writes to a scratch folder.
TEST(Profile, ReportFixture) {
  scratch_dir dir;
  const char* folder = std::getenv("KSTUDY_PROFILE_FIXTURE_DIR");
  const std::string profile_path = folder ? std::string(folder) + "/profile_fixture.h5" : dir.file("profile.h5");
  const std::string timing_path = folder ? std::string(folder) + "/profile_timing_fixture.h5" : dir.file("timing.h5");
  run_metadata metadata;
  metadata.root = {{"kstudy_version", "fixture"}, {"git_commit", "fixture"}, {"created_utc", "2026-12-01T00:00:00Z"}};
  metadata.environment = {{"gpu_name", "NVIDIA H200 (fixture)"}, {"ncu_version", "Version 2025.3.1.0 (fixture)"}};
  {
    hdf5_sink sink(profile_path, open_mode::overwrite);
    sink.begin(metadata);
    sink.begin_experiment(profile_experiment());
    sink.write_variants(fixture_variants({{"fused_cuda_feature_major@cuda", "feature_major"},
                                          {"fused_cuda_row_major_tiled@cuda", "row_major"},
                                          {"fused_kokkos_feature_major@cuda", "feature_major"},
                                          {"fused_kokkos_row_major@cuda", "row_major"},
                                          {"composed_feature_major@cuda", "feature_major"}}));
    sink.write_profile(fixture_records(), k_attributes);
    sink.end_experiment("profile_layouts");
    sink.finish();
  }
  // Resident timings for three of the profiled variants (composed has none: the report leaves it blank),
  // plus a rejected sample that must not count.
  const std::vector<std::pair<std::string, std::string>> timed{{"fused_cuda_feature_major@cuda", "feature_major"},
                                                               {"fused_cuda_row_major_tiled@cuda", "row_major"},
                                                               {"fused_kokkos_feature_major@cuda", "feature_major"}};
  std::vector<sample_record> samples;
  for (std::size_t v = 0; v < timed.size(); ++v)
    for (const auto timer : {timer_kind::device_events, timer_kind::resident_wall})
      for (int trial = 0; trial < 5; ++trial) {
        sample_record s;
        s.experiment = "profile_layouts";
        s.variant = timed[v].first;
        s.layout = timed[v].second;
        s.memory_kind = "device";
        s.rows = 1048576;
        s.features = 16;
        s.pitch = 16;
        s.bytes = 72351808;
        s.trial = trial;
        s.timer = timer;
        s.seconds = (45.0 + 10.0 * double(v) + (timer == timer_kind::resident_wall ? 5.0 : 0.0) + trial) * 1e-6;
        s.gate = gate_verdict::passed;
        s.status = "ok";
        samples.push_back(s);
      }
  auto rejected = samples.front();
  rejected.seconds = 1.0;
  rejected.gate = gate_verdict::failed;
  rejected.status = "rejected";
  samples.push_back(rejected);
  {
    hdf5_sink sink(timing_path, open_mode::overwrite);
    metadata.environment.erase("ncu_version");
    sink.begin(metadata);
    sink.begin_experiment(profile_experiment());
    sink.write_variants(fixture_variants(timed));
    sink.write_samples(samples);
    sink.end_experiment("profile_layouts");
    sink.finish();
  }
  EXPECT_EQ(read_profile(profile_path, "profile_layouts").size(), 9u);
  EXPECT_EQ(read_samples(timing_path, "profile_layouts").size(), samples.size());
}

}  // namespace
