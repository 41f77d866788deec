#pragma once
// The variant interface and its self-registration. A variant is one way of computing an operation; it
// sees the operation's inputs and outputs only as the operation's problem_data and named host arrays,
// so the runner drives every operation's variants the same way. Kokkos-free, so handwritten CUDA (.cu)
// variants implement it too. A variant file declares its class and registers it beside it, naming each
// field:
//
//   variant_info info;
//   info.name = "composed_feature_major";
//   info.operation = "scoring";
//   info.kernels_launched = 5;  // standardize, clip, weight, gemv, threshold
//   static const kstudy::variant_registration<my_variant> register_my_variant{info};
//
// Adding a variant touches that one file; nothing else lists variants. A variant whose code only some
// builds compile (a .cu file) splits the two: a .cpp file beside it, compiled in every build, declares its
// fields (variant_declaration), and the .cu file binds its class to the declared id (variant_binding). A
// build without the code then still knows the variant, as declared but not in this build.
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/views/table_shape.hpp"

namespace kstudy {

// How much of an operation one kernel does: the design card's ladder from library-composed to fully fused.
enum class fusion_level {
  none,     // one kernel (or library call) per step, intermediates in memory
  partial,  // some steps fused, others library calls
  full,     // the whole operation in one kernel
};
std::string_view to_string(fusion_level level);
// The level named as to_string() names it; throws std::invalid_argument listing the known names.
fusion_level parse_fusion_level(const std::string& name);

// Who wrote the kernels: the design card's question "what does Kokkos cost against handwritten CUDA?"
// compares the Kokkos implementations with the handwritten and vendor ones, so the report reads it here
// rather than from a list of family names. The label says what runs: a variant whose kernels include a library
// call is labelled by it, as the library (only the call) or as mixed (its own kernels around the call).
enum class implementation {
  kokkos,            // Kokkos kernels written for kstudy, nothing else (portable: every enabled backend)
  kokkos_kernels,    // Kokkos Kernels calls only (a library; portable; cuBLAS through its TPL where enabled)
  handwritten_cuda,  // kstudy's own CUDA escape path (plain CUDA C++, no Kokkos), no library call
  vendor_library,    // a vendor library called directly, nothing else: cuBLAS, CUB, cuDNN
  reference,         // the CPU baseline every speedup is quoted against
  mixed,             // handwritten kernels around a vendor library call (handwritten CUDA + cuBLAS/CUB/cuDNN)
  kokkos_mixed,      // Kokkos kernels written for kstudy around a Kokkos Kernels call (portable)
  framework,         // a Python rung: a framework's own operations (NumPy, CuPy, PyTorch), what its user writes
};
std::string_view to_string(implementation kind);
// The label named as to_string() names it; throws std::invalid_argument listing the known names.
implementation parse_implementation(const std::string& name);

// What a GPU must have to run a CUDA variant's code; unset, any GPU kstudy builds for (sm_75 and up). Declared
// with the variant's other fields: the runner, the benchmarks and the tests refuse the variant where the GPU, or
// the target the build compiled for (KSTUDY_CUDA_ARCH), falls short, recording it as skipped with the reason,
// and `kstudy list` prints it. The code itself is compiled for every target (kstudy/support/cuda_arch.hpp guards
// what an older one lacks), so a build for sm_75 links and knows every variant.
struct gpu_requirement {
  // The least compute capability, major * 10 + minor: 80 for cp.async, mma.sync m16n8k16 on bf16 or fp16, TF32
  // and bf16 wmma; 0 = none.
  int compute_capability = 0;
  // The arch-specific target of exactly that capability ("sm_90a": wgmma, setmaxnreg), which no other GPU runs.
  bool arch_specific = false;
  std::string features;  // what needs it, for the messages: "cp.async, bf16 mma.sync"

