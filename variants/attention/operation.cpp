// The attention operations (attention.hpp): attention (float32), attention_bf16, attention_fp16 and their
// causal twins attention_causal, attention_bf16_causal, attention_fp16_causal: one class over the precision
// and the mask, registered six times.
//
// Inputs. Pure functions of (seed, array, index), so every thread count and relayout gives the same values.
// Per head h: a direction u_h in {-1, +1}^D. Scores are kept realistic for softmax (spread of a few units,
// neither uniform nor one-hot), with outliers of the three kinds attention kernels meet:
//  - q(h, t, :) = 2 U[-1, 1) + 0.25 u_h; 1 row in 64 (and one hash-chosen row per head) is a peaked row,
//    scaled by 6: its softmax concentrates on a few keys (score spread ~8 against ~1.3);
//  - k(h, t, :) = 2 U[-1, 1); 1 row in 256 (and one hash-chosen row per head) is a sink, 2.5 u_h +
//    0.25 U[-1, 1): aligned with every query's u_h component, it scores ~ +0.625 sqrt(D) above the rest
//    (+5 at D = 64) for most queries;
//  - v(h, t, d) = U[-1, 1), 1 element in 256 an outlier of magnitude [8, 32) and random sign.
// The bf16 and fp16 operations round each generated float to the nearest-even bfloat16 or fp16 and keep the
// bits; q_at() and friends return the widened values every computation starts from. Every value is far inside
// fp16's range (|q| < 13.5, |k| < 2.75, |v| < 32; fp16's largest is 65504); the generator is the same for
// both masks (a causal problem holds the same Q, K, V as the unmasked one of its seed).
//
// Reference (float64). A full reference costs H T^2 D (4.4e12 at 16 x 16,384 x 64): impossible on a host per
// point. The gate therefore checks O in two ways:
//  (a) every element: finite and inside the hull of its head's V column, [min_j v_jd, max_j v_jd], loosened
//      by u (T + 2 sqrt(T) + 8 log2 T + 16) max_j |v_jd| (+ 2^-7 of it for bfloat16, + 2^-9 + 2^-25 T for
//      fp16): O is a convex combination of V's rows, and only the mismatch of the numerator's and the
//      normaliser's rounding (and the 16-bit rounding of P and O) can move it out. O(H T D). With the causal
//      mask row t combines rows j <= t only, a subset, so it stays inside the whole column's hull (the check
//      is the same, looser for early rows);
//  (b) sampled rows exactly: in every head rows 0, T - 1, 64, 128, 192 (tile edges, when < T), the last row
//      of every 64-row band (63, 127, 191, ...: every block of query rows a kernel gives a warpgroup, 64, 128
//      or 192 rows, ends on one, and with the causal mask it is the row that attends the most keys of its
//      block's diagonal tile, so a tile one block leaves out moves a sampled row), the row with the largest
//      |q| (a peaked one) and 16 random rows (seeded from the problem's values); every row when
//      H T^2 D <= 2^28. For a sampled row the reference stores per element o_d = sum_j p_j v_jd,
//      W_d = sum_j p_j |v_jd| and A_d = sum_j p_j r_j |v_jd|, and per row rbar = sum_j p_j r_j (r_j below):
//      3 D + 1 doubles per row, never a T x T matrix. The sums run over the keys the row attends: every j,
//      or j <= t for query t with the causal mask (the weights p_j renormalised over those).
//
// Tolerance of a sampled element (u = 2^-24; first order; p_j the exact weights, d_j = s_j - max s; T the
// count of terms is an upper bound with the causal mask, where row t has t + 1):
//  - scores s_j = scale q.k_j in float32: a dot product of D terms and the scale's rounding and multiply,
//    |ds_j| <= u (D + 2) scale sum_d |q_d k_jd| (gamma_D; Higham, Accuracy and Stability, 3.1). bfloat16
//    and fp16 products are exact in float32 (8 x 8 and 11 x 11 significant bits), but tensor cores accumulate
//    with truncation (Fasi, Higham, Mikaitis and Pranesh 2021: up to 2u per addition), so the bf16 and fp16
//    operations take u (2D + 2);
//  - exp(d_j): as the softmax operation's model (variants/softmax/operation.cpp), 4u + 3u |d_j| relative
//    (2 ulp, the argument scaled by log2 e, CUDA's __expf);
//    with r_j = |ds_j| + 4u + 3u |d_j| the relative perturbation of term j, a perturbed weight is
//    p_j (1 + r_j - rbar), so |do_d| <= A_d + rbar |o_d|;
//  - the normaliser S = sum_j exp(d_j), T positive terms: worst case (T - 1) u relative (a serial float sum
//    swamped by a few dominant terms, as in softmax), plus the final division (2u): u (T + 1) |o_d|;
//  - the P V accumulation over T terms of both signs: u (8 + 2 sqrt(T)) W_d, the probabilistic bound of
//    Higham and Mary 2019 (rounding errors of random sign: sqrt(T) rather than T);
//  - online softmax: each rescale of the running sum and accumulator by a computed exp(m_old - m_new)
//    rounds both (5u); about ln(T) rescales per row on random data plus one per combining level:
//    u (4 log2 T + 8) (W_d + |o_d|);
//  - bfloat16 only: P rounded to bfloat16 before the tensor-core P V product (2^-8 relative per weight, the
//    unit roundoff of 8 significant bits: 2^-8 W_d; the normaliser sums the unrounded weights) and O rounded
//    to bfloat16 once (2^-8 |o_d|): 2^-8 (W_d + |o_d|);
//  - fp16 only: P rounded to fp16 (2^-11 per weight: 2^-11 W_d; a normaliser that sums the rounded weights
//    adds 2^-11 |o_d|) and O rounded once (2^-11 |o_d|): 2^-10 (W_d + |o_d|) covers the three. fp16 has
//    subnormals: a weight below 2^-14 is rounded to a multiple of 2^-24, an absolute error up to 2^-25.
//    Kernels round either the normalised p_j (the textbook) or exp(s_j - m) against a running max m (the
//    flash-style ones; m is at most the final max, so the weight is at least p_j, and later rescales by <= 1
//    and the division by S >= 1 keep its error under 2^-25 in p_j's terms). Either way a subnormal one has
//    p_j < 2^-14, so the reference adds 2^-25 to p_j r_j of every term with p_j < 2^-14 (into A_d as
//    2^-25 |v_jd|, and into rbar), and the hull check 2^-25 T max |v|;
//  - atol 2^-96: exp terms that underflow float32 (each below 2^-126 of S >= 1, times |v| <= 2^5, T <= 2^24).
// bound_d = A_d + rbar |o_d| + u (T + 1) |o_d| + u (8 + 2 sqrt T) W_d + u (4 log2 T + 8) (W_d + |o_d|)
//           [+ 2^-8 (W_d + |o_d|) for bf16, 2^-10 (W_d + |o_d|) for fp16] + atol.
// tests/test_attention.cpp checks the model for every precision and mask: a serial float32 reference, a
// float32 flash-style online softmax (and for bf16 and fp16 one rounding P) pass; dropping one key, a wrong
// mask (keys j <= t + 1) and a slightly wrong scale fail.
// gate_result::rtol is u (T + 2 sqrt T + 4 log2 T + 17) [+ 2^-8 or 2^-10], the relative part common to every element
// (W_d ~ |o_d| scale); max_relative_error is max over sampled elements of |error| / bound * rtol, so it is at
// most rtol exactly when they all pass.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention.hpp"
#include "detail/bf16.hpp"
#include "detail/fp16.hpp"
#include "kstudy/support/moved_beyond.hpp"
#include "kstudy/support/operation_helpers.hpp"
#include "kstudy/support/splitmix64.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::attention {

