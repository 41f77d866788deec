// The declarations of layernorm_cuda.cu's variants, compiled in every build (kstudy/support/cuda_registration.hpp):
// a CPU build knows them as not in this build.
#include <cstdint>
#include <functional>
#include <utility>

#include "kstudy/support/cuda_registration.hpp"
#include "kstudy/variant.hpp"
#include "layernorm/layernorm.hpp"

namespace kstudy::layernorm {
namespace {

// Reads of a row matrix by the register kernel: once, or twice past max_register_hidden (Welford fallback).
int register_reads(std::int64_t hidden) { return hidden <= max_register_hidden ? 1 : 2; }

void declare_cuda(layernorm_kind kind, const char* name, const char* family, const char* description, int rung,
                  fusion_level fusion, int kernels_launched, std::function<traffic_model(const table_shape&)> traffic) {
  auto info = cuda_variant(variant_info_for(kind, name, family, description, 1, 1));
  info.rung = rung;
  info.fusion = fusion;
  info.kernels_launched = kernels_launched;
  info.traffic = std::move(traffic);
  variant_declaration{std::move(info)};
}

[[maybe_unused]] const int declared = [] {
  using P = layernorm_kind;
  declare_cuda(P::plain, "layernorm_cuda_two_pass", "layernorm_cuda",
               "one block of 256 per row: mean pass, variance pass, normalise pass, each reading x from global memory",
               1, fusion_level::full, /*kernels_launched=*/1,  // layernorm_two_pass
               [](const table_shape& s) { return pass_traffic(s.rows, s.features, 3, 1); });
  declare_cuda(P::plain, "layernorm_cuda_welford", "layernorm_cuda",
               "one block of 256 per row: one Welford statistics pass (shuffle + shared-memory merges), then normalise",
               2, fusion_level::full, /*kernels_launched=*/1,  // layernorm_welford
               [](const table_shape& s) { return pass_traffic(s.rows, s.features, 2, 1); });
  declare_cuda(P::plain, "layernorm_cuda_registers", "layernorm_cuda",
               "one block of 128 per row, the row read once into registers (float4 loads), two-pass statistics from "
               "registers; Welford kernel past 8,192",
               3, fusion_level::full, /*kernels_launched=*/1,  // layernorm_registers (or layernorm_welford)
               [](const table_shape& s) { return pass_traffic(s.rows, s.features, register_reads(s.features), 1); });
  declare_cuda(
      P::residual, "residual_layernorm_cuda_unfused", "residual_layernorm_cuda",
      "float4 add kernel writing h, then layernorm_cuda_registers' kernel on h (5 passes)", 1, fusion_level::none,
      /*kernels_launched=*/2,  // residual_add, layernorm_registers
      [](const table_shape& s) { return pass_traffic(s.rows, s.features, 2 + register_reads(s.features), 2); });
  declare_cuda(
      P::residual, "residual_layernorm_cuda_fused", "residual_layernorm_cuda",
      "one register kernel: loads x and r, writes h = x + r and y (4 passes); Welford with the add past 8,192", 2,
      fusion_level::full, /*kernels_launched=*/1,  // layernorm_registers<Residual> (or layernorm_welford<Residual>)
      [](const table_shape& s) { return pass_traffic(s.rows, s.features, register_reads(s.features) + 1, 2); });
  return 0;
}();

}  // namespace
}  // namespace kstudy::layernorm
