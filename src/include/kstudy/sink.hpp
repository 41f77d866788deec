#pragma once
// The one output interface of a study. The runner produces records; every destination (HDF5 archive,
// JSON document, console table) is a result_sink. A run's replication processes write the archive alone
// (hdf5_sink, behind the runner's room check and GPU health guard, which forward every call); the
// console table and the JSON copy are then written from the archive as read back, so they show what was
// archived across replications and resumed runs. sink_fanout writes several sinks through the same calls,
// for a caller that produces records once for several destinations.
//
// Call order: begin, then per experiment begin_experiment, any number of write_* and flush calls, and
// end_experiment; finally finish. write_* calls append to the current experiment.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kstudy/records.hpp"

namespace kstudy {

class result_sink {
 public:
  virtual ~result_sink() = default;

  virtual void begin(const run_metadata& metadata) = 0;
  virtual void begin_experiment(const experiment_record& experiment) = 0;
  virtual void write_samples(const std::vector<sample_record>& samples) = 0;
  virtual void write_gates(const std::vector<gate_record>& gates) = 0;
  virtual void write_ceilings(const std::vector<ceiling_record>& ceilings) = 0;
  virtual void write_summaries(const std::vector<summary_record>& summaries) = 0;
  virtual void write_attribution(const std::vector<attribution_record>& attribution) = 0;
  virtual void write_health(const std::vector<health_record>& health) = 0;
  virtual void write_variants(const std::vector<variant_record>& variants) = 0;
  // Per-kernel hardware counters of `kstudy profile`, with attributes describing how they were taken
  // (ncu version, command line, metric names). Only the archive and its JSON copy keep them. Pure, like
  // every write: a sink that wraps another must forward it, not inherit a silent drop.
  virtual void write_profile(const std::vector<profile_record>& profile,
                             const std::map<std::string, std::string>& attributes) = 0;
  // Make everything written so far durable (the HDF5 archive survives a crash after it).
  virtual void flush() = 0;
  virtual void end_experiment(const std::string& name) = 0;
  virtual void finish() = 0;
};

// Forwards every call to each sink in the order they were added. Every sink gets the call even when an
// earlier one throws (so a failing archive does not also lose the JSON copy); the first exception is
// rethrown afterwards.
class sink_fanout : public result_sink {
 public:
  sink_fanout() = default;
  explicit sink_fanout(std::vector<std::unique_ptr<result_sink>> sinks);

  // Returns the added sink, for callers that keep a typed reference.
  result_sink& add(std::unique_ptr<result_sink> sink);
  std::size_t size() const { return m_sinks.size(); }

  void begin(const run_metadata& metadata) override;
  void begin_experiment(const experiment_record& experiment) override;
  void write_samples(const std::vector<sample_record>& samples) override;
  void write_gates(const std::vector<gate_record>& gates) override;
  void write_ceilings(const std::vector<ceiling_record>& ceilings) override;
  void write_summaries(const std::vector<summary_record>& summaries) override;
  void write_attribution(const std::vector<attribution_record>& attribution) override;
  void write_health(const std::vector<health_record>& health) override;
  void write_variants(const std::vector<variant_record>& variants) override;
  void write_profile(const std::vector<profile_record>& profile,
                     const std::map<std::string, std::string>& attributes) override;
  void flush() override;
  void end_experiment(const std::string& name) override;
  void finish() override;

 private:
  template <class F>
  void for_each(F&& call);

  std::vector<std::unique_ptr<result_sink>> m_sinks;
};

}  // namespace kstudy