namespace {

using detail::round_to_bf16;
using detail::round_to_fp16;
using detail::widen_bf16;
using detail::widen_fp16;

// The float a 16-bit pattern of the precision stands for, and the nearest-even pattern of a float.
float widen_bits(attention_precision precision, std::uint16_t bits) {
  return precision == attention_precision::fp16 ? widen_fp16(bits) : widen_bf16(bits);
}
std::uint16_t round_to_bits(attention_precision precision, float f) {
  return precision == attention_precision::fp16 ? round_to_fp16(f) : round_to_bf16(f);
}

}  // namespace

traffic_model essential_traffic(attention_precision precision, std::int64_t heads, std::int64_t tokens,
                                std::int64_t head_dim) {
  const std::int64_t matrix = heads * tokens * head_dim * element_bytes(precision);
  return traffic_model{3 * matrix, matrix};  // Q, K, V read once; O written once
}

std::int64_t essential_flops(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim, attention_mask mask) {
  const std::int64_t full = 4 * heads * tokens * tokens * head_dim;
  return mask == attention_mask::causal ? full / 2 : full;  // full is even: exact for odd tokens too
}

attention_data::attention_data(attention_precision precision, attention_mask mask, const table_shape& shape,
                               std::unique_ptr<float[]> q, std::unique_ptr<float[]> k, std::unique_ptr<float[]> v,
                               std::unique_ptr<std::uint16_t[]> q_bits, std::unique_ptr<std::uint16_t[]> k_bits,
                               std::unique_ptr<std::uint16_t[]> v_bits)
    : array_problem(shape),
      m_precision(precision),
      m_mask(mask),
      m_q(adopt("q", std::move(q), elements())),
      m_k(adopt("k", std::move(k), elements())),
      m_v(adopt("v", std::move(v), elements())),
      m_q_bits(adopt("q", std::move(q_bits), elements())),
      m_k_bits(adopt("k", std::move(k_bits), elements())),
      m_v_bits(adopt("v", std::move(v_bits), elements())) {}

float attention_data::scale() const { return static_cast<float>(1.0 / std::sqrt(double(head_dim()))); }

float attention_data::q_at(std::int64_t i) const {
  return m_precision == attention_precision::fp32 ? m_q[static_cast<std::size_t>(i)]
                                                  : widen_bits(m_precision, m_q_bits[static_cast<std::size_t>(i)]);
}
float attention_data::k_at(std::int64_t i) const {
  return m_precision == attention_precision::fp32 ? m_k[static_cast<std::size_t>(i)]
                                                  : widen_bits(m_precision, m_k_bits[static_cast<std::size_t>(i)]);
}
float attention_data::v_at(std::int64_t i) const {
  return m_precision == attention_precision::fp32 ? m_v[static_cast<std::size_t>(i)]
                                                  : widen_bits(m_precision, m_v_bits[static_cast<std::size_t>(i)]);
}

