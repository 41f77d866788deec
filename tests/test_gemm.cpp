// The GEMM operations (variants/gemm): registration, essential bytes and flops, the seeded generator
// (layout independence, bfloat16 and binary16 values; the binary16 rounding itself), the gate's tolerance model (it
// accepts float32 products summed serially, with FMA, in blocks and trees, with truncating 8-term accumulation, and
// TF32-rounded or -truncated products for gemm_tf32; it rejects corrupt(), a NaN anywhere, one element just past its
// bound, a dropped k term, an unwritten tile and a wrong element the sampling misses), and every registered gemm
// variant of this build against the reference at odd shapes in both layouts. The CUDA variants exist only
// in the CUDA flavour; without a GPU their tests skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/fp16.hpp"
#include "gemm/gemm.hpp"
#include "escape_families.hpp"
#include "kokkos_test_support.hpp"
#include "kstudy/host_io.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/point_inputs.hpp"
#include "kstudy/variant.hpp"

namespace {

using kstudy::host_span;
using kstudy::operation;
using kstudy::table_layout;
using kstudy::gemm::gemm_data;
using kstudy::gemm::gemm_precision;

const gemm_precision k_precisions[] = {gemm_precision::fp32, gemm_precision::tf32, gemm_precision::bf16,
                                       gemm_precision::fp16};
const table_layout k_layouts[] = {table_layout::row_major, table_layout::feature_major};
constexpr std::uint64_t k_seed = 20261130;
constexpr double k_u = 0x1.0p-24;

const operation& op_of(gemm_precision p) { return kstudy::test::registered_operation(kstudy::gemm::operation_name(p)); }

std::unique_ptr<kstudy::problem_data> generate(gemm_precision p, std::int64_t m, std::int64_t n, std::int64_t k,
                                               table_layout layout = table_layout::row_major,
                                               std::uint64_t seed = k_seed) {
  const auto& op = op_of(p);
  return op.generate(op.shape({m, n, k}, layout, 0), seed);
}

const gemm_data& typed(const kstudy::problem_data& p) { return dynamic_cast<const gemm_data&>(p); }

// A host C of the problem's shape, without Kokkos.
struct output {
  std::vector<float> c;
  explicit output(const gemm_data& p) : c(static_cast<std::size_t>(p.m() * p.n())) {}
  std::vector<host_span> spans() { return {{c.data(), std::int64_t(c.size() * sizeof(float))}}; }
  float& at(const gemm_data& p, std::int64_t i, std::int64_t j) {
    return c[static_cast<std::size_t>(p.row_major() ? i * p.n() + j : j * p.m() + i)];
  }
};

// How a test product rounds its inputs (TF32 keeps 10 mantissa bits) and sums its terms.
enum class input_rounding { none, tf32_nearest, tf32_truncated };
enum class summation { serial, fma_chain, blocked_tree, truncated_blocks8 };

float round_input(float v, input_rounding r) {
  if (r == input_rounding::none) return v;
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if (r == input_rounding::tf32_nearest) bits += 0xfffu + ((bits >> 13) & 1u);
  bits &= ~0x1fffu;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// The float result of a sum truncated toward zero (a tensor core's accumulate step).
float truncate_to_float(double s) {
  float f = static_cast<float>(s);
  if (std::fabs(double(f)) > std::fabs(s)) f = std::nextafter(f, 0.0f);
  return f;
}

float dot(const float* a, const float* b, std::int64_t k, summation how, std::int64_t skip) {
  switch (how) {
    case summation::serial: {
      float s = 0.0f;
      for (std::int64_t l = 0; l < k; ++l)
        if (l != skip) s += a[l] * b[l];
      return s;
    }
    case summation::fma_chain: {
      float s = 0.0f;
      for (std::int64_t l = 0; l < k; ++l)
        if (l != skip) s = std::fma(a[l], b[l], s);
      return s;
    }
    case summation::blocked_tree: {
      std::vector<float> partials;
      for (std::int64_t l0 = 0; l0 < k; l0 += 64) {
        float s = 0.0f;
        for (std::int64_t l = l0; l < std::min(k, l0 + 64); ++l)
          if (l != skip) s += a[l] * b[l];
        partials.push_back(s);
      }
      while (partials.size() > 1) {
        std::vector<float> next;
        for (std::size_t i = 0; i + 1 < partials.size(); i += 2) next.push_back(partials[i] + partials[i + 1]);
        if (partials.size() % 2 == 1) next.push_back(partials.back());
        partials.swap(next);
      }
      return partials.front();
    }
    case summation::truncated_blocks8: {
      float s = 0.0f;
      for (std::int64_t l0 = 0; l0 < k; l0 += 8) {
        double block = 0.0;  // 8 exact products summed without error (to double precision)
        for (std::int64_t l = l0; l < std::min(k, l0 + 8); ++l)
          if (l != skip) block += double(a[l]) * double(b[l]);
        s = truncate_to_float(double(s) + block);
      }
      return s;
    }
  }
  return 0.0f;
}

// C = A B the way a float32 implementation computes it, into out (the problem's layout); term `skip` of
// every dot product left out when >= 0.
void fill_product(const gemm_data& p, summation how, input_rounding r, output& out, std::int64_t skip = -1) {
  const std::int64_t m = p.m(), n = p.n(), k = p.k();
  std::vector<float> a(static_cast<std::size_t>(m * k)), bt(static_cast<std::size_t>(n * k));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t l = 0; l < k; ++l) a[std::size_t(i * k + l)] = round_input(p.a_at(i, l), r);
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t l = 0; l < k; ++l) bt[std::size_t(j * k + l)] = round_input(p.b_at(l, j), r);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      out.at(p, i, j) = dot(&a[std::size_t(i * k)], &bt[std::size_t(j * k)], k, how, skip);
}

