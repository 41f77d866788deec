// The GEMM operations (gemm.hpp): C = A B, A m x k, B k x n, C m x n float32, one operation per input
// precision (gemm, gemm_tf32, gemm_bf16, gemm_fp16), row-major or column-major (all three matrices alike).
//
// Inputs. A(i, l) and B(l, j) are pure functions of (seed, matrix, logical index) (the same values in both
// layouts and on every thread count): 98.9% uniform in [-1, 1) on a 2^-23 grid (full 24-bit mantissas, so
// a TF32 or BF16 multiply really rounds them), 1% outliers of magnitude [1, 64) with random sign, 0.1%
// exact zeros. Zero mean, so the partial sums of a dot product wander and cancel as in real data; the
// outliers make some terms dominate a sum (the case where a swamped accumulation loses most). gemm_bf16
// stores every value rounded to nearest-even bfloat16 (the 16-bit patterns); gemm_fp16 every value rounded
// to nearest-even IEEE binary16, except that magnitudes below binary16's least normal 2^-14 (about 6e-5 of
// the uniform values) are stored as +0: every input is a normal number or zero, so a kernel that flushes
// subnormal inputs computes what the reference does (the largest magnitude, 64, is far below 65,504); gemm
// and gemm_tf32 store plain floats (a TF32 kernel rounds them itself: the tf32 gate covers that).
//
// Reference (float64). An 8192^3 product in float64 is 5.5e11 multiply-adds: too much for a host beside
// every run. So the gate is three checks, each cheap, together catching what a wrong kernel leaves:
//  (a) a scan of every element of C: finite (outputs are poisoned with NaN before a run, so an unwritten
//      element or tile fails here wherever it is) — O(mn);
//  (b) exact per-element checks of sampled full rows and full columns of C against float64 dot products:
//      rows 0 and m - 1, the rows on either side of the tile edges 16, 32, 64, 128, 256 (the ones below m),
//      and 32 further distinct rows drawn from a hash of the shape and of A's and B's first values (so from
//      the seed); columns alike. When m n k <= 2^27 every element is checked instead. O((rows + cols) k
//      (m + n)), OpenMP-parallel;
//  (c) projections of every element (Freivalds) for hashed +-1 vectors u, v, in float64: per row i and
//      block b of 32 consecutive columns, sum_{j in b} v_j c_ij against (A (B V_b))_i (V_b: v on block b,
//      zero elsewhere), and per column u^T C against (u^T A) B. Each is within the sum of its elements'
//      bounds, sum_{j in b} bound_ij = rtol (|A| (|B| 1_b))_i + 32 atol (exact, O(mk n/32 + kn)), plus the
//      float64 evaluation slack. A wrong element that (b) did not sample fails its row block once its
//      error exceeds the sum of the 32 bounds of its block, ~32x its own bound at most (with a projection
//      over the whole row, as before, a lone element passed up to ~n times its bound: 8,192x at the
//      largest bench point); a kernel error repeated along a row (a dropped k block, a wrong tile) fails
//      long before. Why 32: the block's reference costs m k n / 32 multiply-adds twice (value and scale),
//      5.4e11 / 16 at 8192^3, about the cost of the sampled lines, seconds on a host; each halving of the
//      block halves the factor and doubles that.
// The reference holds only what check() needs: the sampled indices, their float64 values and scales
// S_ij = sum_l |a_il b_lj|, and the projections with their scales (m x ceil(n / 32) for the row blocks).
//
// Gate, per checked element: |c_ij - ref_ij| <= rtol S_ij + atol, with
//   rtol = 2 u_in + u (8 + 2 sqrt(k)) + [tensor-core operations] u k / 4,  u = 2^-24,  atol = 2^-126 (FLT_MIN),
//   u_in = u (gemm: each float32 product rounds once), 2^-10 (gemm_tf32: both inputs rounded, or
//   truncated, to a 10-bit mantissa, so a product is off by at most (1 + 2^-10)^2 - 1 ~ 2 u_in; products
//   of TF32 values are exact in float32), 0 (gemm_bf16 and gemm_fp16: the inputs are stored already rounded,
//   to bfloat16's 8-bit or binary16's 11-bit significands (unit roundoff 2^-9, 2^-11), and the reference is
//   computed from the stored values; products of 8- or 11-bit significands are exact in float32, and the
//   smallest product of two nonzero inputs, 2^-28 for binary16, is far above float32's underflow).
// The accumulation term: the worst case of a float32 sum of k terms is (k - 1) u S (Higham, Accuracy and
// Stability, 3.1), 4.9e-4 relative at k = 8192, which would let a dropped k term of a small element through.
// Higham & Mary (SIAM J. Sci. Comput. 41(5), 2019, "A new approach to probabilistic rounding error
// analysis") show that with rounding errors that behave as independent zero-mean variables the error of a
// length-k sum is below lambda sqrt(k) u S with probability 1 - 2 exp(-lambda^2 (1 - u)^2 / 2); on zero-mean
// data the partial sums are also far below S (they cancel), so measured errors sit well under sqrt(k) u S.
// Blocked, tiled and split-k kernels sum in shorter chains (k / tile partial sums added in a tree or a
// second chain). u (8 + 2 sqrt(k)) (the constant: the last steps' roundings, a final conversion, a split-k
// combine) covers the float32 orders with round-to-nearest; measured in tests/test_gemm.cpp on this data:
// a serial chain (with or without FMA) errs by up to 34 u S at k = 8192 (the bound is 189 u S) and 16 u S
// at k = 65,536 (520 u S); 64-term blocks added in a tree by 3 u S.
// Tensor cores (gemm_tf32, gemm_bf16, gemm_fp16) do not round to nearest when they accumulate: the products of one MMA
// and the accumulator are aligned and truncated (Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of
// NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330, 2021). Truncation errors all point toward zero, so they
// add up linearly, not like sqrt(k): a chain of 8-term blocks each added with truncation measured 437 u S at
// k = 8192 (past the round-to-nearest bound) and 691 u S at k = 65,536. Each of the k / 8 truncations errs
// by less than 2u |partial sum| <= 2u S, hence the u k / 4 term for those two operations (2,048 u at
// k = 8192: 1.2e-4 relative; a dropped term still fails on most elements). For gemm_tf32 it is small
// beside 2 u_in; gemm (float32 on CUDA cores: FFMA rounds to nearest) does not get it.
// What the bound can tell apart at the largest bench point (8192^3): a k-slice of 1% (82 terms) left out
// moves an element by ~sqrt(82 E[a^2] E[b^2]) = 128 against S ~ 8192 E|a| E|b| = 5,500 on these inputs,
// 2.3e-2 S, while rtol is 1.1e-5 (gemm: ~2,000x), 1.3e-4 (gemm_bf16, gemm_fp16: ~170x) and 2.1e-3
// (gemm_tf32: ~11x).
// atol: products below FLT_MIN flushed to zero by a kernel's FTZ mode carry no accuracy.
// gate_result::rtol is rtol; max_relative_error is max |c - ref| / S over the checked elements.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gemm/gemm.hpp"
#include "detail/bf16.hpp"
#include "detail/fp16.hpp"
#include "kstudy/support/moved_beyond.hpp"
#include "kstudy/support/operation_helpers.hpp"
#include "kstudy/support/splitmix64.hpp"
#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"

