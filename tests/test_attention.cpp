// The attention operations (variants/attention): registration, essential bytes and flops, the seeded
// generator (realistic score spread, peaked queries, sink keys, V outliers; bf16 values exactly the rounded
// float32 ones), the gate's tolerance model (it accepts a serial float32 attention and a flash-style online
// softmax in float32, for bf16 one that rounds P to bfloat16; it rejects corrupt(), poison anywhere, a
// slightly wrong sampled element, a result missing one key and a wrong scale), and every registered attention
// and attention_bf16 variant of this build against the reference at odd shapes. The CUDA variants exist only
// in the CUDA flavour; without a GPU they skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/attention.hpp"
#include "detail/bf16.hpp"
#include "escape_families.hpp"
#include "kokkos_test_support.hpp"
#include "kstudy/host_io.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/variant.hpp"

namespace {

using kstudy::operation;
using kstudy::table_layout;
using kstudy::attention::attention_data;
using kstudy::attention::attention_precision;

const attention_precision k_precisions[] = {attention_precision::fp32, attention_precision::bf16};
constexpr std::uint64_t k_seed = 20261130;

const operation& op_of(attention_precision precision) {
  return kstudy::test::registered_operation(kstudy::attention::operation_name(precision));
}

std::unique_ptr<kstudy::problem_data> generate(attention_precision precision, std::int64_t heads, std::int64_t tokens,
                                               std::int64_t dim, std::uint64_t seed = k_seed) {
  const auto& op = op_of(precision);
  return op.generate(op.shape({heads, tokens, dim}, table_layout::row_major, 0), seed);
}

const attention_data& typed(const kstudy::problem_data& p) { return dynamic_cast<const attention_data&>(p); }

using kstudy::detail::round_to_bf16;
using kstudy::detail::widen_bf16;

// How a float32 implementation computes attention (the test's emulations of the kernels the gate must pass).
struct emulation {
  bool online = true;          // flash-style: key tiles of 64, running max and sum, rescaled accumulator
  bool round_p = false;        // P rounded to bfloat16 before the P V product (tensor cores)
  std::int64_t skip_key = -1;  // a key left out of every row (a wrong result)
  float scale = 0.0f;          // 0: the problem's scale
};

// Fills O (float32, or bfloat16 bits rounded once) with the emulation's result for every row.
void emulate(const attention_data& p, const emulation& how, const std::vector<kstudy::host_span>& outputs) {
  const std::int64_t heads = p.heads(), tokens = p.tokens(), dim = p.head_dim();
  const float scale = how.scale != 0.0f ? how.scale : p.scale();
  const bool bf16 = p.precision() == attention_precision::bf16;
  void* out = outputs.at(0).data;
  constexpr std::int64_t tile = 64;
  const std::int64_t n = p.elements();
  std::vector<float> qs(static_cast<std::size_t>(n)), ks(qs.size()), vs(qs.size());  // widened once
  for (std::int64_t i = 0; i < n; ++i) {
    qs[i] = p.q_at(i);
    ks[i] = p.k_at(i);
    vs[i] = p.v_at(i);
  }
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t row = 0; row < heads * tokens; ++row) {
    const std::int64_t h = row / tokens;
    std::vector<float> q(static_cast<std::size_t>(dim)), o(static_cast<std::size_t>(dim), 0.0f),
        s(static_cast<std::size_t>(tokens));
    for (std::int64_t d = 0; d < dim; ++d) q[d] = qs[row * dim + d];
    const auto score = [&](std::int64_t j) {
      float dot = 0.0f;
      const float* const k = &ks[(h * tokens + j) * dim];
      for (std::int64_t d = 0; d < dim; ++d) dot += q[d] * k[d];
      return dot * scale;
    };
    const auto accumulate = [&](std::int64_t j, float weight) {
      const float w = how.round_p ? widen_bf16(round_to_bf16(weight)) : weight;
      const float* const v = &vs[(h * tokens + j) * dim];
      for (std::int64_t d = 0; d < dim; ++d) o[d] += w * v[d];
    };
    float l = 0.0f;
    if (!how.online) {
      float m = -INFINITY;
      for (std::int64_t j = 0; j < tokens; ++j) {
        s[j] = score(j);
        if (j != how.skip_key) m = std::max(m, s[j]);
      }
      for (std::int64_t j = 0; j < tokens; ++j) {
        s[j] = j == how.skip_key ? 0.0f : std::exp(s[j] - m);
        l += s[j];
      }
      for (std::int64_t j = 0; j < tokens; ++j) accumulate(j, s[j] / l);
      l = 1.0f;
    } else {
      float m = -INFINITY;
      for (std::int64_t k0 = 0; k0 < tokens; k0 += tile) {
        const std::int64_t end = std::min(tokens, k0 + tile);
        float tile_max = -INFINITY;
        for (std::int64_t j = k0; j < end; ++j) {
          s[j] = score(j);
          if (j != how.skip_key) tile_max = std::max(tile_max, s[j]);
        }
        if (tile_max > m) {
          const float correction = std::exp(m - tile_max);
          l *= correction;
          for (auto& x : o) x *= correction;
          m = tile_max;
        }
        for (std::int64_t j = k0; j < end; ++j) {
          if (j == how.skip_key) continue;
          const float e = std::exp(s[j] - m);
          l += e;
          accumulate(j, e);
        }
      }
    }
    for (std::int64_t d = 0; d < dim; ++d) {
      const float value = o[d] / l;
      if (bf16)
        static_cast<std::uint16_t*>(out)[row * dim + d] = round_to_bf16(value);
      else
        static_cast<float*>(out)[row * dim + d] = value;
    }
  }
}