void element_reference(const gemm_data& p, std::int64_t i, std::int64_t j, double& value, double& scale) {
  value = scale = 0.0;
  for (std::int64_t l = 0; l < p.k(); ++l) {
    const double t = double(p.a_at(i, l)) * double(p.b_at(l, j));
    value += t;
    scale += std::fabs(t);
  }
}

// The float nearest ref + factor * bound, moved outward until it is more than factor * bound away.
float displaced(double ref, double bound, double factor) {
  float v = static_cast<float>(ref + factor * bound);
  while (!(std::fabs(double(v) - ref) > factor * bound)) v = std::nextafter(v, INFINITY);
  return v;
}

TEST(GemmOperation, FourOperationsOnMNK) {
  for (const auto precision : k_precisions) {
    const auto& op = op_of(precision);
    const auto& info = op.info();
    EXPECT_EQ(info.name, kstudy::gemm::operation_name(precision));
    EXPECT_EQ(info.axes, (std::vector<std::string>{"m", "n", "k"}));
    EXPECT_EQ(info.layouts, (std::vector<table_layout>{table_layout::row_major, table_layout::feature_major}));
    EXPECT_EQ(info.outputs, std::vector<std::string>{"c"});
    EXPECT_FALSE(info.bench_points.empty());
    EXPECT_EQ(kstudy::test::escape_families(info.name),
              (std::set<std::string>{precision == gemm_precision::fp32 ? "gemm_cuda" : "gemm_tensor_cuda", "cublas"}));
    const auto shape = op.shape({37, 29, 263}, table_layout::feature_major, 0);
    EXPECT_EQ(shape.rows, 37);
    EXPECT_EQ(shape.features, 29);
    EXPECT_EQ(shape.depth, 263);
    EXPECT_EQ(op.output_bytes(shape), std::vector<std::int64_t>{37 * 29 * 4});
    EXPECT_THROW(op.shape({37, 29}, table_layout::row_major, 0), std::invalid_argument);
    EXPECT_THROW(op.shape({37, 29, 0}, table_layout::row_major, 0), std::invalid_argument);
    EXPECT_THROW(op.shape({37, 29, 5}, table_layout::padded_row_major, 0), std::invalid_argument);
  }
}

