#pragma once
// Host-side pieces an operation's definition (its operation.cpp) writes the same way as every other: the
// registration fields of its variants, the shape checks, seeded input filling and NaN poison in parallel, a
// gate's tally over many elements, a sum's blocked float64 reference and its one-value gate, and the number
// format of the gate's messages. Kokkos-free; loops run under OpenMP where the translation unit is built
// with it (every result here is independent of the thread count).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/variant.hpp"

namespace kstudy {

// A number as the gate's messages print it: 9 significant digits, enough to tell any two floats apart.
inline std::string format_g9(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.9g", v);
  return buffer;
}

// The registration fields every variant of an operation shares: its name, operation, family and
// description, and the bytes one resident run moves. The rest keeps variant_info's defaults (fusion full,
// row-major, one kernel); callers set what differs (backend, on_device, rung, kernels_launched, layout).
inline variant_info operation_variant_info(std::string name, std::string operation, std::string family,
                                           std::string description,
                                           std::function<traffic_model(const table_shape&)> traffic) {
  variant_info info;
  info.name = std::move(name);
  info.operation = std::move(operation);
  info.family = std::move(family);
  info.description = std::move(description);
  info.traffic = std::move(traffic);
  return info;
}

// A valid row-major shape, or std::invalid_argument "<operation>: expects a row-major <what>".
inline void require_row_major(const table_shape& shape, const std::string& operation, const std::string& what) {
  shape.validate();
  if (shape.layout != table_layout::row_major) throw std::invalid_argument(operation + ": expects a row-major " + what);
}
// A valid row-major shape of n rows and one feature (a vector of n elements).
inline void require_row_major_vector(const table_shape& shape, const std::string& operation) {
  shape.validate();
  if (shape.layout != table_layout::row_major || shape.features != 1)
    throw std::invalid_argument(operation + ": expects a row-major shape of n rows and one feature");
}

// out[i] = value(i) for i in [0, n), in parallel: the inputs a generator derives from (seed, array, index)
// are the same on every thread count.
template <class T, class Value>
void fill_parallel(T* out, std::int64_t n, Value&& value) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) out[i] = value(i);
}

// Every float of an output set to NaN (the poison no correct run leaves behind).
inline void fill_nan(const host_span& output) {
  fill_parallel(output.as<float>(), output.bytes / std::int64_t(sizeof(float)),
                [](std::int64_t) { return std::numeric_limits<float>::quiet_NaN(); });
}

// What a gate counts over many elements: the failures, the first failing one (by a code the operation
// chooses, smallest first), the largest error and the largest error relative to its bound.
struct gate_tally {
  std::int64_t failures = 0;
  std::int64_t first_bad = std::numeric_limits<std::int64_t>::max();
  double max_abs = 0.0;
  double max_relative = 0.0;

  void fail(std::int64_t code) {
    ++failures;
    first_bad = std::min(first_bad, code);
  }
  void error(double abs, double relative) {
    max_abs = std::max(max_abs, abs);
    max_relative = std::max(max_relative, relative);
  }
  void merge(const gate_tally& other) {
    failures += other.failures;
    first_bad = std::min(first_bad, other.first_bad);
    error(other.max_abs, other.max_relative);
  }
  // The counts into a gate result (its rtol, atol and checked are the caller's).
  void into(gate_result& g) const {
    g.value_failures = failures;
    g.max_abs_error = max_abs;
    g.max_relative_error = max_relative;
    g.passed = failures == 0;
  }
};

// visit(i, tally) for every i in [0, count), in parallel, each thread on a tally of its own, merged at the
// end: every count, minimum and maximum is the same on every thread count.
template <class Visit>
gate_tally tally_parallel(std::int64_t count, Visit&& visit) {
  gate_tally total;
#pragma omp parallel
  {
    gate_tally mine;
#pragma omp for schedule(static) nowait
    for (std::int64_t i = 0; i < count; ++i) visit(i, mine);
#pragma omp critical(kstudy_gate_tally)
    total.merge(mine);
  }
  return total;
}

// visit(r, c, i, tally) for every element (r, c) of a rows x cols row-major output, i = r * cols + c: a gate that
// walks a matrix element by element, a row at a time under tally_parallel (the same counts on every thread count).
template <class Visit>
gate_tally tally_rows(std::int64_t rows, std::int64_t cols, Visit&& visit) {
  return tally_parallel(rows, [&](std::int64_t r, gate_tally& t) {
    for (std::int64_t c = 0; c < cols; ++c) visit(r, c, r * cols + c, t);
  });
}

// |got - expected| of an output against its float64 reference, infinite where got is NaN (poison left behind,
// or a NaN computed): it fails every bound and shows as the largest error, where NaN would compare as neither.
inline double reference_error(double got, double expected) {
  return std::isnan(got) ? INFINITY : std::fabs(got - expected);
}

// The float64 reference of a sum of n terms and its scale: value = sum_i term(i), magnitude = sum_i |term(i)|.
class sum_reference final : public reference_data {
 public:
  double value = 0.0;
  double magnitude = 0.0;
};

// The sum in fixed blocks of `block` terms, each summed in order, the blocks added in order: the same value
// on every thread count.
template <class Term>
std::unique_ptr<sum_reference> blocked_sum(std::int64_t n, std::int64_t block, Term&& term) {
  const std::int64_t blocks = (n + block - 1) / block;
  std::vector<double> sums(static_cast<std::size_t>(blocks)), magnitudes(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    double s = 0.0, m = 0.0;
    const std::int64_t end = std::min(n, (b + 1) * block);
    for (std::int64_t i = b * block; i < end; ++i) {
      const double t = term(i);
      s += t;
      m += std::fabs(t);
    }
    sums[static_cast<std::size_t>(b)] = s;
    magnitudes[static_cast<std::size_t>(b)] = m;
  }
  auto ref = std::make_unique<sum_reference>();
  for (std::int64_t b = 0; b < blocks; ++b) {
    ref->value += sums[static_cast<std::size_t>(b)];
    ref->magnitude += magnitudes[static_cast<std::size_t>(b)];
  }
  return ref;
}
// Host memory blocked_sum needs: two doubles per block while it sums, two kept.
inline std::int64_t blocked_sum_bytes(std::int64_t n, std::int64_t block) {
  return 2 * std::int64_t(sizeof(double)) * ((n + block - 1) / block + 1);
}

// The gate of one summed output: |got - value| <= rtol * magnitude (NaN fails). `what` names the output
// ("op: s"), `rtol_formula` says how rtol was derived (the message prints the bound as formula * magnitude).
inline gate_result sum_gate(double got, const sum_reference& ref, double rtol, const std::string& what,
                            const std::string& rtol_formula) {
  gate_result g;
  g.rtol = rtol;
  g.atol = 0.0;
  g.checked = 1;
  const double err = reference_error(got, ref.value);
  const double bound = rtol * ref.magnitude;
  g.max_abs_error = err;
  g.max_relative_error = err == 0.0 ? 0.0 : (ref.magnitude > 0.0 ? err / ref.magnitude : INFINITY);
  g.value_failures = err <= bound ? 0 : 1;
  g.passed = g.value_failures == 0;
  if (!g.passed)
    g.message = what + " = " + format_g9(got) + " but the float64 reference is " + format_g9(ref.value) + " (|error| " +
                format_g9(err) + ", bound " + format_g9(bound) + " = " + rtol_formula + " * " +
                format_g9(ref.magnitude) + ")";
  return g;
}

}  // namespace kstudy
