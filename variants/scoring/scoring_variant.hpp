#pragma once
// The scoring operation's typed variant interface. Its variants work on a scoring_problem and typed
// host arrays (x in; score, flag out); this base adapts them to the generic kstudy::variant the runner
// drives, whose outputs are the operation's named arrays {score, flag, flagged}. Kokkos-free, so the
// handwritten CUDA variants implement it too.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/variant.hpp"
#include "scoring/scoring_problem.hpp"

namespace kstudy {

inline constexpr const char* scoring_operation_name = "scoring";

// The operation's minimal traffic: x read once, the three feature vectors read, score and flag written
// once. A fused variant's own model is this one.
traffic_model scoring_essential_traffic(const table_shape& shape);

// The registration fields every scoring variant starts from (operation_variant_info's, the operation named): its
// name, family, description and layout, and the bytes it moves (unless it passes its own model, the essential
// traffic). The rest keeps variant_info's defaults (fusion full, one kernel). Defined in operation.cpp, so that
// the CUDA variants' translation units need not see kstudy/support/operation_helpers.hpp.
variant_info scoring_variant_info(std::string name, std::string family, std::string description, table_layout layout,
                                  std::function<traffic_model(const table_shape&)> traffic = scoring_essential_traffic);

// The scoring operation's problem_data: a generated table and its feature vectors.
class scoring_data : public problem_data {
 public:
  virtual const scoring_problem& problem() const = 0;
};

// The operation's output arrays, in order (operation_info::outputs).
enum scoring_output : std::size_t { score_output = 0, flag_output = 1, flagged_output = 2 };

class scoring_variant : public variant {
 public:
  // Allocates the variant's buffers for the problem's shape and copies the inputs in (not timed).
  // Throws std::invalid_argument for a malformed problem, before touching any device memory.
  virtual void prepare_table(const scoring_problem& problem, const run_options& options) = 0;
  // Copies a host table of the prepared shape and layout into the variant's input (fenced).
  virtual void upload_table(const float* host_x) = 0;
  // Copies score and flag into host memory of rows elements each (fenced).
  virtual void download_scores(float* host_score, std::uint8_t* host_flag) = 0;
  // Flagged rows of the last run.
  virtual std::int64_t flagged_count() const = 0;

  // Queued typed pieces for the scoring operation's pipelined one-shot (see variant::enqueue_run).
  virtual void enqueue_upload_table(const float* host_x) { upload_table(host_x); }
  virtual void enqueue_download_scores(float* host_score, std::uint8_t* host_flag) {
    download_scores(host_score, host_flag);
  }
  // A feature-major variant on a device may take its chunk of a larger feature-major host table
  // straight from page-locked memory as one strided copy: column f of the chunk is first[f * source_rows
  // ...]. Where it cannot (can_upload_columns() false), the pipeline gathers the chunk on the host first.
  virtual bool can_upload_columns() const { return false; }
  virtual void enqueue_upload_columns(const float* first, std::int64_t source_rows) {
    (void)first;
    (void)source_rows;
    throw std::logic_error("this variant cannot upload a strided chunk");
  }

  // The generic interface, in terms of the typed one.
  void prepare(const problem_data& problem, const run_options& options) final {
    const auto* data = dynamic_cast<const scoring_data*>(&problem);
    if (data == nullptr) throw std::invalid_argument("a scoring variant was given another operation's problem");
    prepare_table(data->problem(), options);
  }
  void upload(const std::vector<host_span>& inputs) final { upload_table(inputs.at(0).as<const float>()); }
  void download(const std::vector<host_span>& outputs) final {
    download_scores(outputs.at(score_output).as<float>(), outputs.at(flag_output).as<std::uint8_t>());
    *outputs.at(flagged_output).as<std::int64_t>() = flagged_count();
  }
};

// A registered scoring variant's instance with its typed interface; throws std::logic_error when the entry
// is another operation's.
std::unique_ptr<scoring_variant> make_scoring_variant(const registered_variant& entry);

}  // namespace kstudy