TEST(GemmOperation, EssentialBytesAndFlops) {
  const std::int64_t m = 8192, n = 1024, k = 4096;
  for (const auto precision : k_precisions) {
    const auto& op = op_of(precision);
    const auto s = op.shape({m, n, k}, table_layout::row_major, 0);
    const std::int64_t e = kstudy::gemm::stores_16_bit(precision) ? 2 : 4;
    EXPECT_EQ(op.essential_traffic(s).bytes_read, (m * k + k * n) * e);
    EXPECT_EQ(op.essential_traffic(s).bytes_written, m * n * 4);
    EXPECT_EQ(op.essential_flops(s), 2 * m * n * k);
    EXPECT_EQ(op.input_bytes(s), (m * k + k * n) * e);
    // Sampled: 2 + 2 x 5 edge lines + 32 random rows and columns, two doubles per element; the row
    // projections two doubles per row and 32-column block, the column ones two per column, and B V (k x
    // blocks, two doubles) while it is built.
    EXPECT_EQ(op.reference_bytes(s),
              44 * 8 + 44 * 8 + 16 * (44 * n + 44 * m) + 16 * (m * (n / 32) + n) + 16 * k * (n / 32));
    // Checked everywhere at m n k <= 2^27: every row.
    const auto small = op.shape({100, 30, 263}, table_layout::row_major, 0);
    EXPECT_EQ(op.reference_bytes(small), 100 * 8 + 16 * 100 * 30 + 16 * (100 + 30) + 16 * 263);
  }
}

TEST(GemmOperation, GeneratorIsDeterministicLayoutIndependentWithOutliers) {
  const std::int64_t m = 97, n = 61, k = 1031;
  for (const auto precision : k_precisions) {
    const auto a = generate(precision, m, n, k), b = generate(precision, m, n, k);
    const auto c = generate(precision, m, n, k, table_layout::row_major, k_seed + 1);
    const auto left = generate(precision, m, n, k, table_layout::feature_major);
    const auto relaid =
        op_of(precision).relayout(*a, op_of(precision).shape({m, n, k}, table_layout::feature_major, 0));
    std::int64_t zeros = 0, outliers = 0, differ = 0;
    double sum = 0.0;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t l = 0; l < k; ++l) {
        const float v = typed(*a).a_at(i, l);
        ASSERT_EQ(v, typed(*b).a_at(i, l));
        ASSERT_EQ(v, typed(*left).a_at(i, l));
        ASSERT_EQ(v, typed(*relaid).a_at(i, l));
        ASSERT_TRUE(std::isfinite(v));
        ASSERT_LE(std::fabs(v), 64.0f);
        differ += v != typed(*c).a_at(i, l);
        zeros += v == 0.0f;
        outliers += std::fabs(v) >= 1.0f;
        sum += v;
      }
    for (std::int64_t l = 0; l < k; ++l)
      for (std::int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(typed(*a).b_at(l, j), typed(*left).b_at(l, j));
        ASSERT_EQ(typed(*a).b_at(l, j), typed(*relaid).b_at(l, j));
      }
    const double count = double(m * k);
    EXPECT_GT(differ, m * k * 9 / 10);
    EXPECT_GT(zeros, 0);
    EXPECT_LT(zeros / count, 0.003);
    EXPECT_GT(outliers / count, 0.007);
    EXPECT_LT(outliers / count, 0.013);
    EXPECT_LT(std::fabs(sum / count), 0.05);  // zero mean (outliers: |v| up to 64 with 1% weight)
    EXPECT_EQ(a->streamed_inputs().size(), 2u);
    EXPECT_EQ(a->streamed_inputs()[0].bytes, m * k * kstudy::gemm::input_element_bytes(precision));
    EXPECT_EQ(a->streamed_inputs()[1].bytes, k * n * kstudy::gemm::input_element_bytes(precision));
  }
}

