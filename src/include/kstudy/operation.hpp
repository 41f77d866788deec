#pragma once
// An operation is a plug-in: the one place that says what a computation is, independent of how any
// variant computes it. The study runner, the benchmark, the profiler and the archive only ever talk to
// this interface, so adding an operation touches no file under src/. An operation declares
//   - its problem axes: named integer extents (scoring: rows x features; stream: n;
//     gemm: m x n x k), at most three;
//   - the layouts its inputs come in and the shape of a point in each (padding included);
//   - deterministic, seeded input generation, and the same inputs in another layout;
//   - a float64 (or exact) reference and the gate that compares a variant's outputs with it, with a
//     tolerance model the operation derives and documents;
//   - its essential bytes and flops per problem, from which bandwidth, % of roof and the roofline's
//     intensity are computed one way for every operation;
//   - optionally, a pipelined one-shot strategy (how to cut a problem into chunks is operation knowledge).
// An operation file registers itself beside its definition:
//
//   const kstudy::operation_registration<my_operation> register_my_operation;
//
// Kokkos-free, so handwritten CUDA (.cu) variants include it too.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kstudy/views/host_memory.hpp"
#include "kstudy/views/table_shape.hpp"

namespace kstudy {

// Bytes a computation moves through the memory of its space for one resident run.
struct traffic_model {
  std::int64_t bytes_read = 0;
  std::int64_t bytes_written = 0;
  std::int64_t total() const { return bytes_read + bytes_written; }
};

// A host array handed across the one-shot boundary (input uploaded, output downloaded).
struct host_span {
  void* data = nullptr;
  std::int64_t bytes = 0;
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// An operation's generated inputs at one point in one layout. The runner owns it and never looks inside:
// it hands it to the operation (reference, gate) and to variants (prepare).
class problem_data {
 public:
  virtual ~problem_data() = default;
  virtual const table_shape& shape() const = 0;
  // The inputs a one-shot call copies from host memory every call, in the operation's order (scoring: the
  // table x). The rest (scoring: the feature vectors) are parameters a variant uploads once in prepare.
  virtual std::vector<host_span> streamed_inputs() const = 0;
};

// The float64 (or exact) result an operation's gate compares against; owned by the runner, opaque to it.
class reference_data {
 public:
  virtual ~reference_data() = default;
};

// What the gate said about one variant's outputs. Element counts are over the operation's outputs:
// value_failures are outputs outside the tolerance (or left poisoned), discrete_mismatches are decisions
// (scoring: flags, counts) that differ where the reference is unambiguous, ambiguous are outputs the
// tolerance cannot decide (scoring: rows within the bound of the threshold).
struct gate_result {
  bool passed = false;
  double max_abs_error = 0.0;
  double max_relative_error = 0.0;  // |error| / the tolerance's own scale
  double rtol = 0.0;
  double atol = 0.0;
  std::int64_t value_failures = 0;
  std::int64_t discrete_mismatches = 0;
  std::int64_t ambiguous = 0;
  std::int64_t checked = 0;  // outputs compared
  std::string message;       // empty when passed; otherwise the first failing output and why
};

struct operation_info {
  std::string name;         // e.g. scoring, stream_triad
  std::string description;  // one line, for kstudy list
  // Named extents of a problem, in order; a point gives one value per axis. The first maps to a shape's
  // rows, the second (if any) to its features, the third (if any) to its depth; missing ones are 1.
  std::vector<std::string> axes;
  std::vector<table_layout> layouts;  // the layouts its inputs come in
  std::vector<std::string> outputs;   // names of the host arrays download() fills, in order
  // Points kstudy_bench times when no --shapes are given: one extent list per point.
  std::vector<std::vector<std::int64_t>> bench_points;
  // The measured ceiling a compute-bound operation's flops are quoted against (a ceiling_record name:
  // device_fp32_fma, cublas_fp32_gemm, cublas_tf32_gemm, cublas_bf16_gemm, device_bf16_tensor); empty for a
  // bandwidth-bound operation, whose bytes are quoted against the bandwidth roofs.
  std::string compute_ceiling;
  // The point a report reads this operation's ladder at where an experiment measured it (the study's target shape,
  // e.g. the 4096^3 SGEMM); empty: the largest point measured. Stored with each experiment (experiment_facts.hpp).
  std::vector<std::int64_t> headline_point;
};

// Run-time compilation of an operation's kernel source with an empty cache (the cold_compile kind):
// compile and module-load seconds, archived as nvrtc_<source> and module_load_<source>.
struct runtime_compile_timing {
  std::string source;  // e.g. fused_cuda_kernels
  double compile_seconds = 0;
  double load_seconds = 0;
};

// An array as a variant written in another language sees it (a Python rung: kstudy_py.rungs): its name, its
// element type as NumPy spells it (float32, uint8, int64) and its extents in C order ({} for a scalar).
struct array_description {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> extents;
};
// Bytes of one element of a dtype above; throws std::invalid_argument for one it does not know.
std::int64_t dtype_bytes(const std::string& dtype);
// Bytes of the whole array.
std::int64_t array_bytes(const array_description& array);

// A problem as a variant in another language receives it: every input named and typed with its host data, the
// streamed ones first (problem_data::streamed_inputs(), in order; a one-shot call refreshes them), then the
// parameters; and the operation's scalars (scoring: clip, threshold), by name. The spans point into the
// problem_data, which outlives the value.
struct external_problem {
  std::vector<std::pair<array_description, host_span>> inputs;
  std::size_t streamed = 0;
  std::vector<std::pair<std::string, double>> scalars;
};

class operation;
struct registered_variant;
struct run_options;

// The pipelined one-shot strategy of an operation: host input -> host outputs through chunked,
// overlapped upload / kernel / download. Gated like every other timing (the runner checks its outputs).
class one_shot_pipeline {
 public:
  virtual ~one_shot_pipeline() = default;
  // inputs: the problem's streamed inputs, in host memory of the kind the pipeline was made for; outputs:
  // host arrays of operation::output_bytes. Returns when every output is host-visible.
  virtual void run(const std::vector<host_span>& inputs, const std::vector<host_span>& outputs) = 0;
};

class operation {
 public:
  virtual ~operation() = default;
  virtual const operation_info& info() const = 0;

