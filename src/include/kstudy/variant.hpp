#pragma once
// The scoring-variant interface and its self-registration. Kokkos-free, so handwritten CUDA (.cu)
// variants implement it too. A variant file declares its class and registers it beside it:
//
//   static const kstudy::variant_registration<my_variant> register_my_variant{{ .name = ... }};
//
// Adding a variant touches that one file; nothing else lists variants.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <deque>
#include <vector>

#include "kstudy/views/scoring_problem.hpp"
#include "kstudy/views/table_shape.hpp"

namespace kstudy {

// Bytes a variant moves through the memory of its space for one resident run, as its own model says.
struct traffic_model {
  std::int64_t bytes_read = 0;
  std::int64_t bytes_written = 0;
  std::int64_t total() const { return bytes_read + bytes_written; }
};

// The operation a variant implements; essential_traffic and essential_flops model it.
enum class operation_kind { scoring };
const char* to_string(operation_kind operation);

// Minimal traffic of the operation itself: x read once, the three feature vectors read, score and
// flag written once. Every variant's "effective" bandwidth divides this by its time.
traffic_model essential_traffic(const table_shape& shape);

// Arithmetic of the operation per element of x: subtract the mean, multiply by 1/std, two compares
// (the clip), and one FMA (weight and row sum). The roofline's intensity is essential_flops over
// essential_traffic; the threshold compare per row is left out as negligible.
inline constexpr std::int64_t flops_per_element = 5;
std::int64_t essential_flops(const table_shape& shape);

struct variant_info {
  std::string name;            // e.g. fused_kokkos_feature_major
  std::string implementation;  // family: cpu_reference, composed, partial_fusion, fused_kokkos, fused_cuda
  std::string fusion_level;    // none | partial | full
  std::string backend;         // serial | openmp | cuda (Kokkos execution space or the CUDA runtime)
  std::string description;
  table_layout layout = table_layout::row_major;
  bool on_device = false;          // memory space is not host-accessible: one-shot includes transfers
  int kernels_launched = 1;        // per resident run
  bool tunable_block_size = false; // honours run_options::block_size
  std::function<traffic_model(const table_shape&)> traffic;  // modelled bytes for one resident run
  operation_kind operation = operation_kind::scoring;

  std::string id() const { return name + "@" + backend; }
};

struct run_options {
  int block_size = 0;  // threads per block for variants that take one; 0 = the variant's default
};

class scoring_variant {
 public:
  virtual ~scoring_variant() = default;

  // Allocates the variant's buffers for the problem's shape and copies the inputs in (not timed).
  // Throws std::invalid_argument for a malformed problem, before touching any device memory.
  virtual void prepare(const scoring_problem& problem, const run_options& options) = 0;
  // The resident operation on the prepared inputs; returns after fencing the variant's own queue.
  virtual void run() = 0;
  // Copies a host table of the prepared shape and layout into the variant's input (fenced).
  virtual void upload(const float* host_x) = 0;
  // Copies score and flag into host memory of rows elements each (fenced).
  virtual void download(float* host_score, std::uint8_t* host_flag) = 0;
  // Flagged rows of the last run.
  virtual std::int64_t flagged_count() const = 0;
  // Overwrites the outputs with a pattern no correct run leaves behind (NaN scores, 0xAB flags).
  virtual void poison() = 0;
  // The cudaStream_t the variant queues its work on (for CUDA event timing); nullptr on host backends.
  virtual void* stream() const { return nullptr; }

  // Queued pieces for the pipelined one-shot strategy: each returns at once with the work queued on the
  // variant's own stream, and wait() drains that stream (after which flagged_count() is current). Host
  // memory passed in must stay valid until wait(). A variant on its own stream overrides them and says
  // so in queues_asynchronously(); the defaults run synchronously, which serialises a pipeline.
  virtual bool queues_asynchronously() const { return false; }
  // Whether enqueue_run() returns with the whole resident run queued on stream(), wait() fencing it and
  // making flagged_count() current, so that a CUDA event recorded between the two ends with the work
  // (run_between_events). Every variant that queues asynchronously does; so may one that runs
  // synchronously only because run() ends in a host fence (a reduction into host memory), even where
  // its work shares a stream with others' and so cannot overlap in a pipeline.
  virtual bool enqueues_run() const { return queues_asynchronously(); }
  virtual void enqueue_upload(const float* host_x) { upload(host_x); }
  virtual void enqueue_run() { run(); }
  virtual void enqueue_download(float* host_score, std::uint8_t* host_flag) { download(host_score, host_flag); }
  virtual void wait() {}
  // A feature-major variant on a device may take its chunk of a larger feature-major host table
  // straight from page-locked memory as one strided copy: column f of the chunk is first[f * source_rows
  // ...]. Where it cannot (can_upload_columns() false), the pipeline gathers the chunk on the host first.
  virtual bool can_upload_columns() const { return false; }
  virtual void enqueue_upload_columns(const float* first, std::int64_t source_rows) {
    (void)first;
    (void)source_rows;
    throw std::logic_error("this variant cannot upload a strided chunk");
  }

  // Calculated occupancy (active warps / maximum per SM) of the variant's kernel as prepared; 0 where
  // the variant cannot tell (host backends, Kokkos-launched kernels).
  virtual double calculated_occupancy() const { return 0.0; }
};

using variant_factory = std::function<std::unique_ptr<scoring_variant>()>;

struct registered_variant {
  variant_info info;
  variant_factory make;
};

class variant_registry {
 public:
  static variant_registry& instance();
  void add(variant_info info, variant_factory factory);
  // Sorted by id.
  std::vector<const registered_variant*> all() const;
  // Matches a name or a family ("fused_kokkos"), on every backend or on one ("fused_kokkos@cuda").
  std::vector<const registered_variant*> match(const std::string& pattern) const;
  const registered_variant* find(const std::string& id) const;

 private:
  std::deque<registered_variant> m_variants;  // stable addresses
};

template <class Variant>
struct variant_registration {
  explicit variant_registration(variant_info info) {
    variant_registry::instance().add(std::move(info), [] { return std::make_unique<Variant>(); });
  }
};

}  // namespace kstudy