TEST(GemmOperation, Bf16ValuesAreTheNearestBf16OfTheFloatValues) {
  const auto f = generate(gemm_precision::fp32, 40, 50, 333), h = generate(gemm_precision::bf16, 40, 50, 333);
  const auto tf = generate(gemm_precision::tf32, 40, 50, 333);
  EXPECT_EQ(typed(*h).a(), nullptr);
  EXPECT_NE(typed(*h).a_bf16(), nullptr);
  EXPECT_EQ(typed(*f).a_bf16(), nullptr);
  std::int64_t inexact = 0;
  for (std::int64_t i = 0; i < 40; ++i)
    for (std::int64_t l = 0; l < 333; ++l) {
      const float x = typed(*f).a_at(i, l), y = typed(*h).a_at(i, l);
      ASSERT_EQ(x, typed(*tf).a_at(i, l));  // gemm_tf32 stores the same plain floats
      std::uint32_t bits;
      std::memcpy(&bits, &y, sizeof bits);
      ASSERT_EQ(bits & 0xffffu, 0u);  // representable in bfloat16
      // Nearest: within half a bfloat16 ulp (2^-8 relative).
      ASSERT_LE(std::fabs(double(x) - double(y)), std::ldexp(std::fabs(double(x)), -8) + 1e-45) << x << " " << y;
      inexact += x != y;
    }
  EXPECT_GT(inexact, 40 * 333 / 2);  // the floats have more than 8 mantissa bits
}

// gemm_fp16 stores the nearest-even binary16 of gemm's float values (as +0 below the least normal, 2^-14).
TEST(GemmOperation, Fp16ValuesAreTheNearestFp16OfTheFloatValues) {
  const auto f = generate(gemm_precision::fp32, 40, 50, 333), h = generate(gemm_precision::fp16, 40, 50, 333);
  EXPECT_EQ(typed(*h).a(), nullptr);
  EXPECT_NE(typed(*h).a_fp16(), nullptr);
  EXPECT_EQ(typed(*h).a_bf16(), nullptr);  // not bfloat16 patterns
  EXPECT_EQ(typed(*h).a_16bit(), typed(*h).a_fp16());
  EXPECT_EQ(typed(*f).a_fp16(), nullptr);
  std::int64_t inexact = 0;
  for (std::int64_t i = 0; i < 40; ++i)
    for (std::int64_t l = 0; l < 333; ++l) {
      const float x = typed(*f).a_at(i, l), y = typed(*h).a_at(i, l);
      const std::uint16_t bits = typed(*h).a_fp16()[i * 333 + l];
      ASSERT_EQ(y, kstudy::detail::widen_fp16(bits));
      ASSERT_TRUE(y == 0.0f || std::fabs(y) >= 0x1.0p-14f) << y;  // no subnormal input
      if (std::fabs(x) < 0x1.0p-14f) {
        ASSERT_EQ(bits, 0u) << x;
        continue;
      }
      ASSERT_EQ(bits, kstudy::detail::round_to_fp16(x)) << x;
      // Nearest: within half a binary16 ulp (2^-11 relative).
      ASSERT_LE(std::fabs(double(x) - double(y)), std::ldexp(std::fabs(double(x)), -11)) << x << " " << y;
      inexact += x != y;
    }
  EXPECT_GT(inexact, 40 * 333 / 2);  // the floats have more than 11 significant bits
  for (std::int64_t l = 0; l < 333; ++l)
    for (std::int64_t j = 0; j < 50; ++j) {
      const float x = typed(*f).b_at(l, j);
      const float expected =
          std::fabs(x) < 0x1.0p-14f ? 0.0f : kstudy::detail::widen_fp16(kstudy::detail::round_to_fp16(x));
      ASSERT_EQ(typed(*h).b_at(l, j), expected) << x;
    }
}