  bool any() const { return compute_capability > 0; }
};
// "sm_80 (cp.async, bf16 mma.sync)", "sm_90a (wgmma)"; "" when nothing is needed.
std::string describe(const gpu_requirement& needs);
// Why a variant that needs `needs` cannot run on a GPU of capability `device` in a build whose device code
// targets `built` (both major * 10 + minor; 0: no CUDA GPU, no CUDA build), or "" when it can.
std::string unmet_requirement(const gpu_requirement& needs, int device, int built);

struct variant_info {
  std::string name;       // e.g. fused_kokkos_feature_major; unique per backend
  std::string operation;  // the registered operation it computes (operation_info::name)
  // Family: variants written the same way (cpu_reference, composed, fused_kokkos, fused_cuda, vendor, ...);
  // reports compare the best of each family.
  std::string family;
  kstudy::fusion_level fusion = kstudy::fusion_level::full;
  kstudy::implementation implementation = kstudy::implementation::kokkos;
  std::string backend;  // serial | openmp | cuda (Kokkos execution space or the CUDA runtime)
  std::string description;
  table_layout layout = table_layout::row_major;
  bool on_device = false;           // memory space is not host-accessible: one-shot includes transfers
  int kernels_launched = 1;         // per resident run
  bool tunable_block_size = false;  // honours run_options::block_size
  // Position on its operation's kernel ladder (the kernel lab's method: write it naively, change one thing at a time):
  // 1 is the simplest correct kernel, each higher rung changes one thing; 0 = not a ladder rung (vendor
  // libraries, references). Reports print "x the previous rung" from it. Portable (Kokkos) variants are a
  // ladder of their own: 0 the straightforward first attempt, 1 and up written as the Kokkos team would.
  int rung = 0;
  // Modelled bytes for one resident run; unset, the operation's essential traffic.
  std::function<traffic_model(const table_shape&)> traffic;
  // Bytes the variant allocates in its memory space at a shape (the runner's memory check before prepare).
  // Unset: its traffic model's total, which is the footprint of a variant touching each buffer once; a
  // variant that re-reads its inputs (a naive GEMM moves 2 m n k elements through 3 matrices) sets it.
  std::function<std::int64_t(const table_shape&)> footprint;
  gpu_requirement needs;  // unset: runs on any GPU kstudy builds for (and on the host)
  // A variant written in another language (a Python rung): what it runs on besides this build, as `kstudy list`
  // prints it and the archive records it ("python 3.11.2 (/usr/bin/python3), numpy 1.24.2"); empty for kstudy's
  // own code.
  std::string runtime;
  // Why this machine cannot run the variant, where that is known when it registers (its framework is not
  // installed): the registry then refuses to make it (variant_unavailable, recorded as skipped), as for an unmet
  // gpu requirement. Empty: nothing known against it.
  std::string unavailable;

  std::string id() const { return name + "@" + backend; }
};

struct run_options {
  int block_size = 0;  // threads per block for variants that take one; 0 = the variant's default
};

class variant {
 public:
  virtual ~variant() = default;

  // Allocates the variant's buffers for the problem's shape and copies the inputs in (not timed). The
  // problem is its operation's problem_data. Throws std::invalid_argument for a malformed problem, before
  // touching any device memory.
  virtual void prepare(const problem_data& problem, const run_options& options) = 0;
  // The resident operation on the prepared inputs; returns after fencing the variant's own queue.
  virtual void run() = 0;
  // Copies host arrays of the problem's streamed inputs (problem_data::streamed_inputs order) in (fenced).
  virtual void upload(const std::vector<host_span>& inputs) = 0;
  // Copies the outputs into host arrays of operation::output_bytes (operation_info::outputs order), fenced.
  virtual void download(const std::vector<host_span>& outputs) = 0;
  // Overwrites the outputs in the variant's memory with a pattern no correct run leaves behind.
  virtual void poison() = 0;
  // The cudaStream_t the variant queues its work on (for CUDA event timing); nullptr on host backends.
  virtual void* stream() const { return nullptr; }

  // Queued pieces: each returns at once with the work queued on the variant's own stream, and wait()
  // drains that stream. A variant on its own stream overrides them and says so in
  // queues_asynchronously(); the defaults run synchronously.
  virtual bool queues_asynchronously() const { return false; }
  // Whether enqueue_run() returns with the whole resident run queued on stream() and wait() fencing it,
  // so that a CUDA event recorded between the two ends with the work (run_between_events). Every variant
  // that queues asynchronously does; so may one that runs synchronously only because run() ends in a
  // host fence (a reduction into host memory).
  virtual bool enqueues_run() const { return queues_asynchronously(); }
  virtual void enqueue_upload(const std::vector<host_span>& inputs) { upload(inputs); }
  virtual void enqueue_run() { run(); }
  virtual void enqueue_download(const std::vector<host_span>& outputs) { download(outputs); }
  virtual void wait() {}

  // Calculated occupancy (active warps / maximum per SM) of the variant's kernel as prepared; 0 where
  // the variant cannot tell (host backends, Kokkos-launched kernels).
  virtual double calculated_occupancy() const { return 0.0; }
  // What an autotuned variant chose in prepare() (tile sizes, warps per block, stages), as named integers in
  // a fixed order; archived with the variant's record at the point. Empty for a variant that chooses nothing.
  virtual std::vector<std::pair<std::string, std::int64_t>> tuned_parameters() const { return {}; }

