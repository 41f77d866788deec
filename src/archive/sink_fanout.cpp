#include <exception>
#include <stdexcept>

#include "kstudy/sink.hpp"

namespace kstudy {

sink_fanout::sink_fanout(std::vector<std::unique_ptr<result_sink>> sinks) {
  for (auto& sink : sinks) add(std::move(sink));
}

result_sink& sink_fanout::add(std::unique_ptr<result_sink> sink) {
  if (!sink) throw std::invalid_argument("kstudy: sink_fanout::add given a null sink");
  m_sinks.push_back(std::move(sink));
  return *m_sinks.back();
}

template <class F>
void sink_fanout::for_each(F&& call) {
  std::exception_ptr first;
  for (auto& sink : m_sinks) {
    try {
      call(*sink);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void sink_fanout::begin(const run_metadata& metadata) {
  for_each([&](result_sink& s) { s.begin(metadata); });
}
void sink_fanout::begin_experiment(const experiment_record& experiment) {
  for_each([&](result_sink& s) { s.begin_experiment(experiment); });
}
void sink_fanout::write_samples(const std::vector<sample_record>& samples) {
  for_each([&](result_sink& s) { s.write_samples(samples); });
}
void sink_fanout::write_gates(const std::vector<gate_record>& gates) {
  for_each([&](result_sink& s) { s.write_gates(gates); });
}
void sink_fanout::write_ceilings(const std::vector<ceiling_record>& ceilings) {
  for_each([&](result_sink& s) { s.write_ceilings(ceilings); });
}
void sink_fanout::write_summaries(const std::vector<summary_record>& summaries) {
  for_each([&](result_sink& s) { s.write_summaries(summaries); });
}
void sink_fanout::write_attribution(const std::vector<attribution_record>& attribution) {
  for_each([&](result_sink& s) { s.write_attribution(attribution); });
}
void sink_fanout::write_health(const std::vector<health_record>& health) {
  for_each([&](result_sink& s) { s.write_health(health); });
}
void sink_fanout::write_variants(const std::vector<variant_record>& variants) {
  for_each([&](result_sink& s) { s.write_variants(variants); });
}
void sink_fanout::write_profile(const std::vector<profile_record>& profile,
                                const std::map<std::string, std::string>& attributes) {
  for_each([&](result_sink& s) { s.write_profile(profile, attributes); });
}
void sink_fanout::flush() {
  for_each([](result_sink& s) { s.flush(); });
}
void sink_fanout::end_experiment(const std::string& name) {
  for_each([&](result_sink& s) { s.end_experiment(name); });
}
void sink_fanout::finish() {
  for_each([](result_sink& s) { s.finish(); });
}

}  // namespace kstudy