// The key with the largest weight in row 0 of head 0 (a sink or the peaked row's favourite), in float64.
std::int64_t heaviest_key(const attention_data& p) {
  std::int64_t best = 0;
  double best_score = -INFINITY;
  for (std::int64_t j = 0; j < p.tokens(); ++j) {
    double dot = 0.0;
    for (std::int64_t d = 0; d < p.head_dim(); ++d) dot += double(p.q_at(d)) * p.k_at(j * p.head_dim() + d);
    if (dot > best_score) {
      best_score = dot;
      best = j;
    }
  }
  return best;
}

TEST(AttentionOperation, TwoOperationsOnHeadsTokensAndHeadDim) {
  for (const auto precision : k_precisions) {
    const auto& op = op_of(precision);
    const auto& info = op.info();
    EXPECT_EQ(info.axes, (std::vector<std::string>{"heads", "tokens", "head_dim"})) << info.name;
    EXPECT_EQ(info.layouts, std::vector<table_layout>{table_layout::row_major});
    EXPECT_EQ(info.outputs, std::vector<std::string>{"o"});
    EXPECT_FALSE(info.bench_points.empty());
    EXPECT_EQ(kstudy::test::escape_families(info.name), std::set<std::string>{"attention_cuda"});
    const auto shape = op.shape({3, 257, 33}, table_layout::row_major, 0);
    EXPECT_EQ(shape.rows, 3);
    EXPECT_EQ(shape.features, 257);
    EXPECT_EQ(shape.depth, 33);
    EXPECT_THROW(op.shape({3, 257, 33}, table_layout::feature_major, 0), std::invalid_argument);
    EXPECT_THROW(op.shape({0, 5, 5}, table_layout::row_major, 0), std::invalid_argument);
    EXPECT_THROW(op.shape({5, 5, 0}, table_layout::row_major, 0), std::invalid_argument);
    EXPECT_EQ(op.output_bytes(shape),
              std::vector<std::int64_t>{3 * 257 * 33 * kstudy::attention::element_bytes(precision)});
  }
}

