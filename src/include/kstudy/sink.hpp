#pragma once
// The one output interface of a study. The runner produces records; every destination (HDF5 archive,
// JSON document, console table) is a result_sink. A run's replication processes write the archive alone
// (hdf5_sink, behind the runner's room check and GPU health guard, which forward every call); the
// console table and the JSON copy are then written from the archive as read back, so they show what was
// archived across replications and resumed runs. sink_fanout writes several sinks through the same calls,
// for a caller that produces records once for several destinations.
//
// Call order: begin, then per experiment begin_experiment, any number of writes and flush calls, and
// end_experiment; finally finish. Writes append to the current experiment.
//
// Every write, whatever its record type, reaches a sink through one hook, do_write(record_batch): a sink
// reads the records over their columns (record_batch::schema) or picks the types it treats itself
// (record_batch::get), so a new record type needs a field table (src/archive/detail/record_fields.hpp) and
// no new sink method.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kstudy/records.hpp"

namespace kstudy {

// What a column holds. Named enums (timer_kind, gate_verdict, cache_mode) are read and stored as their names.
enum class field_type { text, int64, int32, real, boolean, named_enum };

// One column's value in one record. Text views the record's string, a named enum its static name: both end in a
// NUL, so a writer may keep data() as a C string while the records live.
using field_value = std::variant<std::string_view, std::int64_t, std::int32_t, double, bool>;

struct record_field {
  const char* name;  // the struct member's name
  field_type type;
  const char* former_name;  // the column's name in archives of an older schema, or null
};

// A record type as a sink that does not know it sees it: its table and its columns in the archive's order,
// with a way to read any column of a record. One per record type, built by kstudy::archive from its field tables.
struct record_schema {
  const char* table;  // the experiment's table (HDF5 dataset, JSON array) the records go to
  const char* units;  // the table's units attribute
  bool optional;      // written by some runs only (the profile): the table exists once written, not with every
                      // experiment
  std::vector<record_field> fields;
  field_value (*read)(const void* record, std::size_t field);
};

// One write's records, of any record type, with the attributes written on their table (the profile's: how the
// counters were taken). A view of the caller's vector and map: valid for the call it is passed to.
class record_batch {
 public:
  using attribute_map = std::map<std::string, std::string>;

  template <class R>
  explicit record_batch(const std::vector<R>& records, const attribute_map& attributes = no_attributes())
      : m_type(&type_tag<R>),
        m_records(&records),
        m_data(records.data()),
        m_size(records.size()),
        m_stride(sizeof(R)),
        m_attributes(&attributes) {}

  std::size_t size() const { return m_size; }
  bool empty() const { return m_size == 0; }
  const attribute_map& attributes() const { return *m_attributes; }

  // The records where they are of type R, else null: for a sink that treats some types its own way.
  template <class R>
  const std::vector<R>* get() const {
    return m_type == &type_tag<R> ? static_cast<const std::vector<R>*>(m_records) : nullptr;
  }

  // The records' table and columns (defined by kstudy::archive, which owns the field tables; throws
  // std::logic_error for a type without one), and record i to read them from.
  const record_schema& schema() const;
  const void* record(std::size_t i) const { return static_cast<const unsigned char*>(m_data) + i * m_stride; }

 private:
  static const attribute_map& no_attributes() {
    static const attribute_map none;
    return none;
  }
  // One object per record type, whose address names the type (not const: never merged with another).
  template <class R>
  static inline char type_tag = 0;

  const char* m_type;
  const void* m_records;  // the std::vector<R>
  const void* m_data;
  std::size_t m_size;
  std::size_t m_stride;
  const attribute_map* m_attributes;
};

class result_sink {
 public:
  virtual ~result_sink() = default;

  virtual void begin(const run_metadata& metadata) = 0;
  virtual void begin_experiment(const experiment_record& experiment) = 0;

  // Appends records of any type to the open experiment's table of that type.
  template <class R>
  void write(const std::vector<R>& records) {
    do_write(record_batch(records));
  }
  void write(const record_batch& batch) { do_write(batch); }

  // The same, by table.
  void write_samples(const std::vector<sample_record>& samples) { write(samples); }
  void write_gates(const std::vector<gate_record>& gates) { write(gates); }
  void write_ceilings(const std::vector<ceiling_record>& ceilings) { write(ceilings); }
  void write_summaries(const std::vector<summary_record>& summaries) { write(summaries); }
  void write_attribution(const std::vector<attribution_record>& attribution) { write(attribution); }
  void write_health(const std::vector<health_record>& health) { write(health); }
  void write_variants(const std::vector<variant_record>& variants) { write(variants); }
  // Per-kernel hardware counters of `kstudy profile`, with attributes describing how they were taken
  // (ncu version, command line, metric names). Only the archive and its JSON copy keep them.
  void write_profile(const std::vector<profile_record>& profile, const std::map<std::string, std::string>& attributes) {
    do_write(record_batch(profile, attributes));
  }

  // Make everything written so far durable (the HDF5 archive survives a crash after it).
  virtual void flush() = 0;
  virtual void end_experiment(const std::string& name) = 0;
  virtual void finish() = 0;

 protected:
  // Every write arrives here. Pure: a sink that wraps another must forward the batch (write(batch)), not
  // inherit a silent drop.
  virtual void do_write(const record_batch& batch) = 0;
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
  void flush() override;
  void end_experiment(const std::string& name) override;
  void finish() override;

 protected:
  void do_write(const record_batch& batch) override;

 private:
  template <class... Args>
  void for_each(void (result_sink::*call)(const Args&...), const Args&... args);

  std::vector<std::unique_ptr<result_sink>> m_sinks;
};

}  // namespace kstudy