const attention_data& attention_problem(const problem_data& problem, attention_precision expected,
                                        attention_mask expected_mask) {
  const auto* data = dynamic_cast<const attention_data*>(&problem);
  const std::string name = operation_name(expected, expected_mask);
  if (data == nullptr || data->precision() != expected || data->mask() != expected_mask)
    throw std::invalid_argument("a " + name + " variant was given another operation's problem");
  if (data->heads() < 1 || data->tokens() < 1 || data->head_dim() < 1)
    throw std::invalid_argument(name + ": heads, tokens and head_dim must be positive");
  if (data->shape().layout != table_layout::row_major) throw std::invalid_argument(name + ": inputs must be row-major");
  const bool present = expected == attention_precision::fp32
                           ? data->q() != nullptr && data->k() != nullptr && data->v() != nullptr
                           : data->q_bits() != nullptr && data->k_bits() != nullptr && data->v_bits() != nullptr;
  if (!present) throw std::invalid_argument(name + ": an input array is missing");
  return *data;
}

variant_info variant_info_for(attention_precision precision, attention_mask mask, const std::string& name,
                              const std::string& family, const std::string& description) {
  return operation_variant_info(name, operation_name(precision, mask), family, description,
                                [precision](const table_shape& shape) {
                                  return essential_traffic(precision, shape.rows, shape.features, shape.depth);
                                });
}

namespace {

double symmetric(std::uint64_t bits) { return 2.0 * unit_double(bits) - 1.0; }  // U[-1, 1)
std::uint64_t hash(std::uint64_t seed, std::uint64_t array, std::int64_t i) {
  return splitmix64(splitmix64(seed ^ splitmix64(array)) + static_cast<std::uint64_t>(i));
}

constexpr std::uint64_t q_array = 0x617471, k_array = 0x61746b, v_array = 0x617476, direction_array = 0x617475,
                        q_row_array = 0x617451, k_row_array = 0x61744b, forced_array = 0x617446,
                        sample_array = 0x617453;
constexpr double q_amplitude = 2.0, q_bias = 0.25, peak_factor = 6.0, k_amplitude = 2.0, sink_amplitude = 2.5,
                 sink_noise = 0.25, v_outlier_fraction = 1.0 / 256;

struct head_plan {
  std::int64_t forced_peak = 0, forced_sink = 0;  // one peaked query row and one sink key row per head
};

head_plan plan_of(std::uint64_t seed, std::int64_t h, std::int64_t tokens) {
  const std::uint64_t hp = hash(seed, forced_array, h);
  return {static_cast<std::int64_t>(hp % static_cast<std::uint64_t>(tokens)),
          static_cast<std::int64_t>(splitmix64(hp) % static_cast<std::uint64_t>(tokens))};
}

double direction(std::uint64_t seed, std::int64_t h, std::int64_t d, std::int64_t head_dim) {
  return (hash(seed, direction_array, h * head_dim + d) >> 63) ? 1.0 : -1.0;
}

// The three matrices as floats (heads x tokens x head_dim row-major).
void generate_floats(std::uint64_t seed, std::int64_t heads, std::int64_t tokens, std::int64_t head_dim, float* q,
                     float* k, float* v) {
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < heads * tokens; ++row) {
    const std::int64_t h = row / tokens, t = row % tokens;
    const head_plan plan = plan_of(seed, h, tokens);
    const bool peaked = t == plan.forced_peak || unit_double(hash(seed, q_row_array, row)) < 1.0 / 64;
    const bool sink = t == plan.forced_sink || unit_double(hash(seed, k_row_array, row)) < 1.0 / 256;
    for (std::int64_t d = 0; d < head_dim; ++d) {
      const std::int64_t i = row * head_dim + d;
      const double u_hd = direction(seed, h, d, head_dim);
      const double qv = q_amplitude * symmetric(hash(seed, q_array, i)) + q_bias * u_hd;
      q[i] = static_cast<float>(peaked ? peak_factor * qv : qv);
      const std::uint64_t hk = hash(seed, k_array, i);
      k[i] =
          static_cast<float>(sink ? sink_amplitude * u_hd + sink_noise * symmetric(hk) : k_amplitude * symmetric(hk));
      const std::uint64_t hv = hash(seed, v_array, i), hv2 = splitmix64(hv);
      if (unit_double(hv2) < v_outlier_fraction) {
        const double magnitude = 8.0 + 24.0 * unit_double(splitmix64(hv2));
        v[i] = static_cast<float>((hv2 & 1) ? magnitude : -magnitude);
      } else {
        v[i] = static_cast<float>(symmetric(hv));
      }
    }
  }
}

template <class T>
std::unique_ptr<T[]> copy_array(const T* source, std::int64_t n) {
  if (source == nullptr) return nullptr;
  std::unique_ptr<T[]> out(new T[static_cast<std::size_t>(n)]);
  std::copy(source, source + n, out.get());
  return out;
}

constexpr double unit_roundoff = 0x1.0p-24;
constexpr double bf16_term = 0x1.0p-8;
constexpr double fp16_term = 0x1.0p-10;
constexpr double fp16_normal_min = 0x1.0p-14, fp16_subnormal_error = 0x1.0p-25;
constexpr double absolute_tolerance = 0x1.0p-96;
constexpr std::int64_t random_rows_per_head = 16;
constexpr std::int64_t edge_rows[] = {64, 128, 192};
constexpr std::int64_t band_rows = 64;        // the last row of every band of this many is sampled
constexpr double full_check_work = 0x1.0p28;  // H T^2 D at or below which every row is checked

// The float64 facts check() needs: per head and column the V hull, per sampled row its outputs and bounds.
class attention_reference final : public reference_data {
 public:
  std::vector<double> v_min, v_max, v_abs_max;  // heads x head_dim
  std::vector<std::int64_t> rows;               // sampled rows h * tokens + t, ascending
  std::vector<double> o, weight, perturbation;  // rows x head_dim: o_d, W_d, A_d
  std::vector<double> row_perturbation;         // rbar per sampled row
};

