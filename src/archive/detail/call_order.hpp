#pragma once
// The call order the archive's sinks hold their callers to (kstudy/sink.hpp: begin_experiment, writes,
// end_experiment per experiment; nothing after finish), with the sink's name in every refusal: a
// std::logic_error, since only a caller's mistake gets there.
#include <stdexcept>
#include <string>

namespace kstudy::archive_detail {

class call_order {
 public:
  explicit call_order(const char* sink) : m_sink(sink) {}

  // The open experiment's name, or empty.
  const std::string& experiment() const { return m_experiment; }

  void require_open(const std::string& call) const {
    if (m_finished) throw std::logic_error(prefix(call) + " after finish()");
  }
  void require_experiment(const std::string& call) const {
    require_open(call);
    if (m_experiment.empty()) throw std::logic_error(prefix(call) + " outside begin_experiment/end_experiment");
  }

  // begin_experiment(name) is refused after finish() and while another experiment is open; opened(name)
  // once the sink has taken it.
  void check_begin(const std::string& name) const {
    require_open("begin_experiment");
    if (!m_experiment.empty())
      throw std::logic_error(prefix("begin_experiment('" + name + "')") + " while experiment '" + m_experiment +
                             "' is open");
  }
  void opened(const std::string& name) { m_experiment = name; }

  // end_experiment(name) must name the open experiment.
  void check_end(const std::string& name) const {
    require_experiment("end_experiment");
    if (name != m_experiment)
      throw std::logic_error(prefix("end_experiment('" + name + "')") + " but the open experiment is '" + m_experiment +
                             "'");
  }
  void closed() { m_experiment.clear(); }

  // Refused a second time; the sink accepts nothing afterwards.
  void finish() {
    require_open("finish");
    m_finished = true;
    m_experiment.clear();
  }

 private:
  std::string prefix(const std::string& call) const { return "kstudy: " + std::string(m_sink) + "::" + call; }

  const char* m_sink;
  std::string m_experiment;
  bool m_finished = false;
};

}  // namespace kstudy::archive_detail
