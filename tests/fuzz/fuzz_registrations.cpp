// What the fuzzed parser needs registered, without Kokkos: the `sweep` kind with the real field parser
// (kstudy::experiment_fields::parse_operation_fields, the parser every operation kind shares) and two
// operations with the built-in ones' axes (rows x features; n). Only their info() and shape() are used by
// the parser; nothing else is ever called here.
#include <stdexcept>

#include "kstudy/experiment_fields.hpp"
#include "kstudy/experiment_kind.hpp"
#include "kstudy/operation.hpp"

namespace {

class axes_only_operation : public kstudy::operation {
 public:
  axes_only_operation(const char* name, std::vector<std::string> axes) {
    m_info.name = name;
    m_info.axes = std::move(axes);
    m_info.layouts = {kstudy::table_layout::row_major, kstudy::table_layout::feature_major,
                      kstudy::table_layout::padded_row_major};
    m_info.outputs = {"out"};
  }
  const kstudy::operation_info& info() const override { return m_info; }
  std::unique_ptr<kstudy::problem_data> generate(const kstudy::table_shape&, std::uint64_t) const override { no(); }
  std::unique_ptr<kstudy::problem_data> relayout(const kstudy::problem_data&,
                                                 const kstudy::table_shape&) const override {
    no();
  }
  std::unique_ptr<kstudy::reference_data> reference(const kstudy::problem_data&) const override { no(); }
  std::vector<std::int64_t> output_bytes(const kstudy::table_shape&) const override { no(); }
  void poison(const std::vector<kstudy::host_span>&) const override { no(); }
  kstudy::gate_result check(const kstudy::problem_data&, const kstudy::reference_data&,
                            const std::vector<kstudy::host_span>&) const override {
    no();
  }
  void corrupt(const kstudy::problem_data&, const std::vector<kstudy::host_span>&) const override { no(); }
  kstudy::traffic_model essential_traffic(const kstudy::table_shape&) const override { no(); }
  std::int64_t essential_flops(const kstudy::table_shape&) const override { no(); }
  std::int64_t input_bytes(const kstudy::table_shape&) const override { no(); }
  std::int64_t reference_bytes(const kstudy::table_shape&) const override { no(); }

 private:
  [[noreturn]] static void no() { throw std::logic_error("the parser fuzzer registers axes only"); }
  kstudy::operation_info m_info;
};

struct scoring_axes : axes_only_operation {
  scoring_axes() : axes_only_operation("scoring", {"rows", "features"}) {}
};
struct stream_axes : axes_only_operation {
  stream_axes() : axes_only_operation("stream_triad", {"n"}) {}
};
const kstudy::operation_registration<scoring_axes> register_scoring;
const kstudy::operation_registration<stream_axes> register_stream;

kstudy::experiment_kind sweep() {
  kstudy::experiment_kind kind;
  kind.name = "sweep";
  kind.keys = kstudy::experiment_fields::operation_field_keys();
  kind.takes_operations = true;
  kind.parse = kstudy::experiment_fields::parse_operation_fields;
  kind.point_count = [](const kstudy::experiment& e) { return std::int64_t(e.points.size()); };
  kind.run = [](kstudy::replication_context&) {};
  return kind;
}
const kstudy::experiment_kind_registration register_sweep{sweep()};

}  // namespace