  // The shape of a point: extents in the order of info().axes (validated; throws std::invalid_argument
  // naming the axis), a layout, and the extra elements per row of a padded layout.
  virtual table_shape shape(const std::vector<std::int64_t>& extents, table_layout layout,
                            std::int64_t row_padding) const;
  // Seeded, deterministic inputs: the same seed gives the same values in every layout.
  virtual std::unique_ptr<problem_data> generate(const table_shape& shape, std::uint64_t seed) const = 0;
  // The same values in another shape's layout (a copy, not a regeneration).
  virtual std::unique_ptr<problem_data> relayout(const problem_data& source, const table_shape& shape) const = 0;
  virtual std::unique_ptr<reference_data> reference(const problem_data& problem) const = 0;
  // Bytes of each host output array (info().outputs, in order) at a shape.
  virtual std::vector<std::int64_t> output_bytes(const table_shape& shape) const = 0;
  // Outputs before the gate: each array is filled with a pattern no correct run leaves behind.
  virtual void poison(const std::vector<host_span>& outputs) const = 0;
  virtual gate_result check(const problem_data& problem, const reference_data& reference,
                            const std::vector<host_span>& outputs) const = 0;
  // Makes correct outputs slightly wrong: just beyond the tolerance, in one output, so the gate must reject
  // it (fault injection `corrupt`; the gate's negative tests). Throws std::logic_error where it cannot.
  virtual void corrupt(const problem_data& problem, const std::vector<host_span>& outputs) const = 0;

  // Two hooks for the gate's conformance suite (tests/test_gate_conformance.cpp), which shows from the
  // operation's own reference, without running any variant, that the gate accepts what a correct kernel
  // leaves and rejects what a wrong one does (zeros, less work, corrupt(), poison) at every bench point.
  // Each is the operation's own knowledge; the defaults throw std::logic_error naming the operation and the
  // hook, so the suite fails for an operation that registers without them.
  //
  // Writes outputs a correct variant could leave: the reference rounded to the output types. Returns true
  // when every output is the reference's; false where the operation's reference holds only sampled lines
  // (a float64 reference of every output is too costly on a host): the sampled lines are then the
  // reference's and the rest holds values that the gate's other checks accept (the suite tests the
  // rejections on the sampled lines there).
  virtual bool reference_outputs(const problem_data& problem, const reference_data& reference,
                                 const std::vector<host_span>& outputs) const;
  // Writes outputs as if about `fraction` (0 < fraction < 1) of the work had been skipped, in what "less
  // work" means for the operation (the tail of a vector, the last keys of a row, a k-slice), every output
  // otherwise correct. Where reference_outputs returns false, the sampled lines carry the loss.
  virtual void drop_work(const problem_data& problem, const reference_data& reference,
                         const std::vector<host_span>& outputs, double fraction) const;

  // The operation's minimal traffic and arithmetic: every variant's effective bandwidth is
  // essential_traffic / time, and the roofline's intensity essential_flops / essential_traffic.
  virtual traffic_model essential_traffic(const table_shape& shape) const = 0;
  virtual std::int64_t essential_flops(const table_shape& shape) const = 0;
  // Host bytes of a point's generated inputs (one layout) and of its reference, for the memory check.
  virtual std::int64_t input_bytes(const table_shape& shape) const = 0;
  virtual std::int64_t reference_bytes(const table_shape& shape) const = 0;

  // A pipelined one-shot of a variant, or nullptr where the operation has no such strategy (or the variant
  // cannot queue asynchronously). Built untimed; inputs arrive in `memory` host memory.
  virtual std::unique_ptr<one_shot_pipeline> make_pipeline(const registered_variant& variant,
                                                           const problem_data& problem, host_memory memory,
                                                           const run_options& options) const;

  // The problem as an external variant (a Python rung) receives it, and the outputs it returns: the arrays a
  // rung's callable takes by name and returns in order (info().outputs: same names, same order; bytes of
  // output_bytes()). An operation implements both to have Python rungs; the defaults throw std::logic_error
  // naming the operation, which the runner records as that rung's failure.
  virtual external_problem external_inputs(const problem_data& problem) const;
  virtual std::vector<array_description> external_outputs(const table_shape& shape) const;

  // Whether this build can compile a kernel source of the operation at run time (NVRTC, CUDA flavour);
  // the default has none, and the cold_compile kind then records no compile samples for the operation.
  virtual bool has_runtime_compile() const { return false; }
  // Compiles and loads that source once with an empty cache, on the current device. The default throws
  // std::logic_error naming the operation (has_runtime_compile() is false).
  virtual runtime_compile_timing runtime_compile() const;
};

// An operation whose constructor fills its info into m_info, the way every built-in one is written: info() once.
class described_operation : public operation {
 public:
  const operation_info& info() const override { return m_info; }

 protected:
  operation_info m_info;
};

class operation_registry {
 public:
  static operation_registry& instance();
  void add(std::unique_ptr<operation> op);
  const operation* find(const std::string& name) const;
  // Sorted by name.
  std::vector<const operation*> all() const;

 private:
  std::deque<std::unique_ptr<operation>> m_operations;
};

template <class Operation>
struct operation_registration {
  operation_registration() { operation_registry::instance().add(std::make_unique<Operation>()); }
};

}  // namespace kstudy