TEST(AttentionOperation, EssentialBytesAndFlops) {
  const std::int64_t h = 16, t = 16384, d = 64, m = h * t * d;
  for (const auto precision : k_precisions) {
    const auto& op = op_of(precision);
    const std::int64_t b = precision == attention_precision::fp32 ? 4 : 2;
    const auto s = op.shape({h, t, d}, table_layout::row_major, 0);
    EXPECT_EQ(op.essential_traffic(s).bytes_read, 3 * b * m);  // Q, K, V once
    EXPECT_EQ(op.essential_traffic(s).bytes_written, b * m);   // O once
    EXPECT_EQ(op.essential_flops(s), 4 * h * t * t * d);
    EXPECT_EQ(op.input_bytes(s), 3 * b * m);
    // The reference never holds a T x T matrix: sampled rows only at this size.
    EXPECT_LT(op.reference_bytes(s), 8 * 3 * m / 100);
  }
}

TEST(AttentionOperation, GeneratorIsDeterministicWithRealisticScoresAndOutliers) {
  const std::int64_t heads = 3, tokens = 1031, dim = 64, n = heads * tokens * dim;
  const auto a = generate(attention_precision::fp32, heads, tokens, dim);
  const auto b = generate(attention_precision::fp32, heads, tokens, dim);
  const auto& pa = typed(*a);
  EXPECT_EQ(std::memcmp(pa.q(), typed(*b).q(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(pa.k(), typed(*b).k(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(pa.v(), typed(*b).v(), n * sizeof(float)), 0);
  const auto c = generate(attention_precision::fp32, heads, tokens, dim, k_seed + 1);
  EXPECT_NE(std::memcmp(pa.q(), typed(*c).q(), n * sizeof(float)), 0);
  EXPECT_EQ(a->streamed_inputs().size(), 3u);
  EXPECT_EQ(a->streamed_inputs()[0].bytes, n * 4);

  // bf16: exactly the float32 values rounded to nearest even, and the accessors widen them exactly.
  const auto bf = generate(attention_precision::bf16, heads, tokens, dim);
  const auto& pb = typed(*bf);
  ASSERT_EQ(pb.q(), nullptr);
  ASSERT_NE(pb.q_bf16(), nullptr);
  EXPECT_EQ(bf->streamed_inputs()[2].bytes, n * 2);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(pb.q_bf16()[i], round_to_bf16(pa.q()[i])) << i;
    ASSERT_EQ(pb.k_bf16()[i], round_to_bf16(pa.k()[i])) << i;
    ASSERT_EQ(pb.v_bf16()[i], round_to_bf16(pa.v()[i])) << i;
    ASSERT_EQ(pb.v_at(i), widen_bf16(pb.v_bf16()[i]));
    ASSERT_EQ(pa.v_at(i), pa.v()[i]);
  }

  // V: mostly [-1, 1), a few outliers up to 32.
  std::int64_t outliers = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_LE(std::fabs(pa.v()[i]), 32.0f);
    outliers += std::fabs(pa.v()[i]) >= 8.0f;
  }
  EXPECT_GT(outliers, n / 512);
  EXPECT_LT(outliers, n / 128);
  // Scores: a typical row's spread is a few units; every head has a peaked row (|q| ~ 6x) and a sink key
  // that scores well above the rest for most queries.
  for (std::int64_t h = 0; h < heads; ++h) {
    const auto score = [&](std::int64_t i, std::int64_t j) {
      double dot = 0.0;
      for (std::int64_t d = 0; d < dim; ++d)
        dot += double(pa.q()[(h * tokens + i) * dim + d]) * pa.k()[(h * tokens + j) * dim + d];
      return dot / 8.0;
    };
    double largest_spread = 0.0, typical_spread = 0.0;
    std::int64_t typical_rows = 0;
    std::vector<double> column_mean(static_cast<std::size_t>(tokens), 0.0);
    for (std::int64_t i = 0; i < tokens; i += 7) {
      double sum = 0.0, squares = 0.0;
      for (std::int64_t j = 0; j < tokens; ++j) {
        const double s = score(i, j);
        sum += s;
        squares += s * s;
        column_mean[j] += s;
      }
      const double spread = std::sqrt(squares / tokens - (sum / tokens) * (sum / tokens));
      largest_spread = std::max(largest_spread, spread);
      if (spread < 4.0) {
        typical_spread += spread;
        ++typical_rows;
      }
    }
    typical_spread /= double(typical_rows);
    EXPECT_GT(typical_spread, 0.8) << h;
    EXPECT_LT(typical_spread, 3.0) << h;
    EXPECT_GT(largest_spread, 6.0) << h;  // a peaked row among the sampled ones, or the forced one
    const double sink = *std::max_element(column_mean.begin(), column_mean.end()) / double((tokens + 6) / 7);
    EXPECT_GT(sink, 3.0) << h;  // a key that scores ~ +5 on average
  }
  const auto copied = op_of(attention_precision::bf16).relayout(*bf, bf->shape());
  EXPECT_EQ(std::memcmp(pb.k_bf16(), typed(*copied).k_bf16(), n * 2), 0);
  EXPECT_NE(pb.k_bf16(), typed(*copied).k_bf16());
}

struct gate_case {
  std::int64_t heads, tokens, dim;
};
// Small shapes, tile edges, and shapes where the gate samples rows (H T^2 D > 2^28).
const std::vector<gate_case> k_gate_cases = {{1, 1, 1}, {1, 33, 7}, {3, 257, 33}, {2, 1031, 64}, {2, 4096, 16}};

TEST(AttentionGate, AcceptsFloat32SerialAndOnlineSoftmax) {
  KSTUDY_REQUIRE_KOKKOS();  // host_outputs are Kokkos host Views
  for (const auto precision : k_precisions) {
    const auto& op = op_of(precision);
    for (const auto& c : k_gate_cases) {
      const auto problem = generate(precision, c.heads, c.tokens, c.dim);
      const auto reference = op.reference(*problem);
      kstudy::host_outputs out(op, problem->shape());
      const auto spans = out.spans();
      const std::string where =
          op.info().name + " " + std::to_string(c.heads) + "x" + std::to_string(c.tokens) + "x" + std::to_string(c.dim);
      std::vector<emulation> ways = {{false, false, -1, 0.0f}, {true, false, -1, 0.0f}};
      if (precision == attention_precision::bf16) ways.push_back({true, true, -1, 0.0f});
      for (const auto& how : ways) {
        emulate(typed(*problem), how, spans);
        const auto g = op.check(*problem, *reference, spans);
        EXPECT_TRUE(g.passed) << where << " online " << how.online << " round_p " << how.round_p << ": " << g.message;
        EXPECT_EQ(g.checked, c.heads * c.tokens * c.dim);
        EXPECT_LE(g.max_relative_error, g.rtol) << where;
      }

      op.corrupt(*problem, spans);
      const auto bad = op.check(*problem, *reference, spans);
      EXPECT_FALSE(bad.passed) << where;
      EXPECT_EQ(bad.value_failures, 1) << where << ": " << bad.message;
      EXPECT_NE(bad.message.find("o[0, 0, 0]"), std::string::npos) << bad.message;
      EXPECT_NE(bad.message.find("bound"), std::string::npos) << bad.message;

      op.poison(spans);
      const auto poisoned = op.check(*problem, *reference, spans);
      EXPECT_FALSE(poisoned.passed) << where;
      EXPECT_EQ(poisoned.value_failures, c.heads * c.tokens * c.dim) << where;
    }
  }
}

// One element poisoned, or pushed out of its V column's range, anywhere (also in rows the gate does not
// sample); one sampled element slightly wrong.
TEST(AttentionGate, RejectsOneBadElementAnywhere) {
  KSTUDY_REQUIRE_KOKKOS();
  for (const auto precision : k_precisions) {
    const auto& op = op_of(precision);
    const auto problem = generate(precision, 2, 4096, 16);  // sampled rows
    const auto& p = typed(*problem);
    const auto reference = op.reference(*problem);
    kstudy::host_outputs out(op, problem->shape());
    const auto spans = out.spans();
    const bool bf16 = precision == attention_precision::bf16;
    const auto get = [&](std::int64_t i) {
      return bf16 ? double(widen_bf16(spans[0].as<std::uint16_t>()[i])) : double(spans[0].as<float>()[i]);
    };
    const auto set = [&](std::int64_t i, double value) {
      if (bf16)
        spans[0].as<std::uint16_t>()[i] = round_to_bf16(static_cast<float>(value));
      else
        spans[0].as<float>()[i] = static_cast<float>(value);
    };
    const std::int64_t n = p.elements();
    for (const std::int64_t i : {std::int64_t(12345), n - 1, std::int64_t(4096 * 16 + 1000 * 16 + 5)}) {
      emulate(p, {}, spans);
      ASSERT_TRUE(op.check(*problem, *reference, spans).passed);
      const double kept = get(i);
      set(i, std::numeric_limits<double>::quiet_NaN());
      if (bf16) spans[0].as<std::uint16_t>()[i] = 0xffff;
      auto g = op.check(*problem, *reference, spans);
      EXPECT_FALSE(g.passed) << op.info().name << " NaN at " << i;
      EXPECT_EQ(g.value_failures, 1);
      set(i, 40.0);  // beyond every |v| (32)
      g = op.check(*problem, *reference, spans);
      EXPECT_FALSE(g.passed) << op.info().name << " 40 at " << i;
      EXPECT_NE(g.message.find("range"), std::string::npos) << g.message;
      set(i, kept);
    }
    // Row T - 1 of head 1 is always sampled: a change far inside the V range but past the bound fails.
    const std::int64_t i = (2 * 4096 - 1) * 16 + 3;
    emulate(p, {}, spans);
    set(i, get(i) + (bf16 ? 0.05 : 2e-3));
    const auto g = op.check(*problem, *reference, spans);
    EXPECT_FALSE(g.passed) << op.info().name;
    EXPECT_EQ(g.value_failures, 1) << g.message;
    EXPECT_NE(g.message.find("o[1, 4095, 3]"), std::string::npos) << g.message;
  }
}

TEST(AttentionGate, RejectsAMissingKeyAndAWrongScale) {
  KSTUDY_REQUIRE_KOKKOS();
  for (const auto precision : k_precisions) {
    const auto& op = op_of(precision);
    for (const auto& c : std::vector<gate_case>{{2, 1031, 64}, {2, 4096, 16}}) {
      const auto problem = generate(precision, c.heads, c.tokens, c.dim);
      const auto& p = typed(*problem);
      const auto reference = op.reference(*problem);
      kstudy::host_outputs out(op, problem->shape());
      const auto spans = out.spans();
      const std::string where = op.info().name + " T=" + std::to_string(c.tokens);
      const bool bf16 = precision == attention_precision::bf16;
      for (const std::int64_t key : {heaviest_key(p), c.tokens / 2}) {
        if (bf16 && key != heaviest_key(p)) continue;  // a typical key weighs ~1/T: below bf16's 2^-8
        emulation how;
        how.round_p = bf16;
        how.skip_key = key;
        emulate(p, how, spans);
        const auto g = op.check(*problem, *reference, spans);
        EXPECT_FALSE(g.passed) << where << " without key " << key;
      }
      const float right = p.scale();
      std::vector<float> wrong = {1.0f / float(c.dim), 1.0f};
      if (!bf16)
        wrong.push_back(right * (1.0f + 0x1.0p-10f));  // 0.1%: past float32's bound
      else
        wrong.push_back(right * 1.05f);
      for (const float scale : wrong) {
        emulation how;
        how.round_p = bf16;
        how.scale = scale;
        emulate(p, how, spans);
        const auto g = op.check(*problem, *reference, spans);
        EXPECT_FALSE(g.passed) << where << " scale " << scale << " for " << right;
      }
    }
  }
}

TEST(AttentionGate, RejectsAnotherOperationsProblem) {
  const auto fp32 = generate(attention_precision::fp32, 1, 16, 8);
  EXPECT_THROW(op_of(attention_precision::bf16).reference(*fp32), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------------
// Every registered attention and attention_bf16 variant of this build

std::vector<std::string> attention_variant_ids() {
  return kstudy::test::variant_ids(
      [](const kstudy::variant_info& i) { return i.operation == "attention" || i.operation == "attention_bf16"; });
}
using kstudy::test::variant_test_name;

class AttentionVariants : public kstudy::test::registered_variant_test {};

TEST_P(AttentionVariants, PassesTheGateAtOddShapes) {
  const std::vector<std::vector<std::int64_t>> shapes = {
      {1, 1, 1}, {1, 33, 7}, {3, 257, 33}, {2, 130, 64}, {1, 1031, 64}};
  for (const auto& e : shapes)
    kstudy::test::expect_gate_passes(op(), entry(), e, k_seed + std::uint64_t(e[0] * 131 + e[1] * 7 + e[2]));
}

TEST_P(AttentionVariants, OneShotAndQueuedPathsPass) {
  kstudy::test::expect_one_shot_and_queued_paths_pass(op(), entry(), {2, 130, 64}, k_seed);
}

TEST_P(AttentionVariants, PoisonIsCaughtWhenNothingRuns) {
  const auto g = kstudy::test::poisoned_outputs_gate(op(), entry(), {2, 65, 9}, k_seed);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.value_failures, 2 * 65 * 9);
}

TEST_P(AttentionVariants, RejectsAnotherOperationsProblem) {
  const auto other = entry().info.operation == "attention" ? attention_precision::bf16 : attention_precision::fp32;
  const auto problem = generate(other, 1, 16, 8);
  auto impl = entry().make();
  EXPECT_THROW(impl->prepare(*problem, {}), std::invalid_argument);
}

TEST_P(AttentionVariants, MetadataIsComplete) {
  const auto& info = entry().info;
  EXPECT_EQ(info.layout, table_layout::row_major);
  EXPECT_FALSE(info.family.empty());
  EXPECT_FALSE(info.description.empty());
  ASSERT_TRUE(static_cast<bool>(info.traffic));
  const auto shape = op().shape({16, 4096, 64}, table_layout::row_major, 0);
  EXPECT_GE(info.traffic(shape).total(), op().essential_traffic(shape).total());
  EXPECT_GE(info.kernels_launched, 1);
  if (info.implementation == kstudy::implementation::handwritten_cuda ||
      info.implementation == kstudy::implementation::mixed) {
    EXPECT_GT(info.rung, 0);
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionVariants);
INSTANTIATE_TEST_SUITE_P(Attention, AttentionVariants, ::testing::ValuesIn(attention_variant_ids()), variant_test_name);

TEST(AttentionVariantRegistry, EveryBackendHasTheKokkosFusedKernel) {
  std::set<std::string> ids;
  for (const auto& id : attention_variant_ids()) ids.insert(id);
  for (const char* op : {"attention", "attention_bf16"}) {
    std::int64_t kokkos = 0;
    for (const auto& id : ids) {
      const auto& info = kstudy::variant_registry::instance().find(id)->info;
      if (info.operation == op &&
          info.name == (std::string(op) == "attention" ? "attention_kokkos_fused" : "attention_bf16_kokkos_fused")) {
        ++kokkos;
        EXPECT_EQ(info.family, "attention_kokkos");
        EXPECT_EQ(info.implementation, kstudy::implementation::kokkos);
        EXPECT_EQ(info.rung, 0);
      }
    }
    EXPECT_GE(kokkos, 1) << op;
  }
}

}  // namespace