namespace kstudy::gemm {

traffic_model essential_traffic(gemm_precision precision, std::int64_t m, std::int64_t n, std::int64_t k) {
  traffic_model t;
  t.bytes_read = (m * k + k * n) * input_element_bytes(precision);
  t.bytes_written = m * n * std::int64_t(sizeof(float));
  return t;
}

std::int64_t essential_flops(std::int64_t m, std::int64_t n, std::int64_t k) { return 2 * m * n * k; }

gemm_data::gemm_data(gemm_precision precision, const table_shape& shape, std::unique_ptr<float[]> a,
                     std::unique_ptr<float[]> b, std::unique_ptr<std::uint16_t[]> a16,
                     std::unique_ptr<std::uint16_t[]> b16)
    : array_problem(shape),
      m_precision(precision),
      m_a(adopt("a", std::move(a), shape.rows * shape.depth)),
      m_b(adopt("b", std::move(b), shape.depth * shape.features)),
      m_a16(adopt("a", std::move(a16), shape.rows * shape.depth)),
      m_b16(adopt("b", std::move(b16), shape.depth * shape.features)) {}

using detail::widen_bf16;
using detail::widen_fp16;

namespace {
// The float element `at` of a stored matrix stands for.
float stored_value(gemm_precision precision, const float* f, const std::uint16_t* h, std::int64_t at) {
  switch (precision) {
    case gemm_precision::bf16:
      return widen_bf16(h[at]);
    case gemm_precision::fp16:
      return widen_fp16(h[at]);
    case gemm_precision::fp32:
    case gemm_precision::tf32:
      break;
  }
  return f[at];
}
}  // namespace

float gemm_data::a_at(std::int64_t i, std::int64_t l) const {
  return stored_value(m_precision, m_a, m_a16, row_major() ? i * k() + l : l * m() + i);
}

float gemm_data::b_at(std::int64_t l, std::int64_t j) const {
  return stored_value(m_precision, m_b, m_b16, row_major() ? l * n() + j : j * k() + l);
}

const gemm_data& gemm_problem(const problem_data& problem, gemm_precision expected) {
  const auto* data = dynamic_cast<const gemm_data*>(&problem);
  if (data == nullptr || data->precision() != expected)
    throw std::invalid_argument(std::string("a ") + operation_name(expected) +
                                " variant was given another operation's problem");
  if (data->m() < 1 || data->n() < 1 || data->k() < 1)
    throw std::invalid_argument(std::string(operation_name(expected)) + ": m, n and k must be positive");
  if (data->shape().layout != table_layout::row_major && data->shape().layout != table_layout::feature_major)
    throw std::invalid_argument(std::string(operation_name(expected)) + ": expects row_major or feature_major");
  if (stores_16_bit(expected) ? (data->a_16bit() == nullptr || data->b_16bit() == nullptr)
                              : (data->a() == nullptr || data->b() == nullptr))
    throw std::invalid_argument(std::string(operation_name(expected)) + ": an input matrix is missing");
  return *data;
}

variant_info variant_info_for(gemm_precision precision, const std::string& name, const std::string& family,
                              const std::string& description, table_layout layout) {
  variant_info info = operation_variant_info(
      name, operation_name(precision), family, description, [precision](const table_shape& shape) {
        return essential_traffic(precision, shape.rows, shape.features, shape.depth);
      });
  info.layout = layout;
  return info;
}

namespace {

constexpr std::uint64_t a_array = 0x41, b_array = 0x42, sample_salt = 0x53, projection_salt = 0x50;

// The value at logical index `index` of the matrix whose hashes derive from `key` (see the top of the file).
float element(std::uint64_t key, std::int64_t index) {
  const std::uint64_t h = splitmix64(key + static_cast<std::uint64_t>(index));
  const double kind = unit_double(splitmix64(h ^ 0x6b));
  if (kind < 0.001) return 0.0f;
  if (kind < 0.011) {
    const double magnitude = 1.0 + 63.0 * unit_double(h);
    return static_cast<float>((h & 1) != 0 ? -magnitude : magnitude);
  }
  // 24 bits: an integer in [-2^23, 2^23) times 2^-23, exact in float32.
  return static_cast<float>(double(std::int64_t(h >> 40) - (std::int64_t(1) << 23)) * 0x1.0p-23);
}

using detail::round_to_bf16;
using detail::round_to_fp16;

// A generated value as gemm_fp16 stores it: nearest-even binary16, magnitudes below the least normal (2^-14)
// as +0 (see the top of the file).
std::uint16_t fp16_input(float v) { return std::fabs(v) < 0x1.0p-14f ? std::uint16_t(0) : round_to_fp16(v); }

// Storage offset of element (r, c) of an rows x cols matrix in a layout.
inline std::int64_t offset(bool row_major, std::int64_t r, std::int64_t c, std::int64_t rows, std::int64_t cols) {
  return row_major ? r * cols + c : c * rows + r;
}

// One stored matrix as its storage order sees it: element e of storage holds logical (r, c).
struct logical_index {
  bool row_major;
  std::int64_t rows, cols;
  void of(std::int64_t e, std::int64_t& r, std::int64_t& c) const {
    if (row_major) {
      r = e / cols;
      c = e % cols;
    } else {
      c = e / rows;
      r = e % rows;
    }
  }
};

// A stored element in float64: float32 as it is, a 16-bit pattern as the precision's format.
template <gemm_precision P>
double widen(float v) {
  return v;
}
template <gemm_precision P>
double widen(std::uint16_t v) {
  static_assert(stores_16_bit(P), "16-bit storage is bfloat16 or binary16");
  return P == gemm_precision::fp16 ? widen_fp16(v) : widen_bf16(v);
}

// A matrix operand as the matrix-vector products see it: element (r, c) at data[r * rs + c * cs].
template <class T>
struct strided {
  const T* data;
  std::int64_t rows, cols, rs, cs;
};

// y = M x and y_abs = |M| x_abs in float64, M's elements read as P stores them. When `parallel`, OpenMP
// over the outputs.
template <gemm_precision P, class T>
void matvec(const strided<T>& mat, const double* x, const double* x_abs, double* y, double* y_abs, bool parallel) {
  if (mat.rs != 1 || mat.cs == 1) {
    // Dot form: an output's row runs along memory (or no order is better).
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t r = 0; r < mat.rows; ++r) {
      const T* row = mat.data + r * mat.rs;
      double s = 0.0, sa = 0.0;
      for (std::int64_t c = 0; c < mat.cols; ++c) {
        const double v = widen<P>(row[c * mat.cs]);
        s += v * x[c];
        sa += std::fabs(v) * x_abs[c];
      }
      y[r] = s;
      y_abs[r] = sa;
    }
    return;
  }
  // Axpy form: the columns of M run along memory; each thread owns a block of outputs.
  constexpr std::int64_t block = 512;
  const std::int64_t blocks = (mat.rows + block - 1) / block;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * block, end = std::min(mat.rows, begin + block);
    for (std::int64_t r = begin; r < end; ++r) y[r] = y_abs[r] = 0.0;
    for (std::int64_t c = 0; c < mat.cols; ++c) {
      const T* column = mat.data + c * mat.cs;
      const double xc = x[c], xa = x_abs[c];
      for (std::int64_t r = begin; r < end; ++r) {
        const double v = widen<P>(column[r]);
        y[r] += v * xc;
        y_abs[r] += std::fabs(v) * xa;
      }
    }
  }
}