bool checks_every_row(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim) {
  return double(heads) * double(tokens) * double(tokens) * double(head_dim) <= full_check_work;
}

// Sampled rows per head at most: rows 0 and T - 1, the tile edges, the bands' last rows, the peaked row and the
// random ones.
std::int64_t sampled_rows_bound(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim) {
  if (checks_every_row(heads, tokens, head_dim)) return heads * tokens;
  const auto edges = static_cast<std::int64_t>(sizeof edge_rows / sizeof edge_rows[0]);
  return heads * std::min<std::int64_t>(tokens, 2 + edges + tokens / band_rows + 1 + random_rows_per_head);
}

template <attention_precision P, attention_mask M>
class attention_operation final : public described_operation {
 public:
  attention_operation() {
    m_info.name = operation_name(P, M);
    const std::string storage = P == attention_precision::fp32   ? "float32 Q, K, V, O"
                                : P == attention_precision::bf16 ? "bfloat16 Q, K, V, O"
                                                                 : "fp16 Q, K, V, O";
    m_info.description =
        (causal ? std::string("causal scaled dot-product attention O = softmax(Q K^T / sqrt(d), keys j <= t) V per "
                              "head, ")
                : std::string("scaled dot-product attention O = softmax(Q K^T / sqrt(d)) V per head, ")) +
        storage + (P == attention_precision::fp32 ? "" : " (float32 softmax and accumulation)") +
        (causal ? "; heads x tokens x head_dim; flops 2 H T^2 D (FlashAttention's count)"
                : "; heads x tokens x head_dim; flops 4 H T^2 D");
    m_info.axes = {"heads", "tokens", "head_dim"};
    m_info.layouts = {table_layout::row_major};
    m_info.outputs = {"o"};
    m_info.bench_points = {{16, 4096, 64}, {16, 16384, 64}, {3, 257, 33}};
    m_info.headline_point = {16, 4096, 64};  // where profile_attention reads its counters
    // fp32 attention runs on the CUDA cores: the FMA probe is its roof; bf16 and fp16 run their two products on
    // tensor cores: the best of cuBLAS and the wgmma peak probe of the same input type is theirs (softmax's
    // exponentials are not counted).
    m_info.compute_ceiling = P == attention_precision::fp32   ? "device_fp32_fma"
                             : P == attention_precision::bf16 ? "device_bf16_tensor"
                                                              : "device_fp16_tensor";
  }

  std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const override {
    check_shape(shape);
    const std::int64_t heads = shape.rows, tokens = shape.features, head_dim = shape.depth;
    const std::int64_t n = heads * tokens * head_dim;
    const auto size = static_cast<std::size_t>(n);
    std::unique_ptr<float[]> q(new float[size]), k(new float[size]), v(new float[size]);  // filled below
    generate_floats(seed, heads, tokens, head_dim, q.get(), k.get(), v.get());
    if constexpr (P == attention_precision::fp32) {
      return std::make_unique<attention_data>(P, M, shape, std::move(q), std::move(k), std::move(v), nullptr, nullptr,
                                              nullptr);
    } else {
      // Nearest-even bfloat16 or fp16; the values stay far inside fp16's range (|q| < 13.5, |k| < 2.75,
      // |v| < 32), and only a few tiny ones become fp16 subnormals.
      const auto to_bits = [n](const float* source) {
        std::unique_ptr<std::uint16_t[]> bits(new std::uint16_t[static_cast<std::size_t>(n)]);
        std::uint16_t* out = bits.get();
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) out[i] = round_to_bits(P, source[i]);
        return bits;
      };
      return std::make_unique<attention_data>(P, M, shape, nullptr, nullptr, nullptr, to_bits(q.get()),
                                              to_bits(k.get()), to_bits(v.get()));
    }
  }

  // Only row-major exists: the same arrays, copied.
  std::unique_ptr<problem_data> relayout(const problem_data& source, const table_shape& shape) const override {
    check_shape(shape);
    const auto& d = attention_problem(source, P, M);
    if (d.heads() != shape.rows || d.tokens() != shape.features || d.head_dim() != shape.depth)
      throw std::invalid_argument(m_info.name + ": relayout cannot change the extents");
    const std::int64_t n = d.elements();
    return std::make_unique<attention_data>(P, M, shape, copy_array(d.q(), n), copy_array(d.k(), n),
                                            copy_array(d.v(), n), copy_array(d.q_bits(), n), copy_array(d.k_bits(), n),
                                            copy_array(d.v_bits(), n));
  }

  std::unique_ptr<reference_data> reference(const problem_data& problem) const override {
    const auto& p = attention_problem(problem, P, M);
    const std::int64_t heads = p.heads(), tokens = p.tokens(), dim = p.head_dim();
    auto ref = std::make_unique<attention_reference>();
    const auto hd = static_cast<std::size_t>(heads * dim);
    ref->v_min.assign(hd, INFINITY);
    ref->v_max.assign(hd, -INFINITY);
    ref->v_abs_max.assign(hd, 0.0);
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t d = 0; d < dim; ++d) {
          const double v = v_of(p, (h * tokens + t) * dim + d);
          const auto c = static_cast<std::size_t>(h * dim + d);
          ref->v_min[c] = std::min(ref->v_min[c], v);
          ref->v_max[c] = std::max(ref->v_max[c], v);
          ref->v_abs_max[c] = std::max(ref->v_abs_max[c], std::fabs(v));
        }
    ref->rows = sampled_rows(p);
    const auto count = static_cast<std::int64_t>(ref->rows.size());
    const auto elements = static_cast<std::size_t>(count * dim);
    ref->o.assign(elements, 0.0);
    ref->weight.assign(elements, 0.0);
    ref->perturbation.assign(elements, 0.0);
    ref->row_perturbation.assign(static_cast<std::size_t>(count), 0.0);
    const double scale = 1.0 / std::sqrt(double(dim));
    const double score_roundoff =
        unit_roundoff * (P == attention_precision::fp32 ? double(dim + 2) : double(2 * dim + 2));
    const double u = unit_roundoff;