// The binary16 helpers (detail/fp16.hpp): widening is exact and rounding inverts it on every pattern; around
// every pair of neighbouring finite values (subnormal, normal, the step to infinity) a float just below the
// midpoint rounds down, just above rounds up, and the midpoint to the even one.
TEST(GemmFp16Format, WidenIsExactAndRoundIsNearestEven) {
  using kstudy::detail::round_to_fp16;
  using kstudy::detail::widen_fp16;
  EXPECT_EQ(widen_fp16(0x3c00), 1.0f);
  EXPECT_EQ(widen_fp16(0xc000), -2.0f);
  EXPECT_EQ(widen_fp16(0x7bff), 65504.0f);
  EXPECT_EQ(widen_fp16(0x0400), 0x1.0p-14f);
  EXPECT_EQ(widen_fp16(0x0001), 0x1.0p-24f);
  EXPECT_EQ(widen_fp16(0x83ff), -0x1.ff8p-15f);
  EXPECT_EQ(widen_fp16(0x7c00), INFINITY);
  EXPECT_EQ(widen_fp16(0xfc00), -INFINITY);
  EXPECT_TRUE(std::isnan(widen_fp16(0x7e00)));
  EXPECT_TRUE(std::signbit(widen_fp16(0x8000)) && widen_fp16(0x8000) == 0.0f);
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float v = widen_fp16(bits);
    if (std::isnan(v)) {
      ASSERT_TRUE(std::isnan(widen_fp16(round_to_fp16(v)))) << h;
      continue;
    }
    ASSERT_EQ(round_to_fp16(v), bits) << h;
    if ((h & 0x7fffu) >= 0x7c00u) continue;  // infinity: no next value
    // One step away from zero (to infinity from the largest finite value).
    const float next = widen_fp16(static_cast<std::uint16_t>(h + 1));
    const double mid = std::isinf(next) ? std::copysign(65520.0, double(v)) : (double(v) + double(next)) / 2;
    const auto mid_f = static_cast<float>(mid);
    ASSERT_EQ(double(mid_f), mid) << h;  // 12 significant bits: exact in float
    const auto even = (h & 1u) == 0 ? bits : static_cast<std::uint16_t>(h + 1);
    ASSERT_EQ(round_to_fp16(mid_f), even) << h;
    ASSERT_EQ(round_to_fp16(std::nextafter(mid_f, 0.0f)), bits) << h;
    ASSERT_EQ(round_to_fp16(std::nextafter(mid_f, std::copysign(INFINITY, mid_f))), static_cast<std::uint16_t>(h + 1))
        << h;
  }
  EXPECT_EQ(round_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(round_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(round_to_fp16(1e-10f), 0x0000);
  EXPECT_EQ(round_to_fp16(-1e-10f), 0x8000);
  EXPECT_EQ(round_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

struct accepted_case {
  summation how;
  input_rounding rounding;
  const char* name;
};

// The gate accepts float32 products of every plausible accumulation order; prints the largest
// |error| / (u S) measured, the margin the tolerance model (operation.cpp) is set against.
TEST(GemmGate, AcceptsFloat32ProductsInEveryOrder) {
  const std::vector<std::vector<std::int64_t>> shapes = {{1, 1, 1},      {1, 33, 7},    {37, 29, 263},
                                                         {64, 48, 8192}, {8, 8, 65536}, {520, 260, 1000}};
  const std::vector<accepted_case> float_cases = {{summation::serial, input_rounding::none, "serial"},
                                                  {summation::fma_chain, input_rounding::none, "fma chain"},
                                                  {summation::blocked_tree, input_rounding::none, "64-blocks + tree"}};
  for (const auto precision : k_precisions) {
    auto cases = float_cases;
    // A tensor core's truncating accumulate: the tensor-core operations only (CUDA cores round to nearest).
    if (precision != gemm_precision::fp32)
      cases.push_back({summation::truncated_blocks8, input_rounding::none, "truncated 8-blocks"});
    if (precision == gemm_precision::tf32) {
      cases.push_back({summation::serial, input_rounding::tf32_nearest, "tf32 nearest, serial"});
      cases.push_back(
          {summation::truncated_blocks8, input_rounding::tf32_truncated, "tf32 truncated, truncated 8-blocks"});
    }
    const auto& op = op_of(precision);
    for (const auto& e : shapes) {
      for (const auto layout : k_layouts) {
        // Time: the largest shapes in one layout (the gate reads both the same way through the layout).
        if (e[0] * e[1] * e[2] > (1 << 26) && layout == table_layout::feature_major) continue;
        const auto problem = generate(precision, e[0], e[1], e[2], layout);
        const auto& p = typed(*problem);
        const auto reference = op.reference(p);
        output out(p);
        for (const auto& c : cases) {
          fill_product(p, c.how, c.rounding, out);
          const auto g = op.check(p, *reference, out.spans());
          const std::string where = op.info().name + " " + std::to_string(e[0]) + "x" + std::to_string(e[1]) + "x" +
                                    std::to_string(e[2]) + " " + std::string(kstudy::to_string(layout)) + " " + c.name;
          EXPECT_TRUE(g.passed) << where << ": " << g.message;
          EXPECT_EQ(g.checked, e[0] * e[1]);
          EXPECT_LE(g.max_relative_error, g.rtol) << where;
          if (layout == table_layout::row_major && e[2] >= 8192)
            std::cout << "[ gemm gate ] " << where << ": max |error| / (u S) = " << g.max_relative_error / k_u
                      << " (rtol / u = " << g.rtol / k_u << ")\n";
        }
      }
    }
  }
}

TEST(GemmGate, RejectsCorruptPoisonAndElementsJustPastTheirBound) {
  // 520 x 260 x 1000 > 2^27: sampled rows and columns; the others are checked everywhere.
  const std::vector<std::vector<std::int64_t>> shapes = {{1, 1, 1}, {1, 33, 7}, {37, 29, 263}, {520, 260, 1000}};
  for (const auto precision : k_precisions) {
    const auto& op = op_of(precision);
    for (const auto& e : shapes) {
      for (const auto layout : k_layouts) {
        const auto problem = generate(precision, e[0], e[1], e[2], layout);
        const auto& p = typed(*problem);
        const auto reference = op.reference(p);
        output out(p);
        const std::string where = op.info().name + " " + std::to_string(e[0]) + "x" + std::to_string(e[1]) + "x" +
                                  std::to_string(e[2]) + " " + std::string(kstudy::to_string(layout));
        fill_product(p, summation::serial, input_rounding::none, out);
        const std::vector<float> product = out.c;
        const auto good = op.check(p, *reference, out.spans());
        ASSERT_TRUE(good.passed) << where << ": " << good.message;

        op.corrupt(p, out.spans());
        const auto bad = op.check(p, *reference, out.spans());
        EXPECT_FALSE(bad.passed) << where;
        EXPECT_EQ(bad.value_failures, 1) << where << ": " << bad.message;
        EXPECT_NE(bad.message.find("c[0, 0]"), std::string::npos) << bad.message;
        EXPECT_NE(bad.message.find("bound"), std::string::npos) << bad.message;

        // The last row is always sampled: an element of it at 0.9 of its bound passes, at just past it fails.
        out.c = product;
        const std::int64_t i = e[0] - 1, j = e[1] / 2;
        double value, scale;
        element_reference(p, i, j, value, scale);
        const double bound = good.rtol * scale + good.atol;
        out.at(p, i, j) = static_cast<float>(value + 0.9 * bound);
        if (std::fabs(double(out.at(p, i, j)) - value) <= bound) {
          const auto within = op.check(p, *reference, out.spans());
          EXPECT_TRUE(within.passed) << where << ": " << within.message;
        }
        out.at(p, i, j) = displaced(value, bound, 1.0);
        const auto past = op.check(p, *reference, out.spans());
        EXPECT_FALSE(past.passed) << where;
        EXPECT_EQ(past.value_failures, 1) << where << ": " << past.message;
        const std::string index = "c[" + std::to_string(i) + ", " + std::to_string(j) + "]";
        EXPECT_NE(past.message.find(index), std::string::npos) << past.message;

        // One NaN anywhere, sampled or not.
        out.c = product;
        out.at(p, e[0] / 3, (2 * e[1]) / 3) = std::numeric_limits<float>::quiet_NaN();
        const auto nan = op.check(p, *reference, out.spans());
        EXPECT_FALSE(nan.passed) << where;
        EXPECT_EQ(nan.value_failures, 1) << where << ": " << nan.message;

        op.poison(out.spans());
        const auto poisoned = op.check(p, *reference, out.spans());
        EXPECT_FALSE(poisoned.passed) << where;
        EXPECT_EQ(poisoned.value_failures, e[0] * e[1]) << where;
      }
    }
  }
}

TEST(GemmGate, RejectsADroppedTermAnUnwrittenTileAndAWrongUnsampledElement) {
  for (const auto precision : k_precisions) {
    const auto& op = op_of(precision);
    for (const auto layout : k_layouts) {
      // k = 263, not a multiple of 8, checked everywhere; 520 x 260 x 1000 sampled.
      for (const std::int64_t k : {std::int64_t(263), std::int64_t(1000)}) {
        const auto problem = generate(precision, 520, 260, k, layout);
        const auto& p = typed(*problem);
        const auto reference = op.reference(p);
        output out(p);
        const std::string where =
            op.info().name + " k=" + std::to_string(k) + " " + std::string(kstudy::to_string(layout));
        fill_product(p, summation::serial, input_rounding::none, out, /*skip=*/k - 1);
        const auto dropped = op.check(p, *reference, out.spans());
        EXPECT_FALSE(dropped.passed) << where;
        // Everywhere at k = 263; at k = 1000 the TF32 bound (2^-9 S) is above many single terms.
        EXPECT_GT(dropped.value_failures, k == 263 ? 1000 : 100) << where << ": " << dropped.message;

        // A 16 x 16 tile left poisoned (unwritten) away from the tile edges.
        fill_product(p, summation::serial, input_rounding::none, out);
        const std::vector<float> product = out.c;
        for (std::int64_t i = 400; i < 416; ++i)
          for (std::int64_t j = 200; j < 216; ++j) out.at(p, i, j) = std::numeric_limits<float>::quiet_NaN();
        const auto tile = op.check(p, *reference, out.spans());
        EXPECT_FALSE(tile.passed) << where;
        EXPECT_EQ(tile.value_failures, 256) << where;
        EXPECT_NE(tile.message.find("c[400, 200]"), std::string::npos) << tile.message;

        // One finite element wrong by more than the summed bounds of its 32-column block (not of its whole
        // row, 8x more here and n times its own bound at large n): the block projections see it wherever
        // it is (an unsampled row, at k = 1000).
        out.c = product;
        const std::int64_t i = 411, j = 203;
        double block_scale = 0.0, own_scale = 0.0;
        for (std::int64_t jj = j / 32 * 32; jj < std::min(p.n(), j / 32 * 32 + 32); ++jj) {
          double value, scale;
          element_reference(p, i, jj, value, scale);
          block_scale += scale;
          if (jj == j) own_scale = scale;
        }
        const double block_bound = tile.rtol * block_scale + 32 * tile.atol;
        EXPECT_LT(block_scale, 128 * own_scale) << where;  // a modest factor of the element's own bound
        out.at(p, i, j) += static_cast<float>(1.5 * block_bound);
        const auto wrong = op.check(p, *reference, out.spans());
        EXPECT_FALSE(wrong.passed) << where;
        EXPECT_EQ(wrong.value_failures, 1) << where << ": " << wrong.message;
        if (k == 1000 && wrong.message.find("c[411, 203]") == std::string::npos) {  // row 411 not sampled
          EXPECT_NE(wrong.message.find("columns 192..223"), std::string::npos) << wrong.message;
        }
      }
    }
  }
}

TEST(GemmGate, RejectsAnotherOperationsProblem) {
  const auto bf16 = generate(gemm_precision::bf16, 4, 5, 6);
  EXPECT_THROW(op_of(gemm_precision::fp32).reference(*bf16), std::invalid_argument);
  EXPECT_THROW(op_of(gemm_precision::fp16).reference(*bf16), std::invalid_argument);  // 16-bit, other format
  const auto fp16 = generate(gemm_precision::fp16, 4, 5, 6);
  EXPECT_THROW(op_of(gemm_precision::bf16).reference(*fp16), std::invalid_argument);
  const auto fp32 = generate(gemm_precision::fp32, 4, 5, 6);
  EXPECT_THROW(op_of(gemm_precision::tf32).reference(*fp32), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------------
// Every registered variant of the four gemm operations in this build

// The precision of a gemm operation's name.
gemm_precision precision_of(const std::string& operation_name) {
  for (const auto precision : k_precisions)
    if (operation_name == kstudy::gemm::operation_name(precision)) return precision;
  throw std::invalid_argument(operation_name + " is not a gemm operation");
}

std::vector<std::string> gemm_variant_ids() {
  return kstudy::test::variant_ids([](const kstudy::variant_info& i) {
    return std::any_of(std::begin(k_precisions), std::end(k_precisions),
                       [&](gemm_precision p) { return i.operation == kstudy::gemm::operation_name(p); });
  });
}
using kstudy::test::variant_test_name;

class GemmVariants : public kstudy::test::registered_variant_test {};

TEST_P(GemmVariants, PassesTheGateAtOddShapes) {
  const std::vector<std::vector<std::int64_t>> shapes = {
      {1, 1, 1}, {1, 33, 7}, {37, 29, 263}, {130, 67, 129}, {257, 131, 65}};
  for (const auto& e : shapes)
    kstudy::test::expect_gate_passes(op(), entry(), e, k_seed + std::uint64_t(e[0] * 131 + e[1] * 7 + e[2]));
}

TEST_P(GemmVariants, OneShotAndQueuedPathsPass) {
  kstudy::test::expect_one_shot_and_queued_paths_pass(op(), entry(), {67, 130, 33}, k_seed);
}

TEST_P(GemmVariants, PoisonIsCaughtWhenNothingRuns) {
  const auto g = kstudy::test::poisoned_outputs_gate(op(), entry(), {3, 129, 17}, k_seed);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.value_failures, 3 * 129);
}

TEST_P(GemmVariants, RejectsAnotherOperationsProblemAndLayout) {
  // A 16-bit operation's variant gets the other 16-bit format (same bytes, other values); the others BF16.
  const auto own = precision_of(entry().info.operation);
  const auto other = own == gemm_precision::bf16 ? gemm_precision::fp16 : gemm_precision::bf16;
  const auto problem = generate(other, 4, 8, 16);
  auto impl = entry().make();
  EXPECT_THROW(impl->prepare(*problem, {}), std::invalid_argument);
  const auto wrong_layout =
      entry().info.layout == table_layout::row_major ? table_layout::feature_major : table_layout::row_major;
  const auto swapped = generate(own, 4, 8, 16, wrong_layout);
  auto again = entry().make();
  EXPECT_THROW(again->prepare(*swapped, {}), std::invalid_argument);
}

TEST_P(GemmVariants, MetadataIsComplete) {
  const auto& info = entry().info;
  EXPECT_FALSE(info.family.empty());
  EXPECT_FALSE(info.description.empty());
  EXPECT_GE(info.kernels_launched, 1);
  ASSERT_TRUE(static_cast<bool>(info.traffic));
  const auto shape = op().shape({4096, 4096, 4096}, info.layout, 0);
  EXPECT_GE(info.traffic(shape).total(), op().essential_traffic(shape).total());
  // The portable ladder: gemm_kokkos_warptile is rung 1, every other Kokkos variant rung 0.
  if (info.implementation == kstudy::implementation::kokkos ||
      info.implementation == kstudy::implementation::kokkos_kernels) {
    EXPECT_EQ(info.rung, info.name.rfind("gemm_kokkos_warptile", 0) == 0 ? 1 : 0);
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GemmVariants);
INSTANTIATE_TEST_SUITE_P(Gemm, GemmVariants, ::testing::ValuesIn(gemm_variant_ids()), variant_test_name);

TEST(GemmVariantRegistry, EveryBackendHasTheKokkosVariantsInBothLayouts) {
  std::set<std::string> names;
  for (const auto& id : gemm_variant_ids()) names.insert(kstudy::variant_registry::instance().find(id)->info.name);
  for (const char* name :
       {"gemm_kokkos_tiled", "gemm_kokkos_tiled_feature_major", "gemm_kokkos_naive", "gemm_kokkos_naive_feature_major",
        "gemm_kokkos_kernels", "gemm_kokkos_kernels_feature_major", "gemm_bf16_kokkos_tiled",
        "gemm_bf16_kokkos_tiled_feature_major", "gemm_bf16_kokkos_naive", "gemm_bf16_kokkos_naive_feature_major",
        "gemm_fp16_kokkos_tiled", "gemm_fp16_kokkos_tiled_feature_major", "gemm_fp16_kokkos_naive",
        "gemm_fp16_kokkos_naive_feature_major", "gemm_kokkos_warptile", "gemm_kokkos_warptile_feature_major"})
    EXPECT_TRUE(names.count(name)) << name;
}

}  // namespace