// The operands of a problem as strided matrices of its stored element type.
template <class T>
struct operands {
  strided<T> a, b, a_t, b_t;  // A (m x k), B (k x n), A^T (k x m), B^T (n x k)
  operands(const T* a_data, const T* b_data, std::int64_t m, std::int64_t n, std::int64_t k, bool row_major) {
    // Row-major A(i, l) at i k + l; column-major at l m + i (B alike). (Strides passed inline: nvcc's front
    // end calls named locals used only in these braces unreferenced.)
    a = {a_data, m, k, row_major ? k : 1, row_major ? 1 : m};
    b = {b_data, k, n, row_major ? n : 1, row_major ? 1 : k};
    a_t = {a_data, k, m, row_major ? 1 : m, row_major ? k : 1};
    b_t = {b_data, n, k, row_major ? 1 : k, row_major ? n : 1};
  }
};

// Tile edges around which rows and columns are always checked.
constexpr std::int64_t tile_edges[] = {16, 32, 64, 128, 256};
constexpr int random_lines = 32;
// The width of a column block of the row projections (see the top of the file).
constexpr std::int64_t projection_block = 32;
std::int64_t projection_blocks(std::int64_t n) { return (n + projection_block - 1) / projection_block; }

// Up to this many multiply-adds (m n k) every element is checked.
constexpr std::int64_t full_check_limit = std::int64_t(1) << 27;

bool checks_everything(std::int64_t m, std::int64_t n, std::int64_t k) { return m * n <= full_check_limit / k; }
// Up to this many multiply-adds reference_outputs() and drop_work() compute every element in float64.
constexpr double direct_product_limit = 0x1.0p28;

// The sampled lines (rows of an extent-m axis): 0, extent - 1, both sides of each tile edge, then
// random_lines distinct others drawn from `salt`; every line when there are no more than that.
std::vector<std::int64_t> sampled_lines(std::int64_t extent, std::uint64_t salt) {
  std::vector<std::int64_t> lines = {0, extent - 1};
  for (const std::int64_t e : tile_edges)
    if (e < extent) lines.insert(lines.end(), {e - 1, e});
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  if (std::int64_t(lines.size()) + random_lines >= extent) {
    lines.resize(static_cast<std::size_t>(extent));
    for (std::int64_t i = 0; i < extent; ++i) lines[static_cast<std::size_t>(i)] = i;
    return lines;
  }
  const std::size_t target = lines.size() + random_lines;
  for (std::uint64_t draw = 0; lines.size() < target; ++draw) {
    const auto candidate = static_cast<std::int64_t>(splitmix64(salt + draw) % static_cast<std::uint64_t>(extent));
    if (!std::binary_search(lines.begin(), lines.end(), candidate))
      lines.insert(std::upper_bound(lines.begin(), lines.end(), candidate), candidate);
  }
  return lines;
}

// The number of sampled lines of an extent (it does not depend on the salt).
std::int64_t sampled_count(std::int64_t extent) { return std::int64_t(sampled_lines(extent, 0).size()); }

// +-1 entry i of a projection vector.
double sign_of(std::uint64_t salt, std::int64_t i) {
  return (splitmix64(salt + static_cast<std::uint64_t>(i)) >> 63) != 0 ? -1.0 : 1.0;
}

class gemm_reference final : public reference_data {
 public:
  std::int64_t m = 0, n = 0, k = 0;
  std::uint64_t salt = 0;                    // of the projection vectors
  std::vector<std::int64_t> rows, cols;      // sampled (rows: every row when checking everything; cols then empty)
  std::vector<double> row_value, row_scale;  // rows.size() x n: ref and S of each sampled row's elements
  std::vector<double> col_value, col_scale;  // cols.size() x m
  std::vector<double> right, right_scale;    // m x blocks: A (B V_b) and |A| (|B| 1_b), row-major
  std::vector<double> left, left_scale;      // n: (u^T A) B and (1^T |A|) |B|
};

constexpr double unit_roundoff = 0x1.0p-24;
constexpr double absolute_tolerance = 0x1.0p-126;

double input_roundoff(gemm_precision precision) {
  switch (precision) {
    case gemm_precision::fp32:
      return unit_roundoff;
    case gemm_precision::tf32:
      return 0x1.0p-10;
    case gemm_precision::bf16:
    case gemm_precision::fp16:
      return 0.0;  // stored rounded; the reference computes from the stored values (see the top of the file)
  }
  return unit_roundoff;
}

double relative_tolerance(gemm_precision precision, std::int64_t k) {
  // Tensor cores truncate when they accumulate (see the top of the file): k / 8 steps of up to 2u each.
  const double truncation = precision == gemm_precision::fp32 ? 0.0 : unit_roundoff * double(k) / 4;
  return 2 * input_roundoff(precision) + unit_roundoff * (8 + 2 * std::sqrt(double(k))) + truncation;
}

// Bound on the float64 evaluation error of a projection (sums of up to n + k + 2 products, on either side).
double projection_slack(std::int64_t n, std::int64_t k) { return double(n + k + 2) * 0x1.0p-52; }

// The output check() reads: C in either storage order.
struct gemm_output {
  const float* c;
  bool row_major;
  std::int64_t m, n;
  float at(std::int64_t i, std::int64_t j) const { return c[offset(row_major, i, j, m, n)]; }
};

// What check()'s three phases found. Rows and columns holding a failure the first two phases counted are marked
// bad, so that the projections (c) count only failures found nowhere else.
struct gemm_findings {
  explicit gemm_findings(const gemm_output& c)
      : first_nonfinite(c.m * c.n),
        first_sampled(c.m * c.n),
        row_bad(static_cast<std::size_t>(c.m), 0),
        col_bad(static_cast<std::size_t>(c.n), 0) {}
  std::int64_t nonfinite = 0, first_nonfinite;       // (a); first: logical index i n + j, m n when none
  std::int64_t sampled_failures = 0, first_sampled;  // (b)
  double max_abs = 0.0, max_rel = 0.0;               // (b), over the finite sampled elements
  std::vector<char> row_bad, col_bad;
  std::int64_t unexplained_rows = 0, unexplained_cols = 0;  // (c)
  std::int64_t first_row = -1, first_col = -1, first_block = 0;
  double row_err = 0, row_bound = 0, col_err = 0, col_bound = 0;
};

