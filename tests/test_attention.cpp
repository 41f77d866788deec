// The attention operations (variants/attention: float32, bf16 and fp16, each without a mask and causal):
// registration, essential bytes and flops, the seeded generator (realistic score spread, peaked queries, sink
// keys, V outliers; bf16 and fp16 values exactly the rounded float32 ones), the gate's tolerance model (it
// accepts a serial float32 attention and a flash-style online softmax in float32, for bf16 and fp16 one that
// rounds P; it rejects corrupt(), poison anywhere, a slightly wrong sampled element, a result missing one key,
// a wrong causal mask and a wrong scale), and every registered attention variant of this build against the
// reference at odd shapes. The CUDA variants exist only in the CUDA flavour; without a GPU they skip.
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
#include "detail/fp16.hpp"
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
using kstudy::attention::attention_mask;
using kstudy::attention::attention_precision;

// An operation: its precision and mask.
struct op_kind {
  attention_precision precision;
  attention_mask mask;
};
const op_kind k_kinds[] = {
    {attention_precision::fp32, attention_mask::none},   {attention_precision::bf16, attention_mask::none},
    {attention_precision::fp16, attention_mask::none},   {attention_precision::fp32, attention_mask::causal},
    {attention_precision::bf16, attention_mask::causal}, {attention_precision::fp16, attention_mask::causal}};
constexpr std::uint64_t k_seed = 20261130;

const operation& op_of(attention_precision precision, attention_mask mask = attention_mask::none) {
  return kstudy::test::registered_operation(kstudy::attention::operation_name(precision, mask));
}
const operation& op_of(op_kind kind) { return op_of(kind.precision, kind.mask); }

std::unique_ptr<kstudy::problem_data> generate(op_kind kind, std::int64_t heads, std::int64_t tokens, std::int64_t dim,
                                               std::uint64_t seed = k_seed) {
  const auto& op = op_of(kind);
  return op.generate(op.shape({heads, tokens, dim}, table_layout::row_major, 0), seed);
}
std::unique_ptr<kstudy::problem_data> generate(attention_precision precision, std::int64_t heads, std::int64_t tokens,
                                               std::int64_t dim, std::uint64_t seed = k_seed) {
  return generate({precision, attention_mask::none}, heads, tokens, dim, seed);
}

const attention_data& typed(const kstudy::problem_data& p) { return dynamic_cast<const attention_data&>(p); }

using kstudy::detail::round_to_bf16;
using kstudy::detail::round_to_fp16;
using kstudy::detail::widen_bf16;
using kstudy::detail::widen_fp16;

// A float rounded to the problem's 16-bit storage and back (float32: unchanged).
float rounded(attention_precision precision, float x) {
  switch (precision) {
    case attention_precision::bf16:
      return widen_bf16(round_to_bf16(x));
    case attention_precision::fp16:
      return widen_fp16(round_to_fp16(x));
    default:
      return x;
  }
}
std::uint16_t bits_of(attention_precision precision, float x) {
  return precision == attention_precision::fp16 ? round_to_fp16(x) : round_to_bf16(x);
}
double widened(attention_precision precision, std::uint16_t bits) {
  return precision == attention_precision::fp16 ? widen_fp16(bits) : widen_bf16(bits);
}
std::string name_of(op_kind kind) { return kstudy::attention::operation_name(kind.precision, kind.mask); }

// How a float32 implementation computes attention (the test's emulations of the kernels the gate must pass).
struct emulation {
  bool online = true;            // flash-style: key tiles of 64, running max and sum, rescaled accumulator
  bool round_p = false;          // P rounded to the 16-bit storage before the P V product (tensor cores)
  std::int64_t skip_key = -1;    // a key left out of every row (a wrong result)
  float scale = 0.0f;            // 0: the problem's scale
  std::int64_t mask_offset = 0;  // causal problems: query t attends keys j <= t + mask_offset (0: right)
};

