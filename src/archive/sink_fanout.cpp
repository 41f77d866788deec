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

template <class... Args>
void sink_fanout::for_each(void (result_sink::*call)(const Args&...), const Args&... args) {
  std::exception_ptr first;
  for (auto& sink : m_sinks) {
    try {
      ((*sink).*call)(args...);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void sink_fanout::begin(const run_metadata& metadata) { for_each(&result_sink::begin, metadata); }
void sink_fanout::begin_experiment(const experiment_record& e) { for_each(&result_sink::begin_experiment, e); }
void sink_fanout::do_write(const record_batch& batch) { for_each(&result_sink::write, batch); }
void sink_fanout::flush() { for_each(&result_sink::flush); }
void sink_fanout::end_experiment(const std::string& name) { for_each(&result_sink::end_experiment, name); }
void sink_fanout::finish() { for_each(&result_sink::finish); }

}  // namespace kstudy