// (a) every element finite.
void find_nonfinite(const gemm_output& out, gemm_findings& found) {
  const float* c = out.c;
  const std::int64_t m = out.m, n = out.n;
  std::int64_t nonfinite = 0, first_nonfinite = m * n;
  const logical_index order{out.row_major, m, n};
#pragma omp parallel for schedule(static) reduction(+ : nonfinite) reduction(min : first_nonfinite)
  for (std::int64_t e = 0; e < m * n; ++e) {
    if (!std::isfinite(c[e])) {
      ++nonfinite;
      std::int64_t i, j;
      order.of(e, i, j);
      first_nonfinite = std::min(first_nonfinite, i * n + j);
    }
  }
  if (nonfinite > 0) {
    for (std::int64_t e = 0; e < m * n; ++e)
      if (!std::isfinite(c[e])) {
        std::int64_t i, j;
        order.of(e, i, j);
        found.row_bad[static_cast<std::size_t>(i)] = found.col_bad[static_cast<std::size_t>(j)] = 1;
      }
  }
  found.nonfinite = nonfinite;
  found.first_nonfinite = first_nonfinite;
}

// (b) the sampled rows and columns, element by element (finite ones: the others are counted by (a)).
void check_sampled_lines(const gemm_output& out, const gemm_reference& ref, double rtol, gemm_findings& found) {
  const std::int64_t m = out.m, n = out.n;
  std::int64_t sampled_failures = 0, first_sampled = m * n;
  double max_abs = 0.0, max_rel = 0.0;
  const auto lines = std::int64_t(ref.rows.size() + ref.cols.size());
  std::vector<std::vector<std::int64_t>> failing(static_cast<std::size_t>(lines));
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : sampled_failures) reduction(min : first_sampled) \
    reduction(max : max_abs, max_rel)
  for (std::int64_t s = 0; s < lines; ++s) {
    const bool is_row = s < std::int64_t(ref.rows.size());
    const std::size_t line = is_row ? std::size_t(s) : std::size_t(s) - ref.rows.size();
    const std::int64_t fixed = is_row ? ref.rows[line] : ref.cols[line], extent = is_row ? n : m;
    const double* value = is_row ? &ref.row_value[line * std::size_t(n)] : &ref.col_value[line * std::size_t(m)];
    const double* scale = is_row ? &ref.row_scale[line * std::size_t(n)] : &ref.col_scale[line * std::size_t(m)];
    for (std::int64_t t = 0; t < extent; ++t) {
      const std::int64_t i = is_row ? fixed : t, j = is_row ? t : fixed;
      const float got = out.at(i, j);
      if (!std::isfinite(got)) continue;
      const double err = std::fabs(double(got) - value[t]);
      max_abs = std::max(max_abs, err);
      if (scale[t] > 0)
        max_rel = std::max(max_rel, err / scale[t]);
      else if (err > absolute_tolerance)
        max_rel = INFINITY;
      if (!(err <= rtol * scale[t] + absolute_tolerance)) {
        // A sampled row and a sampled column may share the element: count it once, on the row.
        if (!is_row && std::binary_search(ref.rows.begin(), ref.rows.end(), i)) continue;
        ++sampled_failures;
        first_sampled = std::min(first_sampled, i * n + j);
        failing[std::size_t(s)].push_back(i * n + j);
      }
    }
  }
  for (const auto& list : failing)
    for (const std::int64_t e : list) found.row_bad[std::size_t(e / n)] = found.col_bad[std::size_t(e % n)] = 1;
  found.sampled_failures = sampled_failures;
  found.first_sampled = first_sampled;
  found.max_abs = max_abs;
  found.max_rel = max_rel;
}

// C V (row blocks) and u^T C of the output, with the sums of their elements' magnitudes.
template <gemm_precision P>
void project_output(const gemm_output& out, const gemm_reference& ref, std::vector<double>& right,
                    std::vector<double>& right_abs, std::vector<double>& left, std::vector<double>& left_abs) {
  const float* c = out.c;
  const std::int64_t m = out.m, n = out.n, blocks = projection_blocks(n);
  std::vector<double> v(static_cast<std::size_t>(n)), u(static_cast<std::size_t>(m));
  for (std::int64_t j = 0; j < n; ++j) v[std::size_t(j)] = sign_of(ref.salt, j);
  for (std::int64_t i = 0; i < m; ++i) u[std::size_t(i)] = sign_of(ref.salt ^ 1, i);
  const std::vector<double> ones(static_cast<std::size_t>(std::max(m, n)), 1.0);
  // Row blocks of C V: by rows, reading C along its storage (rows of a row-major C; a column-major C a
  // column at a time into every row's block).
  if (out.row_major) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const double x = c[i * n + j];
        right[std::size_t(i * blocks + j / projection_block)] += v[std::size_t(j)] * x;
        right_abs[std::size_t(i * blocks + j / projection_block)] += std::fabs(x);
      }
  } else {
    const std::int64_t tile = 256;
#pragma omp parallel for schedule(static)
    for (std::int64_t i0 = 0; i0 < m; i0 += tile)
      for (std::int64_t j = 0; j < n; ++j) {
        const double sign = v[std::size_t(j)];
        for (std::int64_t i = i0; i < std::min(m, i0 + tile); ++i) {
          const double x = c[j * m + i];
          right[std::size_t(i * blocks + j / projection_block)] += sign * x;
          right_abs[std::size_t(i * blocks + j / projection_block)] += std::fabs(x);
        }
      }
  }
  matvec<P>(strided<float>{c, n, m, out.row_major ? 1 : m, out.row_major ? n : 1}, u.data(), ones.data(), left.data(),
            left_abs.data(), true);
}

// (c) the projections, on rows and columns with no failure found by (a) or (b).
template <gemm_precision P>
void check_projections(const gemm_output& out, const gemm_reference& ref, double rtol, gemm_findings& found) {
  const std::int64_t m = out.m, n = out.n, blocks = projection_blocks(n);
  std::vector<double> right(static_cast<std::size_t>(m * blocks), 0.0), right_abs(right.size(), 0.0);
  std::vector<double> left(static_cast<std::size_t>(n)), left_abs(static_cast<std::size_t>(n));
  project_output<P>(out, ref, right, right_abs, left, left_abs);
  const double slack = projection_slack(std::max(m, n), ref.k);
  for (std::int64_t i = 0; i < m; ++i) {
    if (found.row_bad[std::size_t(i)]) continue;
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::size_t r = std::size_t(i * blocks + b);
      const double width = double(std::min(n, (b + 1) * projection_block) - b * projection_block);
      const double err = std::fabs(right[r] - ref.right[r]);
      const double bound =
          rtol * ref.right_scale[r] + width * absolute_tolerance + slack * (right_abs[r] + ref.right_scale[r]);
      if (!(err <= bound)) {
        if (found.unexplained_rows++ == 0) {
          found.first_row = i;
          found.first_block = b;
          found.row_err = err;
          found.row_bound = bound;
        }
        break;  // one failing block makes the row unexplained
      }
    }
  }
  for (std::int64_t j = 0; j < n; ++j) {
    if (found.col_bad[std::size_t(j)]) continue;
    const std::size_t s = std::size_t(j);
    const double err = std::fabs(left[s] - ref.left[s]);
    const double bound =
        rtol * ref.left_scale[s] + double(m) * absolute_tolerance + slack * (left_abs[s] + ref.left_scale[s]);
    if (!(err <= bound)) {
      if (found.unexplained_cols++ == 0) {
        found.first_col = j;
        found.col_err = err;
        found.col_bound = bound;
      }
    }
  }
}