  // A variant whose work runs where this process's clocks cannot see it (a Python rung's worker process) times
  // each call there: times_itself() is true, and after each upload(), run() and download() last_call_seconds()
  // holds that call's wall time (the worker's host clock around the call and the wait for its work) and, for a
  // run on a device, its device time (CUDA events on the worker's stream; NaN otherwise). The runner takes
  // them in place of its own clocks, which would add the round trip to the worker.
  struct call_seconds {
    double wall = 0.0;
    double device = std::numeric_limits<double>::quiet_NaN();  // NaN: not timed on a device
  };
  virtual bool times_itself() const { return false; }
  virtual call_seconds last_call_seconds() const { return {}; }
};

// A variant that queues its work (its own CUDA stream, or a Kokkos execution-space instance): it implements
// the enqueue_* forms and wait(), and the synchronous forms are those followed by wait(), written once here.
// queues_asynchronously() is true; a host-space Kokkos variant, whose launches complete before returning,
// overrides it to false.
class queued_variant : public variant {
 public:
  void run() final {
    enqueue_run();
    wait();
  }
  void upload(const std::vector<host_span>& inputs) final {
    enqueue_upload(inputs);
    wait();
  }
  void download(const std::vector<host_span>& outputs) final {
    enqueue_download(outputs);
    wait();
  }
  bool queues_asynchronously() const override { return true; }
  void enqueue_run() override = 0;
  void enqueue_upload(const std::vector<host_span>& inputs) override = 0;
  void enqueue_download(const std::vector<host_span>& outputs) override = 0;
  void wait() override = 0;
};

using variant_factory = std::function<std::unique_ptr<variant>()>;

struct registered_variant {
  variant_info info;
  variant_factory make;  // empty while only declared: the variant's code is not in this build
};

// Every query that returns registered_variant answers with the variants this build can run (bound to a
// factory); declared_elsewhere() and match_declared() answer with those declared without one. Each query
// throws std::logic_error while a bind names an id that nothing declared (a misspelt id in a .cu file).
class variant_registry {
 public:
  static variant_registry& instance();
  // Declares and binds at once. Throws std::logic_error for missing fields or an id already declared.
  void add(variant_info info, variant_factory factory);
  // A variant's fields without its code; unset traffic becomes the operation's essential traffic. Throws
  // std::logic_error for missing fields or an id already declared.
  void declare(variant_info info);
  // Attaches a factory to a declared id ("transpose_naive@cuda"). A bind may come before its declaration
  // (static initialisation order across files is unspecified) and waits for it. Throws std::logic_error
  // for an empty factory or an id bound twice.
  void bind(const std::string& id, variant_factory factory);

  // Sorted by id.
  std::vector<const registered_variant*> all() const;
  // Matches a name or a family ("fused_kokkos"), on every backend or on one ("fused_kokkos@cuda").
  std::vector<const registered_variant*> match(const std::string& pattern) const;
  const registered_variant* find(const std::string& id) const;
  // The variants of one operation, sorted by id.
  std::vector<const registered_variant*> of_operation(const std::string& operation) const;

  // Declared but not in this build (no factory bound: a CUDA variant in a CPU build), sorted by id.
  std::vector<const variant_info*> declared_elsewhere() const;
  // As match(), among the variants declared but not in this build.
  std::vector<const variant_info*> match_declared(const std::string& pattern) const;

 private:
  const registered_variant* declared(const std::string& id) const;  // bound or not; no binding check
  void check_bindings() const;
  std::vector<const registered_variant*> sorted(bool bound) const;

  std::deque<registered_variant> m_variants;               // stable addresses
  std::map<std::string, variant_factory> m_pending_binds;  // by id, waiting for their declaration
};

// A variant compiled in every build that declares it: its fields and its class in one file.
template <class Variant>
struct variant_registration {
  explicit variant_registration(variant_info info) {
    variant_registry::instance().add(std::move(info), [] { return std::make_unique<Variant>(); });
  }
};

// The fields of a variant whose code only some builds compile, in a file every build compiles.
struct variant_declaration {
  explicit variant_declaration(variant_info info) { variant_registry::instance().declare(std::move(info)); }
};

// The class of a declared variant, in the file that has its code.
template <class Variant>
struct variant_binding {
  explicit variant_binding(const std::string& id) {
    variant_registry::instance().bind(id, [] { return std::make_unique<Variant>(); });
  }
};

// The bytes a variant allocates at a shape: its footprint where it declares one, else its traffic model's
// total (what the runner's and the profiler's memory checks compare with the free memory).
std::int64_t footprint_bytes(const variant_info& info, const table_shape& shape);

// The operation a registered variant computes; throws std::logic_error naming both if it is not registered.
const operation& operation_of(const registered_variant& variant);

}  // namespace kstudy