// Fills O (float32, or 16-bit bits rounded once) with the emulation's result for every row.
void emulate(const attention_data& p, const emulation& how, const std::vector<kstudy::host_span>& outputs) {
  const std::int64_t heads = p.heads(), tokens = p.tokens(), dim = p.head_dim();
  const float scale = how.scale != 0.0f ? how.scale : p.scale();
  const bool sixteen = p.precision() != attention_precision::fp32;
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
    const std::int64_t keys = p.causal() ? std::min(tokens, row % tokens + 1 + how.mask_offset) : tokens;
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
      const float w = how.round_p ? rounded(p.precision(), weight) : weight;
      const float* const v = &vs[(h * tokens + j) * dim];
      for (std::int64_t d = 0; d < dim; ++d) o[d] += w * v[d];
    };
    float l = 0.0f;
    if (!how.online) {
      float m = -INFINITY;
      for (std::int64_t j = 0; j < keys; ++j) {
        s[j] = score(j);
        if (j != how.skip_key) m = std::max(m, s[j]);
      }
      for (std::int64_t j = 0; j < keys; ++j) {
        s[j] = j == how.skip_key ? 0.0f : std::exp(s[j] - m);
        l += s[j];
      }
      for (std::int64_t j = 0; j < keys; ++j) accumulate(j, s[j] / l);
      l = 1.0f;
    } else {
      float m = -INFINITY;
      for (std::int64_t k0 = 0; k0 < keys; k0 += tile) {
        const std::int64_t end = std::min(keys, k0 + tile);
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
      if (sixteen)
        static_cast<std::uint16_t*>(out)[row * dim + d] = bits_of(p.precision(), value);
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

TEST(AttentionOperation, SixOperationsOnHeadsTokensAndHeadDim) {
  EXPECT_STREQ(kstudy::attention::operation_name(attention_precision::fp32, attention_mask::none), "attention");
  EXPECT_STREQ(kstudy::attention::operation_name(attention_precision::bf16, attention_mask::none), "attention_bf16");
  EXPECT_STREQ(kstudy::attention::operation_name(attention_precision::fp16, attention_mask::none), "attention_fp16");
  EXPECT_STREQ(kstudy::attention::operation_name(attention_precision::fp32, attention_mask::causal),
               "attention_causal");
  EXPECT_STREQ(kstudy::attention::operation_name(attention_precision::bf16, attention_mask::causal),
               "attention_bf16_causal");
  EXPECT_STREQ(kstudy::attention::operation_name(attention_precision::fp16, attention_mask::causal),
               "attention_fp16_causal");
  for (const auto kind : k_kinds) {
    const auto precision = kind.precision;
    const auto& op = op_of(kind);
    const auto& info = op.info();
    EXPECT_EQ(info.name, name_of(kind));
    EXPECT_EQ(info.axes, (std::vector<std::string>{"heads", "tokens", "head_dim"})) << info.name;
    EXPECT_EQ(info.layouts, std::vector<table_layout>{table_layout::row_major});
    EXPECT_EQ(info.outputs, std::vector<std::string>{"o"});
    EXPECT_FALSE(info.bench_points.empty());
    EXPECT_EQ(kstudy::test::escape_families(info.name).count("attention_cuda"), 1u) << info.name;
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
  for (const auto kind : k_kinds) {
    const auto& op = op_of(kind);
    const std::int64_t b = kind.precision == attention_precision::fp32 ? 4 : 2;
    const bool causal = kind.mask == attention_mask::causal;
    const auto s = op.shape({h, t, d}, table_layout::row_major, 0);
    EXPECT_EQ(op.essential_traffic(s).bytes_read, 3 * b * m);  // Q, K, V once
    EXPECT_EQ(op.essential_traffic(s).bytes_written, b * m);   // O once
    // Causal: half, as FlashAttention's benchmarks count (T^2 / 2 pairs, also for odd T).
    EXPECT_EQ(op.essential_flops(s), (causal ? 2 : 4) * h * t * t * d);
    const auto odd = op.shape({3, 1001, 64}, table_layout::row_major, 0);
    EXPECT_EQ(op.essential_flops(odd), (causal ? 2 : 4) * 3 * 1001 * 1001 * 64);
    EXPECT_EQ(op.input_bytes(s), 3 * b * m);
    // The reference never holds a T x T matrix (34 GB here): sampled rows only at this size, the
    // tile edges and every 64-row band's last row included, under 5% of Q, K and V in fp32.
    EXPECT_LT(op.reference_bytes(s), 3 * 4 * m / 20);
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
  ASSERT_NE(pb.q_bits(), nullptr);
  EXPECT_EQ(bf->streamed_inputs()[2].bytes, n * 2);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(pb.q_bits()[i], round_to_bf16(pa.q()[i])) << i;
    ASSERT_EQ(pb.k_bits()[i], round_to_bf16(pa.k()[i])) << i;
    ASSERT_EQ(pb.v_bits()[i], round_to_bf16(pa.v()[i])) << i;
    ASSERT_EQ(pb.v_at(i), widen_bf16(pb.v_bits()[i]));
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
  EXPECT_EQ(std::memcmp(pb.k_bits(), typed(*copied).k_bits(), n * 2), 0);
  EXPECT_NE(pb.k_bits(), typed(*copied).k_bits());
}

// fp16: the float32 values rounded to nearest even fp16, all finite (far inside its range); the causal
// operations generate the same Q, K, V as the unmasked ones and say so in mask().
TEST(AttentionOperation, Fp16AndCausalProblems) {
  const std::int64_t heads = 2, tokens = 517, dim = 64, n = heads * tokens * dim;
  const auto a = generate(attention_precision::fp32, heads, tokens, dim);
  const auto& pa = typed(*a);
  const auto half = generate(attention_precision::fp16, heads, tokens, dim);
  const auto& ph = typed(*half);
  EXPECT_EQ(ph.precision(), attention_precision::fp16);
  EXPECT_FALSE(ph.causal());
  ASSERT_EQ(ph.q(), nullptr);
  ASSERT_NE(ph.q_bits(), nullptr);
  EXPECT_EQ(half->streamed_inputs()[1].bytes, n * 2);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(ph.q_bits()[i], round_to_fp16(pa.q()[i])) << i;
    ASSERT_EQ(ph.k_bits()[i], round_to_fp16(pa.k()[i])) << i;
    ASSERT_EQ(ph.v_bits()[i], round_to_fp16(pa.v()[i])) << i;
    ASSERT_EQ(ph.q_at(i), widen_fp16(ph.q_bits()[i]));
    ASSERT_EQ(ph.v_at(i), widen_fp16(ph.v_bits()[i]));
    ASSERT_TRUE(std::isfinite(ph.q_at(i)) && std::isfinite(ph.k_at(i)) && std::isfinite(ph.v_at(i))) << i;
    ASSERT_LE(std::fabs(ph.q_at(i)), 13.5f);
  }
  for (const auto kind : k_kinds) {
    if (kind.mask != attention_mask::causal) continue;
    const auto masked = generate(kind, heads, tokens, dim);
    const auto plain = generate(kind.precision, heads, tokens, dim);
    const auto& pm = typed(*masked);
    EXPECT_TRUE(pm.causal()) << name_of(kind);
    EXPECT_EQ(pm.mask(), attention_mask::causal);
    EXPECT_EQ(pm.precision(), kind.precision);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(pm.k_at(i), typed(*plain).k_at(i)) << name_of(kind) << " " << i;
    const auto copied = op_of(kind).relayout(*masked, masked->shape());
    EXPECT_TRUE(typed(*copied).causal());
  }
}

struct gate_case {
  std::int64_t heads, tokens, dim;
};
// Small shapes, tile edges, and shapes where the gate samples rows (H T^2 D > 2^28).
const std::vector<gate_case> k_gate_cases = {{1, 1, 1}, {1, 33, 7}, {3, 257, 33}, {2, 1031, 64}, {2, 4096, 16}};

TEST(AttentionGate, AcceptsFloat32SerialAndOnlineSoftmax) {
  KSTUDY_REQUIRE_KOKKOS();  // host_outputs are Kokkos host Views
  for (const auto kind : k_kinds) {
    const auto& op = op_of(kind);
    for (const auto& c : k_gate_cases) {
      const auto problem = generate(kind, c.heads, c.tokens, c.dim);
      const auto reference = op.reference(*problem);
      kstudy::host_outputs out(op, problem->shape());
      const auto spans = out.spans();
      const std::string where =
          op.info().name + " " + std::to_string(c.heads) + "x" + std::to_string(c.tokens) + "x" + std::to_string(c.dim);
      std::vector<emulation> ways = {{false, false, -1, 0.0f}, {true, false, -1, 0.0f}};
      if (kind.precision != attention_precision::fp32) ways.push_back({true, true, -1, 0.0f});
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
  for (const auto kind : k_kinds) {
    const auto precision = kind.precision;
    const auto& op = op_of(kind);
    const auto problem = generate(kind, 2, 4096, 16);  // sampled rows
    const auto& p = typed(*problem);
    const auto reference = op.reference(*problem);
    kstudy::host_outputs out(op, problem->shape());
    const auto spans = out.spans();
    const bool sixteen = precision != attention_precision::fp32;
    const auto get = [&](std::int64_t i) {
      return sixteen ? widened(precision, spans[0].as<std::uint16_t>()[i]) : double(spans[0].as<float>()[i]);
    };
    const auto set = [&](std::int64_t i, double value) {
      if (sixteen)
        spans[0].as<std::uint16_t>()[i] = bits_of(precision, static_cast<float>(value));
      else
        spans[0].as<float>()[i] = static_cast<float>(value);
    };
    const std::int64_t n = p.elements();
    for (const std::int64_t i : {std::int64_t(12345), n - 1, std::int64_t(4096 * 16 + 1000 * 16 + 5)}) {
      emulate(p, {}, spans);
      ASSERT_TRUE(op.check(*problem, *reference, spans).passed);
      const double kept = get(i);
      set(i, std::numeric_limits<double>::quiet_NaN());
      if (sixteen) spans[0].as<std::uint16_t>()[i] = 0xffff;
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
    // Past the bound: bf16's is ~2^-8 of the output's scale, fp16's ~2^-10, float32's far below.
    const double step = precision == attention_precision::bf16   ? 0.05
                        : precision == attention_precision::fp16 ? 0.01
                                                                 : 2e-3;
    set(i, get(i) + step);
    const auto g = op.check(*problem, *reference, spans);
    EXPECT_FALSE(g.passed) << op.info().name;
    EXPECT_EQ(g.value_failures, 1) << g.message;
    EXPECT_NE(g.message.find("o[1, 4095, 3]"), std::string::npos) << g.message;
  }
}

TEST(AttentionGate, RejectsAMissingKeyAWrongMaskAndAWrongScale) {
  KSTUDY_REQUIRE_KOKKOS();
  for (const auto kind : k_kinds) {
    const auto precision = kind.precision;
    const auto& op = op_of(kind);
    const bool causal = kind.mask == attention_mask::causal;
    for (const auto& c : std::vector<gate_case>{{2, 1031, 64}, {2, 4096, 16}}) {
      const auto problem = generate(kind, c.heads, c.tokens, c.dim);
      const auto& p = typed(*problem);
      const auto reference = op.reference(*problem);
      kstudy::host_outputs out(op, problem->shape());
      const auto spans = out.spans();
      const std::string where = op.info().name + " T=" + std::to_string(c.tokens);
      const bool sixteen = precision != attention_precision::fp32;
      // Causal: key 63 weighs ~1/64 in rows 63 and 64 (always sampled); row 0 attends key 0 only, so the
      // heaviest key of the unmasked row 0 says nothing there.
      std::vector<std::int64_t> keys =
          causal ? std::vector<std::int64_t>{63} : std::vector<std::int64_t>{heaviest_key(p)};
      // A typical key weighs ~1/T: below bf16's 2^-8, not below fp16's 2^-10 at these T.
      if (precision != attention_precision::bf16) keys.push_back(c.tokens / 2);
      for (const std::int64_t key : keys) {
        emulation how;
        how.round_p = sixteen;
        how.skip_key = key;
        emulate(p, how, spans);
        const auto g = op.check(*problem, *reference, spans);
        EXPECT_FALSE(g.passed) << where << " without key " << key;
      }
      if (causal) {  // one key too many per row: j <= t + 1
        emulation how;
        how.round_p = sixteen;
        how.mask_offset = 1;
        emulate(p, how, spans);
        const auto g = op.check(*problem, *reference, spans);
        EXPECT_FALSE(g.passed) << where << " with keys j <= t + 1";
      }
      const float right = p.scale();
      std::vector<float> wrong = {1.0f / float(c.dim), 1.0f};
      if (precision == attention_precision::fp32)
        wrong.push_back(right * (1.0f + 0x1.0p-10f));  // 0.1%: past float32's bound
      else if (precision == attention_precision::fp16)
        wrong.push_back(right * 1.01f);
      else
        wrong.push_back(right * 1.05f);
      for (const float scale : wrong) {
        emulation how;
        how.round_p = sixteen;
        how.scale = scale;
        emulate(p, how, spans);
        const auto g = op.check(*problem, *reference, spans);
        EXPECT_FALSE(g.passed) << where << " scale " << scale << " for " << right;
      }
    }
  }
}

// The causal gate rejects the unmasked result, and the unmasked gate the causal one (the same Q, K, V).
TEST(AttentionGate, TellsTheMasksApart) {
  KSTUDY_REQUIRE_KOKKOS();
  for (const auto kind : k_kinds) {
    if (kind.mask != attention_mask::causal) continue;
    const auto& causal_op = op_of(kind);
    const auto& plain_op = op_of(kind.precision);
    const auto causal = generate(kind, 2, 300, 32);
    const auto plain = generate(kind.precision, 2, 300, 32);
    kstudy::host_outputs out(causal_op, causal->shape());
    const auto spans = out.spans();
    emulate(typed(*plain), {}, spans);
    EXPECT_TRUE(plain_op.check(*plain, *plain_op.reference(*plain), spans).passed) << name_of(kind);
    EXPECT_FALSE(causal_op.check(*causal, *causal_op.reference(*causal), spans).passed) << name_of(kind);
    emulate(typed(*causal), {}, spans);
    EXPECT_TRUE(causal_op.check(*causal, *causal_op.reference(*causal), spans).passed) << name_of(kind);
    EXPECT_FALSE(plain_op.check(*plain, *plain_op.reference(*plain), spans).passed) << name_of(kind);
  }
}

TEST(AttentionGate, RejectsAnotherOperationsProblem) {
  for (const auto kind : k_kinds)
    for (const auto other : k_kinds) {
      if (kind.precision == other.precision && kind.mask == other.mask) continue;
      const auto problem = generate(other, 1, 16, 8);
      EXPECT_THROW(op_of(kind).reference(*problem), std::invalid_argument) << name_of(kind) << " " << name_of(other);
    }
}

// One K/V tile of 128 keys left out of one block of query rows: what a fused kernel that mis-indexes a tile of
// one block (a tile count one short, a diagonal tile skipped, a stage read twice) leaves, slightly wrong and
// finite. The block's rows attend all their keys but the tile's, in float64; every other row is as
// reference_outputs() writes it. Blocks of 192 rows (rung 8's; 128-row blocks are a subset).
struct dropped_tile {
  std::int64_t head, first_row, first_key;
};
void drop_key_tile(const attention_data& p, const dropped_tile& drop, const std::vector<kstudy::host_span>& outputs) {
  constexpr std::int64_t block_rows = 192, tile_keys = 128;
  const std::int64_t tokens = p.tokens(), dim = p.head_dim();
  const double scale = 1.0 / std::sqrt(double(dim));
  const std::int64_t end_row = std::min(tokens, drop.first_row + block_rows);
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t t = drop.first_row; t < end_row; ++t) {
    const std::int64_t row = drop.head * tokens + t, keys = p.causal() ? t + 1 : tokens;
    const auto kept = [&](std::int64_t j) { return j < drop.first_key || j >= drop.first_key + tile_keys; };
    std::vector<double> s(static_cast<std::size_t>(keys)), o(static_cast<std::size_t>(dim), 0.0);
    double m = -INFINITY, sum = 0.0;
    for (std::int64_t j = 0; j < keys; ++j) {
      if (!kept(j)) continue;
      double dot = 0.0;
      for (std::int64_t d = 0; d < dim; ++d)
        dot += double(p.q_at(row * dim + d)) * double(p.k_at((drop.head * tokens + j) * dim + d));
      s[static_cast<std::size_t>(j)] = scale * dot;
      m = std::max(m, scale * dot);
    }
    for (std::int64_t j = 0; j < keys; ++j) {
      if (!kept(j)) continue;
      const double w = std::exp(s[static_cast<std::size_t>(j)] - m);
      sum += w;
      for (std::int64_t d = 0; d < dim; ++d)
        o[static_cast<std::size_t>(d)] += w * double(p.v_at((drop.head * tokens + j) * dim + d));
    }
    for (std::int64_t d = 0; d < dim; ++d)
      outputs[0].as<std::uint16_t>()[row * dim + d] = bits_of(p.precision(), static_cast<float>(o[d] / sum));
  }
}

// At the largest point of the Hopper experiments' head_dim 64, T = 16,384, on 2 heads (the gate's bounds and
// its choice of rows depend on the tokens and head_dim, not on the heads), where the gate checks sampled rows
// exactly: the last block of a head missing its last tile (with the causal mask the diagonal one), its first,
// or one in the middle; a block in the middle of a head missing a tile; the first block missing keys 128..255
// (with the causal mask its diagonal tile, which only rows 128..191 attend). The last two were below the
// point's bound (0.37 of it for bf16, 0.50 for fp16) or in no sampled row when the gate sampled 23 rows a head;
// it now also samples the last row of every 64-row band, which every block of query rows ends on.
TEST(AttentionGate, RejectsOneKeyTileDroppedFromOneBlock) {
  KSTUDY_REQUIRE_KOKKOS();
  for (const auto kind : k_kinds) {
    if (kind.precision == attention_precision::fp32) continue;  // the 16-bit operations the wgmma rungs serve
    const auto& op = op_of(kind);
    const bool causal = kind.mask == attention_mask::causal;
    for (const auto& c : std::vector<gate_case>{{2, 16384, 64}, {3, 1000, 64}}) {
      const auto problem = generate(kind, c.heads, c.tokens, c.dim);
      const auto& p = typed(*problem);
      const auto reference = op.reference(*problem);
      kstudy::host_outputs out(op, problem->shape());
      const auto spans = out.spans();
      const std::int64_t last_block = (c.tokens - 1) / 192 * 192;
      const std::vector<dropped_tile> drops =
          c.tokens > 4096 ? std::vector<dropped_tile>{{1, last_block, (c.tokens - 1) / 128 * 128},
                                                      {1, last_block, 0},
                                                      {1, last_block, c.tokens / 2},
                                                      {1, 192 * 37, 4096},
                                                      {0, 0, 128}}
                          : std::vector<dropped_tile>{{0, 0, causal ? 128 : 0}, {2, last_block, 512}};
      for (const auto& drop : drops) {
        const std::string where = op.info().name + " " + std::to_string(c.heads) + "x" + std::to_string(c.tokens) +
                                  "x" + std::to_string(c.dim) + " head " + std::to_string(drop.head) + " rows " +
                                  std::to_string(drop.first_row) + "+ without keys " + std::to_string(drop.first_key) +
                                  "+";
        EXPECT_EQ(op.reference_outputs(*problem, *reference, spans), c.tokens <= 4096) << where;
        ASSERT_TRUE(op.check(*problem, *reference, spans).passed) << where;
        drop_key_tile(p, drop, spans);
        const auto g = op.check(*problem, *reference, spans);
        EXPECT_FALSE(g.passed) << where;
        // Caught as wrong against the reference, not as out of range.
        EXPECT_NE(g.message.find("but the float64 reference is"), std::string::npos) << where << ": " << g.message;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Every registered variant of the attention operations in this build

bool is_attention_operation(const std::string& name) {
  for (const auto kind : k_kinds)
    if (name == name_of(kind)) return true;
  return false;
}
std::vector<std::string> attention_variant_ids() {
  return kstudy::test::variant_ids([](const kstudy::variant_info& i) { return is_attention_operation(i.operation); });
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

// Another precision's problem, and the same precision's with the other mask.
TEST_P(AttentionVariants, RejectsAnotherOperationsProblem) {
  for (const auto kind : k_kinds) {
    if (name_of(kind) == entry().info.operation) continue;
    const auto problem = generate(kind, 1, 16, 8);
    auto impl = entry().make();
    EXPECT_THROW(impl->prepare(*problem, {}), std::invalid_argument) << name_of(kind);
  }
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
  for (const auto kind : k_kinds) {
    const std::string op = name_of(kind);
    std::int64_t kokkos = 0;
    for (const auto& id : ids) {
      const auto& info = kstudy::variant_registry::instance().find(id)->info;
      if (info.operation == op && info.name == op + "_kokkos_fused") {
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