template <gemm_precision P>
class gemm_operation final : public described_operation {
 public:
  gemm_operation() {
    m_info.name = operation_name(P);
    m_info.description = std::string("C = A B, A m x k and B k x n ") +
                         (P == gemm_precision::fp32   ? "float32, float32 multiply"
                          : P == gemm_precision::tf32 ? "float32 multiplied as TF32 (tensor cores)"
                          : P == gemm_precision::bf16 ? "bfloat16, exact products"
                                                      : "IEEE binary16, exact products") +
                         ", C float32 (2 m n k flops)";
    m_info.axes = {"m", "n", "k"};
    m_info.layouts = {table_layout::row_major, table_layout::feature_major};
    m_info.outputs = {"c"};
    m_info.bench_points = {{4096, 4096, 4096}, {8192, 8192, 8192}, {1031, 517, 263}};
    m_info.headline_point = {4096, 4096, 4096};  // the SGEMM the kernel ladder is judged at
    // The practical roof, measured in the same run: cuBLAS at the same input precision (best of 8192^3 and
    // 4096^3); for the tensor-core operations the best of that and the wgmma peak probe of the same input type,
    // since a handwritten wgmma rung beat cuBLAS BF16.
    m_info.compute_ceiling = P == gemm_precision::fp32   ? "cublas_fp32_gemm"
                             : P == gemm_precision::tf32 ? "device_tf32_tensor"
                             : P == gemm_precision::bf16 ? "device_bf16_tensor"
                                                         : "device_fp16_tensor";
  }

  std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const override {
    check_shape(shape);
    const std::int64_t m = shape.rows, n = shape.features, k = shape.depth;
    const bool row_major = shape.layout == table_layout::row_major;
    const std::uint64_t a_key = splitmix64(seed ^ splitmix64(a_array)), b_key = splitmix64(seed ^ splitmix64(b_array));
    if constexpr (stores_16_bit(P)) {
      const auto convert = [](float v) { return P == gemm_precision::bf16 ? round_to_bf16(v) : fp16_input(v); };
      auto a = fill<std::uint16_t>(a_key, {row_major, m, k}, convert);
      auto b = fill<std::uint16_t>(b_key, {row_major, k, n}, convert);
      return std::make_unique<gemm_data>(P, shape, nullptr, nullptr, std::move(a), std::move(b));
    } else {
      auto a = fill<float>(a_key, {row_major, m, k}, [](float v) { return v; });
      auto b = fill<float>(b_key, {row_major, k, n}, [](float v) { return v; });
      return std::make_unique<gemm_data>(P, shape, std::move(a), std::move(b), nullptr, nullptr);
    }
  }

  std::unique_ptr<problem_data> relayout(const problem_data& source, const table_shape& shape) const override {
    check_shape(shape);
    const auto& data = gemm_problem(source, P);
    if (data.m() != shape.rows || data.n() != shape.features || data.k() != shape.depth)
      throw std::invalid_argument(m_info.name + ": relayout cannot change the shape");
    const bool from = data.row_major(), to = shape.layout == table_layout::row_major;
    const std::int64_t m = data.m(), n = data.n(), k = data.k();
    if constexpr (stores_16_bit(P)) {
      auto a = copy(data.a_16bit(), from, to, m, k);
      auto b = copy(data.b_16bit(), from, to, k, n);
      return std::make_unique<gemm_data>(P, shape, nullptr, nullptr, std::move(a), std::move(b));
    } else {
      auto a = copy(data.a(), from, to, m, k);
      auto b = copy(data.b(), from, to, k, n);
      return std::make_unique<gemm_data>(P, shape, std::move(a), std::move(b), nullptr, nullptr);
    }
  }

  std::unique_ptr<reference_data> reference(const problem_data& problem) const override {
    const auto& p = gemm_problem(problem, P);
    if constexpr (stores_16_bit(P))
      return make_reference<std::uint16_t>(p, p.a_16bit(), p.b_16bit());
    else
      return make_reference<float>(p, p.a(), p.b());
  }

  std::vector<std::int64_t> output_bytes(const table_shape& shape) const override {
    return {shape.rows * shape.features * std::int64_t(sizeof(float))};
  }

  // A and B as stored (the shape's layout: feature-major holds each matrix transposed, so its extents are
  // swapped), 16-bit patterns named by their format; C float32 the same way.
  external_problem external_inputs(const problem_data& problem) const override {
    const auto& p = gemm_problem(problem, P);
    const std::string dtype = P == gemm_precision::bf16   ? "bfloat16"
                              : P == gemm_precision::fp16 ? "float16"
                                                          : "float32";
    const auto matrix = [&](const char* name, std::int64_t rows, std::int64_t cols, const void* data) {
      array_description a{
          name, dtype, p.row_major() ? std::vector<std::int64_t>{rows, cols} : std::vector<std::int64_t>{cols, rows}};
      const std::int64_t bytes = array_bytes(a);
      return std::make_pair(std::move(a), host_span{const_cast<void*>(data), bytes});
    };
    const void* a = stores_16_bit(P) ? static_cast<const void*>(p.a_16bit()) : p.a();
    const void* b = stores_16_bit(P) ? static_cast<const void*>(p.b_16bit()) : p.b();
    external_problem e;
    e.inputs = {matrix("a", p.m(), p.k(), a), matrix("b", p.k(), p.n(), b)};
    e.streamed = 2;
    return e;
  }
  std::vector<array_description> external_outputs(const table_shape& shape) const override {
    const bool row_major = shape.layout == table_layout::row_major;
    return {{"c", "float32",
             row_major ? std::vector<std::int64_t>{shape.rows, shape.features}
                       : std::vector<std::int64_t>{shape.features, shape.rows}}};
  }

  void poison(const std::vector<host_span>& outputs) const override { fill_nan(outputs.at(0)); }

  gate_result check(const problem_data& problem, const reference_data& reference,
                    const std::vector<host_span>& outputs) const override {
    const auto& p = gemm_problem(problem, P);
    const auto& ref = dynamic_cast<const gemm_reference&>(reference);
    if (ref.m != p.m() || ref.n != p.n() || ref.k != p.k())
      throw std::invalid_argument(m_info.name + ": the reference is of another shape");
    const gemm_output c{c_output(outputs), p.row_major(), p.m(), p.n()};
    const double rtol = relative_tolerance(P, p.k());
    gemm_findings found(c);
    find_nonfinite(c, found);                   // (a)
    check_sampled_lines(c, ref, rtol, found);   // (b)
    check_projections<P>(c, ref, rtol, found);  // (c)

    gate_result g;
    g.rtol = rtol;
    g.atol = absolute_tolerance;
    g.checked = c.m * c.n;
    // Every unexplained failing row (column) holds at least one wrong element outside those counted.
    g.value_failures =
        found.nonfinite + found.sampled_failures + std::max(found.unexplained_rows, found.unexplained_cols);
    g.max_abs_error = found.nonfinite > 0 ? INFINITY : found.max_abs;
    g.max_relative_error = found.nonfinite > 0 ? INFINITY : found.max_rel;
    g.passed = g.value_failures == 0;
    if (!g.passed) g.message = failure_message(p, c, rtol, found, g.value_failures);
    return g;
  }