#pragma omp parallel
    {
      std::vector<double> s(static_cast<std::size_t>(tokens)), r(static_cast<std::size_t>(tokens)),
          q(static_cast<std::size_t>(dim));
#pragma omp for schedule(dynamic)
      for (std::int64_t k = 0; k < count; ++k) {
        const std::int64_t row = ref->rows[static_cast<std::size_t>(k)], h = row / tokens;
        const std::int64_t keys = keys_of(row % tokens, tokens);
        for (std::int64_t d = 0; d < dim; ++d) q[static_cast<std::size_t>(d)] = q_of(p, row * dim + d);
        double m = -INFINITY;
        for (std::int64_t j = 0; j < keys; ++j) {
          const std::int64_t base = (h * tokens + j) * dim;
          double dot = 0.0, magnitude = 0.0;
          for (std::int64_t d = 0; d < dim; ++d) {
            const double term = q[static_cast<std::size_t>(d)] * double(k_of(p, base + d));
            dot += term;
            magnitude += std::fabs(term);
          }
          s[static_cast<std::size_t>(j)] = scale * dot;
          r[static_cast<std::size_t>(j)] = score_roundoff * scale * magnitude;  // |ds_j|, completed below
          m = std::max(m, scale * dot);
        }
        double sum = 0.0;
        for (std::int64_t j = 0; j < keys; ++j) {
          const auto jj = static_cast<std::size_t>(j);
          const double d = s[jj] - m;
          r[jj] += 4 * u + 3 * u * std::fabs(d);
          s[jj] = std::exp(d);  // s now holds the unnormalised weight
          sum += s[jj];
        }
        double* o = &ref->o[static_cast<std::size_t>(k * dim)];
        double* w = &ref->weight[static_cast<std::size_t>(k * dim)];
        double* a = &ref->perturbation[static_cast<std::size_t>(k * dim)];
        double rbar = 0.0;
        for (std::int64_t j = 0; j < keys; ++j) {
          const auto jj = static_cast<std::size_t>(j);
          const double pj = s[jj] / sum;
          if (pj == 0.0) continue;
          // fp16 only: a weight below 2^-14 may be an fp16 subnormal, 2^-25 off (the file's comment).
          const double pr =
              pj * r[jj] + (P == attention_precision::fp16 && pj < fp16_normal_min ? fp16_subnormal_error : 0.0);
          rbar += pr;
          const std::int64_t base = (h * tokens + j) * dim;
          for (std::int64_t d = 0; d < dim; ++d) {
            const double v = v_of(p, base + d);
            o[d] += pj * v;
            w[d] += pj * std::fabs(v);
            a[d] += pr * std::fabs(v);
          }
        }
        ref->row_perturbation[static_cast<std::size_t>(k)] = rbar;
      }
    }
    return ref;
  }

  std::vector<std::int64_t> output_bytes(const table_shape& shape) const override {
    return {shape.rows * shape.features * shape.depth * element_bytes(P)};
  }

  // Q, K, V and O heads x tokens x head_dim, row-major, in the stored precision (16-bit patterns named by their
  // format); the mask is the operation's, the scale 1/sqrt(head_dim) (PyTorch's default): no scalars.
  external_problem external_inputs(const problem_data& problem) const override {
    const auto& p = attention_problem(problem, P, M);
    const bool bits = P != attention_precision::fp32;
    const auto array = [&](const char* name, const void* data) {
      array_description a{name, dtype(), {p.heads(), p.tokens(), p.head_dim()}};
      const std::int64_t bytes = array_bytes(a);
      return std::make_pair(std::move(a), host_span{const_cast<void*>(data), bytes});
    };
    external_problem e;
    e.inputs = {array("q", bits ? static_cast<const void*>(p.q_bits()) : p.q()),
                array("k", bits ? static_cast<const void*>(p.k_bits()) : p.k()),
                array("v", bits ? static_cast<const void*>(p.v_bits()) : p.v())};
    e.streamed = 3;
    return e;
  }
  std::vector<array_description> external_outputs(const table_shape& shape) const override {
    return {{"o", dtype(), {shape.rows, shape.features, shape.depth}}};
  }

  void poison(const std::vector<host_span>& outputs) const override {
    const auto& out = outputs.at(0);
    const std::int64_t n = out.bytes / element_bytes(P);
    if constexpr (P == attention_precision::fp32)
      fill_nan(out);
    else
      fill_parallel(out.as<std::uint16_t>(), n, [](std::int64_t) { return std::uint16_t(0xffff); });  // a NaN pattern
  }

  gate_result check(const problem_data& problem, const reference_data& reference,
                    const std::vector<host_span>& outputs) const override {
    const auto& p = attention_problem(problem, P, M);
    const auto& ref = dynamic_cast<const attention_reference&>(reference);
    if (outputs.size() != 1) throw std::invalid_argument(m_info.name + ": expected one output array");
    const std::int64_t heads = p.heads(), tokens = p.tokens(), dim = p.head_dim(), n = p.elements();
    const void* o = o_output(outputs);
    gate_result g;
    g.rtol = rtol(tokens);
    g.atol = absolute_tolerance;
    g.checked = n;  // every element against the hull; the sampled rows' also against the float64 reference
    const double hull = hull_tolerance(tokens);
    const gate_tally tally = tally_parallel(heads * tokens, [&](std::int64_t row, gate_tally& t) {
      const std::int64_t h = row / tokens;
      const auto found = std::lower_bound(ref.rows.begin(), ref.rows.end(), row);
      const std::int64_t sample = found != ref.rows.end() && *found == row ? found - ref.rows.begin() : -1;
      for (std::int64_t d = 0; d < dim; ++d) {
        const std::int64_t i = row * dim + d;
        const double value = output_at(o, i);
        const auto c = static_cast<std::size_t>(h * dim + d);
        const double slack = hull * ref.v_abs_max[c] + absolute_tolerance;
        bool bad = !(value >= ref.v_min[c] - slack && value <= ref.v_max[c] + slack);  // NaN fails
        if (sample >= 0) {
          double expected, bound;
          element_reference(ref, sample, d, tokens, dim, expected, bound);
          const double err = reference_error(value, expected);
          bad = bad || !(err <= bound);
          t.error(err, err == 0.0 ? 0.0 : err / bound * g.rtol);
        } else if (bad) {
          t.error(0.0, INFINITY);
        }
        if (bad) t.fail(i);
      }
    });
    tally.into(g);
    if (!g.passed) g.message = describe_failure(p, ref, o, tally.first_bad, tally.failures);
    return g;
  }

  // Element (0, 0, 0) (row 0 is always sampled) moved to the first representable value more than twice its
  // bound away: |new - ref| >= |new - o| - |o - ref| > bound.
  void corrupt(const problem_data& problem, const std::vector<host_span>& outputs) const override {
    const auto& p = attention_problem(problem, P, M);
    const auto ref_owner = reference(p);
    const auto& ref = dynamic_cast<const attention_reference&>(*ref_owner);
    double expected, bound;
    element_reference(ref, 0, 0, p.tokens(), p.head_dim(), expected, bound);
    void* o = o_output(outputs);
    const double current = output_at(o, 0);
    if (std::isnan(current)) throw std::logic_error(m_info.name + ": corrupt needs a finite output to move");
    if constexpr (P == attention_precision::fp32) {
      float& y = static_cast<float*>(o)[0];
      y = moved_beyond(y, bound);
    } else {
      std::uint16_t& y = static_cast<std::uint16_t*>(o)[0];
      std::uint16_t moved = round_to_bits(P, static_cast<float>(current + 2 * bound));
      while (!(std::fabs(double(widen_bits(P, moved)) - current) > 2 * bound))
        moved = (moved & 0x8000u) == 0 ? static_cast<std::uint16_t>(moved + 1)
                                       : (moved == 0x8000u ? std::uint16_t(1) : static_cast<std::uint16_t>(moved - 1));
      y = moved;
    }
  }

  // The reference's sampled rows rounded to the output type; where not every row is sampled (a full
  // reference costs H T^2 D) the others hold their head's V column means, a convex combination of V's rows
  // (uniform weights) that the gate's hull check accepts: returns false then.
  bool reference_outputs(const problem_data& problem, const reference_data& reference,
                         const std::vector<host_span>& outputs) const override {
    const auto& p = attention_problem(problem, P, M);
    const auto& ref = dynamic_cast<const attention_reference&>(reference);
    fill_unsampled(p, ref, outputs);
    const std::int64_t dim = p.head_dim();
    for (std::size_t k = 0; k < ref.rows.size(); ++k)
      for (std::int64_t d = 0; d < dim; ++d)
        store(outputs, ref.rows[k] * dim + d, ref.o[k * static_cast<std::size_t>(dim) + static_cast<std::size_t>(d)]);
    return std::int64_t(ref.rows.size()) == p.heads() * p.tokens();
  }
  // Less work: the sampled rows attend to all but the last keys they should (a missed last tile of K and V;
  // with the causal mask the diagonal's keys, row 0 none at all), in float64; the other rows as
  // reference_outputs.
  void drop_work(const problem_data& problem, const reference_data& reference, const std::vector<host_span>& outputs,
                 double fraction) const override {
    const auto& p = attention_problem(problem, P, M);
    const auto& ref = dynamic_cast<const attention_reference&>(reference);
    fill_unsampled(p, ref, outputs);
    const std::int64_t tokens = p.tokens(), dim = p.head_dim();
    const double scale = 1.0 / std::sqrt(double(dim));
    const auto count = static_cast<std::int64_t>(ref.rows.size());
#pragma omp parallel
    {
      std::vector<double> e(static_cast<std::size_t>(tokens)), o(static_cast<std::size_t>(dim));
#pragma omp for schedule(dynamic)
      for (std::int64_t k = 0; k < count; ++k) {
        const std::int64_t row = ref.rows[static_cast<std::size_t>(k)], h = row / tokens;
        const std::int64_t all = keys_of(row % tokens, tokens);
        const std::int64_t keys = all - std::max<std::int64_t>(1, std::int64_t(std::ceil(fraction * double(all))));
        double m = -INFINITY, sum = 0.0;
        for (std::int64_t j = 0; j < keys; ++j) {
          double dot = 0.0;
          for (std::int64_t d = 0; d < dim; ++d)
            dot += double(q_of(p, row * dim + d)) * double(k_of(p, (h * tokens + j) * dim + d));
          e[static_cast<std::size_t>(j)] = scale * dot;
          m = std::max(m, scale * dot);
        }
        std::fill(o.begin(), o.end(), 0.0);
        for (std::int64_t j = 0; j < keys; ++j) {
          const double w = std::exp(e[static_cast<std::size_t>(j)] - m);
          sum += w;
          for (std::int64_t d = 0; d < dim; ++d)
            o[static_cast<std::size_t>(d)] += w * v_of(p, (h * tokens + j) * dim + d);
        }
        // No key left (one token): nothing was accumulated, the output keeps zero.
        for (std::int64_t d = 0; d < dim; ++d)
          store(outputs, row * dim + d, sum > 0.0 ? o[static_cast<std::size_t>(d)] / sum : 0.0);
      }
    }
  }

  traffic_model essential_traffic(const table_shape& shape) const override {
    return attention::essential_traffic(P, shape.rows, shape.features, shape.depth);
  }
  std::int64_t essential_flops(const table_shape& shape) const override {
    return attention::essential_flops(shape.rows, shape.features, shape.depth, M);
  }
  std::int64_t input_bytes(const table_shape& shape) const override {
    return 3 * shape.rows * shape.features * shape.depth * element_bytes(P);
  }
  // The V hull (3 doubles per head and column) and, per sampled row, 3 D + 1 doubles and its index.
  std::int64_t reference_bytes(const table_shape& shape) const override {
    const std::int64_t rows = sampled_rows_bound(shape.rows, shape.features, shape.depth);
    return std::int64_t(sizeof(double)) * (3 * shape.rows * shape.depth + rows * (3 * shape.depth + 2));
  }

  // The relative factor common to every sampled element's bound (the file's comment).
  static double rtol(std::int64_t tokens) {
    const double t = double(tokens);
    return unit_roundoff * (t + 2 * std::sqrt(t) + 4 * std::log2(t) + 17) + precision_term();
  }

 private:
  static constexpr bool causal = M == attention_mask::causal;

  // The keys query row t attends: j < keys_of(t, tokens).
  static std::int64_t keys_of(std::int64_t t, std::int64_t tokens) { return causal ? t + 1 : tokens; }
  // The 16-bit storage's rounding of P and O (the file's comment); 0 for float32.
  static constexpr double precision_term() {
    return P == attention_precision::bf16 ? bf16_term : P == attention_precision::fp16 ? fp16_term : 0.0;
  }

  static const char* dtype() {
    return P == attention_precision::bf16 ? "bfloat16" : P == attention_precision::fp16 ? "float16" : "float32";
  }
  void check_shape(const table_shape& shape) const {
    require_row_major(shape, m_info.name, "heads x tokens x head_dim shape");
  }

  // Element i of Q, K or V as the float the computation starts from; the precision is known here, so the
  // reference's inner loops index the arrays directly.
  static float q_of(const attention_data& p, std::int64_t i) {
    if constexpr (P == attention_precision::fp32)
      return p.q()[i];
    else
      return widen_bits(P, p.q_bits()[i]);
  }
  static float k_of(const attention_data& p, std::int64_t i) {
    if constexpr (P == attention_precision::fp32)
      return p.k()[i];
    else
      return widen_bits(P, p.k_bits()[i]);
  }
  static float v_of(const attention_data& p, std::int64_t i) {
    if constexpr (P == attention_precision::fp32)
      return p.v()[i];
    else
      return widen_bits(P, p.v_bits()[i]);
  }

  static double hull_tolerance(std::int64_t tokens) {
    const double t = double(tokens);
    return unit_roundoff * (t + 2 * std::sqrt(t) + 8 * std::log2(t) + 16) + 2 * precision_term() +
           (P == attention_precision::fp16 ? fp16_subnormal_error * t : 0.0);
  }

  // Element i of the output array, rounded from a float64 value to the output type.
  static void store(const std::vector<host_span>& outputs, std::int64_t i, double value) {
    if constexpr (P == attention_precision::fp32)
      outputs.at(0).as<float>()[i] = static_cast<float>(value);
    else
      outputs.at(0).as<std::uint16_t>()[i] = round_to_bits(P, static_cast<float>(value));
  }

  // Every row that is not sampled: its head's V column means (see reference_outputs).
  static void fill_unsampled(const attention_data& p, const attention_reference& ref,
                             const std::vector<host_span>& outputs) {
    const std::int64_t heads = p.heads(), tokens = p.tokens(), dim = p.head_dim();
    if (std::int64_t(ref.rows.size()) == heads * tokens) return;
    std::vector<double> mean(static_cast<std::size_t>(heads * dim), 0.0);
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t d = 0; d < dim; ++d)
          mean[static_cast<std::size_t>(h * dim + d)] += double(v_of(p, (h * tokens + t) * dim + d)) / double(tokens);
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < heads * tokens; ++row)
      for (std::int64_t d = 0; d < dim; ++d)
        store(outputs, row * dim + d, mean[static_cast<std::size_t>((row / tokens) * dim + d)]);
  }

  static double output_at(const void* o, std::int64_t i) {
    if constexpr (P == attention_precision::fp32)
      return static_cast<const float*>(o)[i];
    else
      return widen_bits(P, static_cast<const std::uint16_t*>(o)[i]);
  }

  // The rows the reference computes exactly (the file's comment), ascending.
  static std::vector<std::int64_t> sampled_rows(const attention_data& p) {
    const std::int64_t heads = p.heads(), tokens = p.tokens(), dim = p.head_dim();
    std::vector<std::int64_t> rows;
    if (checks_every_row(heads, tokens, dim)) {
      rows.resize(static_cast<std::size_t>(heads * tokens));
      for (std::int64_t r = 0; r < heads * tokens; ++r) rows[static_cast<std::size_t>(r)] = r;
      return rows;
    }
    // Seeded from the values, so that another seed's problem samples other rows.
    const auto bits = [](float f) {
      std::uint32_t b;
      std::memcpy(&b, &f, sizeof b);
      return std::uint64_t(b);
    };
    const std::uint64_t salt = splitmix64(bits(q_of(p, 0)) ^ (bits(k_of(p, p.elements() - 1)) << 32) ^
                                          splitmix64(bits(v_of(p, p.elements() / 2))));
    std::set<std::int64_t> chosen;
    for (std::int64_t h = 0; h < heads; ++h) {
      std::vector<std::int64_t> t_rows = {0, tokens - 1};
      for (const std::int64_t edge : edge_rows)
        if (edge < tokens) t_rows.push_back(edge);
      for (std::int64_t t = band_rows - 1; t < tokens; t += band_rows) t_rows.push_back(t);
      std::int64_t peaked = 0;
      double largest = -1.0;
      for (std::int64_t t = 0; t < tokens; ++t) {
        double norm = 0.0;
        for (std::int64_t d = 0; d < dim; ++d) norm += std::fabs(double(q_of(p, (h * tokens + t) * dim + d)));
        if (norm > largest) {
          largest = norm;
          peaked = t;
        }
      }
      t_rows.push_back(peaked);
      for (std::int64_t k = 0; k < random_rows_per_head; ++k)
        t_rows.push_back(static_cast<std::int64_t>(hash(salt, sample_array, h * random_rows_per_head + k) %
                                                   static_cast<std::uint64_t>(tokens)));
      for (const std::int64_t t : t_rows) chosen.insert(h * tokens + t);
    }
    rows.assign(chosen.begin(), chosen.end());
    return rows;
  }

  // The float64 reference of sampled row `sample`'s element d and its bound (the file's comment).
  static void element_reference(const attention_reference& ref, std::int64_t sample, std::int64_t d,
                                std::int64_t tokens, std::int64_t dim, double& expected, double& bound) {
    const auto e = static_cast<std::size_t>(sample * dim + d);
    const double u = unit_roundoff, t = double(tokens);
    const double o = ref.o[e], w = ref.weight[e], a = ref.perturbation[e];
    const double rbar = ref.row_perturbation[static_cast<std::size_t>(sample)];
    expected = o;
    bound = a + rbar * std::fabs(o) + u * (t + 1) * std::fabs(o) + u * (8 + 2 * std::sqrt(t)) * w +
            u * (4 * std::log2(t) + 8) * (w + std::fabs(o)) + absolute_tolerance;
    bound += precision_term() * (w + std::fabs(o));
  }

  std::string describe_failure(const attention_data& p, const attention_reference& ref, const void* o, std::int64_t i,
                               std::int64_t failures) const {
    const std::int64_t tokens = p.tokens(), dim = p.head_dim();
    const std::int64_t row = i / dim, h = row / tokens, t = row % tokens, d = i % dim;
    const double value = output_at(o, i);
    std::string text = m_info.name + ": o[" + std::to_string(h) + ", " + std::to_string(t) + ", " + std::to_string(d) +
                       "] = " + format_g9(value);
    const auto found = std::lower_bound(ref.rows.begin(), ref.rows.end(), row);
    const auto c = static_cast<std::size_t>(h * dim + d);
    const double slack = hull_tolerance(tokens) * ref.v_abs_max[c] + absolute_tolerance;
    double expected = 0.0, bound = 0.0;
    const bool sampled = found != ref.rows.end() && *found == row;
    if (sampled) element_reference(ref, found - ref.rows.begin(), d, tokens, dim, expected, bound);
    if (sampled && !(std::fabs(value - expected) <= bound)) {
      text += " but the float64 reference is " + format_g9(expected) + " (|error| " +
              format_g9(std::fabs(value - expected)) + ", bound " + format_g9(bound) + ")";
    } else {
      text += " is outside its head's V column range [" + format_g9(ref.v_min[c]) + ", " + format_g9(ref.v_max[c]) +
              "] (slack " + format_g9(slack) + ")";
    }
    return text + "; " + std::to_string(failures) + " of " + std::to_string(p.elements()) + " elements fail (" +
           std::to_string(ref.rows.size()) + " of " + std::to_string(p.heads() * tokens) +
           " rows checked exactly, every element against its V range)";
  }
};

constexpr auto fp32 = attention_precision::fp32;
constexpr auto bf16 = attention_precision::bf16;
constexpr auto fp16 = attention_precision::fp16;
constexpr auto no_mask = attention_mask::none;
constexpr auto causal_mask = attention_mask::causal;
const operation_registration<attention_operation<fp32, no_mask>> register_attention;
const operation_registration<attention_operation<bf16, no_mask>> register_attention_bf16;
const operation_registration<attention_operation<fp16, no_mask>> register_attention_fp16;
const operation_registration<attention_operation<fp32, causal_mask>> register_attention_causal;
const operation_registration<attention_operation<bf16, causal_mask>> register_attention_bf16_causal;
const operation_registration<attention_operation<fp16, causal_mask>> register_attention_fp16_causal;

}  // namespace
}  // namespace kstudy::attention