  // c[0, 0] (always checked: row 0 is sampled) moved to the first float more than twice its bound away:
  // |new - ref| >= |new - c| - |c - ref| > bound.
  void corrupt(const problem_data& problem, const std::vector<host_span>& outputs) const override {
    const auto& p = gemm_problem(problem, P);
    double expected, scale;
    element_reference(p, 0, 0, expected, scale);
    const double bound = relative_tolerance(P, p.k()) * scale + absolute_tolerance;
    float& c = c_output(outputs)[0];  // (0, 0) in both layouts
    c = moved_beyond(c, bound);
  }

  // Every element from a float64 product where that is cheap (m n k <= 2^28); beyond, the sampled lines
  // from the reference and the rest a fill that meets every projection of the reference (returns false).
  bool reference_outputs(const problem_data& problem, const reference_data& reference,
                         const std::vector<host_span>& outputs) const override {
    const auto& p = gemm_problem(problem, P);
    const auto& ref = dynamic_cast<const gemm_reference&>(reference);
    const std::int64_t m = p.m(), n = p.n();
    float* c = c_output(outputs);
    if (ref.cols.empty() && std::int64_t(ref.rows.size()) == m) {  // the reference holds every element
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j)
          c[offset(p.row_major(), i, j, m, n)] = static_cast<float>(ref.row_value[std::size_t(i * n + j)]);
      return true;
    }
    if (double(m) * double(n) * double(p.k()) <= direct_product_limit) {
      product(p, p.k(), c);
      return true;
    }
    consistent_fill(p, ref, c);
    return false;
  }
  // Less work: the last k-slice skipped (C = A(:, 0..k') B(0..k', :), k' = k minus ~fraction of k). Where
  // reference_outputs fills, the sampled lines carry the loss (the rest keeps the fill).
  void drop_work(const problem_data& problem, const reference_data& reference, const std::vector<host_span>& outputs,
                 double fraction) const override {
    const auto& p = gemm_problem(problem, P);
    const auto& ref = dynamic_cast<const gemm_reference&>(reference);
    const std::int64_t m = p.m(), n = p.n(), k = p.k();
    const std::int64_t kept = k - std::max<std::int64_t>(1, std::int64_t(std::ceil(fraction * double(k))));
    float* c = c_output(outputs);
    if (double(m) * double(n) * double(k) <= direct_product_limit) {
      product(p, kept, c);
      return;
    }
    consistent_fill(p, ref, c);
    if constexpr (stores_16_bit(P))
      sampled_lines_product<std::uint16_t>(p, p.a_16bit(), p.b_16bit(), ref, kept, c);
    else
      sampled_lines_product<float>(p, p.a(), p.b(), ref, kept, c);
  }

  traffic_model essential_traffic(const table_shape& shape) const override {
    return gemm::essential_traffic(P, shape.rows, shape.features, shape.depth);
  }
  std::int64_t essential_flops(const table_shape& shape) const override {
    return gemm::essential_flops(shape.rows, shape.features, shape.depth);
  }
  std::int64_t input_bytes(const table_shape& shape) const override {
    return (shape.rows + shape.features) * shape.depth * input_element_bytes(P);
  }
  // What gemm_reference holds: the sampled indices, two doubles per sampled element, four per row and
  // column for the projections.
  std::int64_t reference_bytes(const table_shape& shape) const override {
    const std::int64_t m = shape.rows, n = shape.features, k = shape.depth;
    const std::int64_t rows = checks_everything(m, n, k) ? m : sampled_count(m);
    const std::int64_t cols = rows == m ? 0 : sampled_count(n);
    const std::int64_t d = sizeof(double);
    return (rows + cols) * std::int64_t(sizeof(std::int64_t)) + 2 * d * (rows * n + cols * m) +
           2 * d * (m * projection_blocks(n) + n) + 2 * d * k * projection_blocks(n);  // the last: W while built
  }

 private:
  void check_shape(const table_shape& shape) const {
    shape.validate();
    if (shape.layout != table_layout::row_major && shape.layout != table_layout::feature_major)
      throw std::invalid_argument(m_info.name + ": expects a row_major or feature_major m x n x k shape");
    if (shape.depth < 1) throw std::invalid_argument(m_info.name + ": k must be positive");
  }

  // The matrix of `rows` x `cols` in a layout, element (r, c) = convert(element(key, r * cols + c)).
  template <class T, class Convert>
  static std::unique_ptr<T[]> fill(std::uint64_t key, const logical_index& order, Convert convert) {
    const std::int64_t count = order.rows * order.cols;
    std::unique_ptr<T[]> out(new T[static_cast<std::size_t>(count)]);  // filled below, in parallel
    T* data = out.get();
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < count; ++e) {
      std::int64_t r, c;
      order.of(e, r, c);
      data[e] = convert(element(key, r * order.cols + c));
    }
    return out;
  }

  template <class T>
  static std::unique_ptr<T[]> copy(const T* in, bool from_row_major, bool to_row_major, std::int64_t rows,
                                   std::int64_t cols) {
    const std::int64_t count = rows * cols;
    std::unique_ptr<T[]> out(new T[static_cast<std::size_t>(count)]);
    T* data = out.get();
    const logical_index order{to_row_major, rows, cols};
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < count; ++e) {
      std::int64_t r, c;
      order.of(e, r, c);
      data[e] = in[offset(from_row_major, r, c, rows, cols)];
    }
    return out;
  }

  template <class T>
  static std::unique_ptr<reference_data> make_reference(const gemm_data& p, const T* a, const T* b) {
    const std::int64_t m = p.m(), n = p.n(), k = p.k();
    const operands<T> ops(a, b, m, n, k, p.row_major());
    auto ref = std::make_unique<gemm_reference>();
    ref->m = m;
    ref->n = n;
    ref->k = k;
    std::uint64_t salt =
        splitmix64(splitmix64(sample_salt) ^ std::uint64_t(m)) ^ splitmix64(std::uint64_t(n) * 31 + std::uint64_t(k));
    for (const float v : {p.a_at(0, 0), p.b_at(0, 0), p.a_at(m - 1, k - 1), p.b_at(k - 1, n - 1)}) {
      std::uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      salt = splitmix64(salt ^ bits);
    }
    ref->salt = splitmix64(salt ^ projection_salt);
    if (checks_everything(m, n, k)) {
      ref->rows.resize(static_cast<std::size_t>(m));
      for (std::int64_t i = 0; i < m; ++i) ref->rows[std::size_t(i)] = i;
    } else {
      ref->rows = sampled_lines(m, salt);
      ref->cols = sampled_lines(n, splitmix64(salt));
      if (std::int64_t(ref->rows.size()) == m) ref->cols.clear();
    }
    const std::size_t rows = ref->rows.size(), cols = ref->cols.size();
    ref->row_value.resize(rows * std::size_t(n));
    ref->row_scale.resize(rows * std::size_t(n));
    ref->col_value.resize(cols * std::size_t(m));
    ref->col_scale.resize(cols * std::size_t(m));
    // Row i of C is B^T a_i; column j is A b_j.
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t s = 0; s < std::int64_t(rows + cols); ++s) {
      std::vector<double> x(static_cast<std::size_t>(k)), x_abs(static_cast<std::size_t>(k));
      const bool is_row = s < std::int64_t(rows);
      const std::size_t line = is_row ? std::size_t(s) : std::size_t(s) - rows;
      for (std::int64_t l = 0; l < k; ++l) {
        x[std::size_t(l)] = is_row ? p.a_at(ref->rows[line], l) : p.b_at(l, ref->cols[line]);
        x_abs[std::size_t(l)] = std::fabs(x[std::size_t(l)]);
      }
      if (is_row)
        matvec<P>(ops.b_t, x.data(), x_abs.data(), &ref->row_value[line * std::size_t(n)],
                  &ref->row_scale[line * std::size_t(n)], false);
      else
        matvec<P>(ops.a, x.data(), x_abs.data(), &ref->col_value[line * std::size_t(m)],
                  &ref->col_scale[line * std::size_t(m)], false);
    }
    // Projections: A (B v) with |A| (|B| 1), and B^T (A^T u) with |B|^T (|A|^T 1).
    std::vector<double> v(static_cast<std::size_t>(n)), u(static_cast<std::size_t>(m));
    for (std::int64_t j = 0; j < n; ++j) v[std::size_t(j)] = sign_of(ref->salt, j);
    for (std::int64_t i = 0; i < m; ++i) u[std::size_t(i)] = sign_of(ref->salt ^ 1, i);
    const std::vector<double> ones(static_cast<std::size_t>(std::max(m, n)), 1.0);
    std::vector<double> w(static_cast<std::size_t>(k)), w_abs(static_cast<std::size_t>(k));
    block_projections(p, v, *ref);
    ref->left.resize(std::size_t(n));
    ref->left_scale.resize(std::size_t(n));
    matvec<P>(ops.a_t, u.data(), ones.data(), w.data(), w_abs.data(), true);
    matvec<P>(ops.b_t, w.data(), w_abs.data(), ref->left.data(), ref->left_scale.data(), true);
    return ref;
  }

  // ref.right = A (B V_b) and ref.right_scale = |A| (|B| 1_b) for every column block b, in float64:
  // W = B V (k x blocks, O(kn)), then A W in tiles of rows so that W streams once per tile.
  static void block_projections(const gemm_data& p, const std::vector<double>& v, gemm_reference& ref) {
    const std::int64_t m = p.m(), n = p.n(), k = p.k(), blocks = projection_blocks(n);
    const auto kb = static_cast<std::size_t>(k * blocks);
    std::vector<double> w(kb, 0.0), w_abs(kb, 0.0);
#pragma omp parallel for schedule(static)
    for (std::int64_t l = 0; l < k; ++l)
      for (std::int64_t j = 0; j < n; ++j) {
        const double b = p.b_at(l, j);
        w[std::size_t(l * blocks + j / projection_block)] += v[std::size_t(j)] * b;
        w_abs[std::size_t(l * blocks + j / projection_block)] += std::fabs(b);
      }
    ref.right.assign(static_cast<std::size_t>(m * blocks), 0.0);
    ref.right_scale.assign(ref.right.size(), 0.0);
    constexpr std::int64_t tile = 32;
    const std::int64_t tiles = (m + tile - 1) / tile;
#pragma omp parallel
    {
      std::vector<double> a(static_cast<std::size_t>(tile));
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t t = 0; t < tiles; ++t) {
        const std::int64_t i0 = t * tile, i1 = std::min(m, i0 + tile);
        for (std::int64_t l = 0; l < k; ++l) {
          for (std::int64_t i = i0; i < i1; ++i) a[std::size_t(i - i0)] = p.a_at(i, l);
          const double* wl = &w[std::size_t(l * blocks)];
          const double* wal = &w_abs[std::size_t(l * blocks)];
          for (std::int64_t i = i0; i < i1; ++i) {
            const double x = a[std::size_t(i - i0)], xa = std::fabs(x);
            double* out = &ref.right[std::size_t(i * blocks)];
            double* out_abs = &ref.right_scale[std::size_t(i * blocks)];
            for (std::int64_t b = 0; b < blocks; ++b) {
              out[b] += x * wl[b];
              out_abs[b] += xa * wal[b];
            }
          }
        }
      }
    }
  }

  // The sampled lines of A(:, 0..kept) B(0..kept, :) in float64, rounded to float, into c (as
  // make_reference computes them, with the terms from kept on zeroed).
  template <class T>
  static void sampled_lines_product(const gemm_data& p, const T* a, const T* b, const gemm_reference& ref,
                                    std::int64_t kept, float* c) {
    const std::int64_t m = p.m(), n = p.n(), k = p.k();
    const operands<T> ops(a, b, m, n, k, p.row_major());
    const auto lines = std::int64_t(ref.rows.size() + ref.cols.size());
#pragma omp parallel
    {
      std::vector<double> x(static_cast<std::size_t>(k), 0.0), x_abs(static_cast<std::size_t>(k), 0.0);
      std::vector<double> y(static_cast<std::size_t>(std::max(m, n))), y_abs(y.size());
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t s = 0; s < lines; ++s) {
        const bool is_row = s < std::int64_t(ref.rows.size());
        const std::int64_t fixed = is_row ? ref.rows[std::size_t(s)] : ref.cols[std::size_t(s) - ref.rows.size()];
        for (std::int64_t l = 0; l < kept; ++l) x[std::size_t(l)] = is_row ? p.a_at(fixed, l) : p.b_at(l, fixed);
        matvec<P>(is_row ? ops.b_t : ops.a, x.data(), x_abs.data(), y.data(), y_abs.data(), false);
        for (std::int64_t t = 0; t < (is_row ? n : m); ++t)
          c[is_row ? offset(p.row_major(), fixed, t, m, n) : offset(p.row_major(), t, fixed, m, n)] =
              static_cast<float>(y[std::size_t(t)]);
      }
    }
  }

  // C = A(:, 0..kept) B(0..kept, :) in float64, rounded to float, in the problem's layout.
  static void product(const gemm_data& p, std::int64_t kept, float* c) {
    const std::int64_t m = p.m(), n = p.n();
#pragma omp parallel
    {
      std::vector<double> row(static_cast<std::size_t>(n));
#pragma omp for schedule(static)
      for (std::int64_t i = 0; i < m; ++i) {
        std::fill(row.begin(), row.end(), 0.0);
        for (std::int64_t l = 0; l < kept; ++l) {
          const double a = p.a_at(i, l);
          for (std::int64_t j = 0; j < n; ++j) row[std::size_t(j)] += a * double(p.b_at(l, j));
        }
        for (std::int64_t j = 0; j < n; ++j)
          c[offset(p.row_major(), i, j, m, n)] = static_cast<float>(row[std::size_t(j)]);
      }
    }
  }

  // Outputs whose sampled lines are the reference's and whose other elements X (rows I and columns J not
  // sampled) meet the reference's projections: per row i in I and column block b, sum_{j in J_b} v_j X_ij
  // = a_ib (the block's reference less its sampled columns), per column j in J, sum_{i in I} u_i X_ij = l_j
  // (likewise). X_ij = a_ib v_j / |J_b| + u_i (l_j - v_j g_b / |J_b|) / |I|, g_b = sum_{i in I} u_i a_ib,
  // meets both: the column sums by construction (u_i^2 = 1), the row sums because g_b = sum_{j in J_b}
  // v_j l_j (both are u_I^T C_{I, J_b} v_{J_b} exactly; their float64 difference is within the slack).
  // What a correct GEMM leaves where no float64 reference is affordable, as far as the gate can see.
  static void consistent_fill(const gemm_data& p, const gemm_reference& ref, float* c) {
    const std::int64_t m = p.m(), n = p.n(), blocks = projection_blocks(n);
    const bool row_major = p.row_major();
    std::vector<char> row_sampled(static_cast<std::size_t>(m), 0), col_sampled(static_cast<std::size_t>(n), 0);
    for (const auto i : ref.rows) row_sampled[std::size_t(i)] = 1;
    for (const auto j : ref.cols) col_sampled[std::size_t(j)] = 1;
    // The sampled lines' exact values (as floats: what the outputs hold) in C.
    for (std::size_t s = 0; s < ref.rows.size(); ++s)
      for (std::int64_t j = 0; j < n; ++j)
        c[offset(row_major, ref.rows[s], j, m, n)] =
            static_cast<float>(ref.row_value[s * std::size_t(n) + std::size_t(j)]);
    for (std::size_t s = 0; s < ref.cols.size(); ++s)
      for (std::int64_t i = 0; i < m; ++i)
        c[offset(row_major, i, ref.cols[s], m, n)] =
            static_cast<float>(ref.col_value[s * std::size_t(m) + std::size_t(i)]);
    std::vector<double> v(static_cast<std::size_t>(n)), u(static_cast<std::size_t>(m));
    for (std::int64_t j = 0; j < n; ++j) v[std::size_t(j)] = sign_of(ref.salt, j);
    for (std::int64_t i = 0; i < m; ++i) u[std::size_t(i)] = sign_of(ref.salt ^ 1, i);
    // a_ib and l_j: the references less what the sampled lines contribute.
    std::vector<double> a(ref.right);
    std::vector<double> l(ref.left);
    std::vector<std::int64_t> free_in_block(static_cast<std::size_t>(blocks), 0);
    for (std::int64_t j = 0; j < n; ++j)
      free_in_block[std::size_t(j / projection_block)] += !col_sampled[std::size_t(j)];
    std::int64_t free_rows = 0;
    for (std::int64_t i = 0; i < m; ++i) free_rows += !row_sampled[std::size_t(i)];
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        if (row_sampled[std::size_t(i)] || col_sampled[std::size_t(j)])
          a[std::size_t(i * blocks + j / projection_block)] -=
              v[std::size_t(j)] * double(c[offset(row_major, i, j, m, n)]);
#pragma omp parallel for schedule(static)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < m; ++i)
        if (row_sampled[std::size_t(i)] || col_sampled[std::size_t(j)])
          l[std::size_t(j)] -= u[std::size_t(i)] * double(c[offset(row_major, i, j, m, n)]);
    if (free_rows == 0) return;
    std::vector<double> g(static_cast<std::size_t>(blocks), 0.0);
    for (std::int64_t i = 0; i < m; ++i)
      if (!row_sampled[std::size_t(i)])
        for (std::int64_t b = 0; b < blocks; ++b)
          g[std::size_t(b)] += u[std::size_t(i)] * a[std::size_t(i * blocks + b)];
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < m; ++i) {
      if (row_sampled[std::size_t(i)]) continue;
      for (std::int64_t j = 0; j < n; ++j) {
        if (col_sampled[std::size_t(j)]) continue;
        const std::int64_t b = j / projection_block;
        const double width = double(free_in_block[std::size_t(b)]);
        const double x =
            a[std::size_t(i * blocks + b)] * v[std::size_t(j)] / width +
            u[std::size_t(i)] * (l[std::size_t(j)] - v[std::size_t(j)] * g[std::size_t(b)] / width) / double(free_rows);
        c[offset(row_major, i, j, m, n)] = static_cast<float>(x);
      }
    }
  }

  // The float64 value and scale S of element (i, j), from the inputs (O(k)).
  // The first failure check() found, in the order of its phases, and the counts of all of them.
  std::string failure_message(const gemm_data& p, const gemm_output& c, double rtol, const gemm_findings& found,
                              std::int64_t failures) const {
    const std::int64_t m = c.m, n = c.n;
    const std::string tail = "; " + std::to_string(failures) + " of " + std::to_string(m * n) + " elements fail (" +
                             std::to_string(found.nonfinite) + " not finite, " +
                             std::to_string(found.sampled_failures) + " sampled beyond their bound, " +
                             std::to_string(found.unexplained_rows) + " rows and " +
                             std::to_string(found.unexplained_cols) + " columns failing the projections elsewhere)";
    const std::int64_t first = std::min(found.first_nonfinite, found.first_sampled);
    if (first < m * n) {
      const std::int64_t i = first / n, j = first % n;
      const float got = c.at(i, j);
      double expected = 0, scale = 0;
      element_reference(p, i, j, expected, scale);
      const double bound = rtol * scale + absolute_tolerance;
      return m_info.name + ": c[" + std::to_string(i) + ", " + std::to_string(j) + "] = " + format_g9(got) +
             " but the float64 reference is " + format_g9(expected) + " (|error| " +
             format_g9(std::fabs(double(got) - expected)) + ", bound " + format_g9(bound) + ")" + tail;
    }
    if (found.first_row >= 0) {
      const std::int64_t j0 = found.first_block * projection_block, j1 = std::min(n, j0 + projection_block);
      return m_info.name + ": row " + std::to_string(found.first_row) + ", columns " + std::to_string(j0) + ".." +
             std::to_string(j1 - 1) + " of C v differ from A (B v) by " + format_g9(found.row_err) +
             ", beyond the sum of their elements' bounds " + format_g9(found.row_bound) + " (an element of row " +
             std::to_string(found.first_row) + " there is wrong)" + tail;
    }
    return m_info.name + ": column " + std::to_string(found.first_col) + " of u^T C differs from (u^T A) B by " +
           format_g9(found.col_err) + ", beyond the sum of its elements' bounds " + format_g9(found.col_bound) +
           " (an element of column " + std::to_string(found.first_col) + " is wrong)" + tail;
  }

  static void element_reference(const gemm_data& p, std::int64_t i, std::int64_t j, double& value, double& scale) {
    value = scale = 0.0;
    for (std::int64_t l = 0; l < p.k(); ++l) {
      const double t = double(p.a_at(i, l)) * double(p.b_at(l, j));
      value += t;
      scale += std::fabs(t);
    }
  }
};

const operation_registration<gemm_operation<gemm_precision::fp32>> register_gemm;
const operation_registration<gemm_operation<gemm_precision::tf32>> register_gemm_tf32;
const operation_registration<gemm_operation<gemm_precision::bf16>> register_gemm_bf16;
const operation_registration<gemm_operation<gemm_precision::fp16>> register_gemm_fp16;

}  // namespace
}  // namespace kstudy::gemm
