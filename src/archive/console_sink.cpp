// The console view of a run: what a person watching the terminal needs, nothing the archive lacks.
#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>
#include <utility>

#include "kstudy/runner/archive.hpp"
#include "kstudy/ceilings.hpp"

namespace kstudy {

namespace {

// Terminal columns of UTF-8 text (µ is two bytes, one column).
std::size_t display_width(const std::string& text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

// Three significant digits in the unit that keeps the number between 1 and 1000.
std::string format_seconds(double seconds) {
  if (!(seconds > 0.0)) return seconds == 0.0 ? "0" : "-";
  const char* unit = "s";
  double value = seconds;
  if (seconds < 1e-6) {
    value = seconds * 1e9;
    unit = "ns";
  } else if (seconds < 1e-3) {
    value = seconds * 1e6;
    unit = "µs";
  } else if (seconds < 1.0) {
    value = seconds * 1e3;
    unit = "ms";
  }
  const char* pattern = value >= 100.0 ? "%.0f " : (value >= 10.0 ? "%.1f " : "%.2f ");
  return format(pattern, value) + unit;
}

struct table {
  std::vector<std::string> header;
  std::vector<bool> right_aligned;
  std::vector<std::vector<std::string>> rows;

  void print(std::ostream& out) const {
    std::vector<std::size_t> width(header.size());
    for (std::size_t c = 0; c < header.size(); ++c) width[c] = display_width(header[c]);
    for (const auto& row : rows)
      for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], display_width(row[c]));
    auto line = [&](const std::vector<std::string>& cells) {
      std::string text = " ";
      for (std::size_t c = 0; c < cells.size(); ++c) {
        const std::string pad(width[c] - display_width(cells[c]), ' ');
        text += right_aligned[c] ? pad + cells[c] : cells[c] + pad;
        if (c + 1 < cells.size()) text += "  ";
      }
      out << text << '\n';
    };
    line(header);
    std::size_t total = 0;
    for (std::size_t w : width) total += w + 2;
    out << ' ' << std::string(total - 2, '-') << '\n';
    for (const auto& row : rows) line(row);
  }
};

}  // namespace

console_sink::console_sink(std::ostream& out) : m_out(out) {}
console_sink::~console_sink() = default;

void console_sink::begin(const run_metadata& metadata) {
  const auto version = metadata.root.find("kstudy_version");
  const auto device = metadata.environment.find("gpu_name");
  m_out << "kstudy";
  if (version != metadata.root.end()) m_out << ' ' << version->second;
  if (device != metadata.environment.end()) m_out << " on " << device->second;
  m_out << '\n';
}

void console_sink::begin_experiment(const experiment_record& experiment) {
  print_pending();
  m_experiment = experiment.name;
  m_samples = m_rejected = m_gate_failures = m_failed = m_skipped = m_throttled = m_set_aside = 0;
  m_health_rows = m_health_available = 0;
  m_first_failure.clear();
  m_health_device.clear();
  m_out << "\n== experiment " << experiment.name << " ==\n" << std::flush;
}

void console_sink::do_write(const record_batch& batch) {
  if (const auto* samples = batch.get<sample_record>()) count_samples(*samples);
  if (const auto* health = batch.get<health_record>()) count_health(*health);
  if (const auto* gates = batch.get<gate_record>()) print_gate_failures(*gates);
  if (const auto* ceilings = batch.get<ceiling_record>())
    m_ceilings.insert(m_ceilings.end(), ceilings->begin(), ceilings->end());
  if (const auto* summaries = batch.get<summary_record>())
    m_summaries.insert(m_summaries.end(), summaries->begin(), summaries->end());
  // What a person watching a run needs is in the tables above; attribution, the model rows and hardware
  // counters are for the archive and the report.
}

void console_sink::count_samples(const std::vector<sample_record>& samples) {
  m_samples += static_cast<std::int64_t>(samples.size());
  for (const auto& s : samples) {
    const bool failed = s.status.rfind("failed", 0) == 0 || s.status.rfind("aborted", 0) == 0;
    if (failed && m_first_failure.empty()) m_first_failure = s.variant + ": " + s.status;
    m_failed += failed ? 1 : 0;
    m_skipped += s.status.rfind("skipped", 0) == 0 ? 1 : 0;
    m_rejected += s.status.rfind("rejected", 0) == 0 ? 1 : 0;
    m_throttled += s.throttled ? 1 : 0;
    m_set_aside += s.status.rfind("excluded: throttled", 0) == 0 || s.status.rfind("remeasured: throttled", 0) == 0;
  }
}

void console_sink::count_health(const std::vector<health_record>& health) {
  for (const auto& h : health) {
    ++m_health_rows;
    m_health_available += h.available ? 1 : 0;
    // Name the monitored GPU; without one, say why NVML was unavailable.
    if (m_health_device.empty() || (h.available && m_health_available == 1)) m_health_device = h.device;
  }
}

void console_sink::print_gate_failures(const std::vector<gate_record>& gates) {
  // Failures interrupt the output at once: every timing of that variant and shape is being discarded.
  for (const auto& g : gates) {
    if (g.passed) continue;
    ++m_gate_failures;
    m_out << "!! GATE FAILED: " << g.variant << (g.layout.empty() ? "" : " " + g.layout) << ' '
          << extents_text(g.rows, g.features, g.depth);
    if (g.block_size != 0) m_out << " block " << g.block_size;
    m_out << ": max_abs_error " << format("%.3g", g.max_abs_error) << ", max_relative_error "
          << format("%.3g", g.max_relative_error) << " (rtol " << format("%.3g", g.rtol) << ", atol "
          << format("%.3g", g.atol) << "), value_failures " << g.value_failures << ", discrete_mismatches "
          << g.discrete_mismatches;
    if (!g.message.empty()) m_out << ": " << g.message;
    m_out << '\n';
  }
  m_out << std::flush;
}

void console_sink::flush() { m_out << std::flush; }

void console_sink::end_experiment(const std::string&) {
  print_pending();
  m_out << " " << m_samples << " samples";
  if (m_rejected) m_out << ", " << m_rejected << " rejected";
  if (m_skipped) m_out << ", " << m_skipped << " skipped";
  if (m_failed) m_out << ", !! " << m_failed << " FAILED (" << m_first_failure << ")";
  if (m_gate_failures) m_out << ", !! " << m_gate_failures << " GATE FAILURE" << (m_gate_failures > 1 ? "S" : "");
  m_out << '\n';
  // 0 throttled samples is a finding too, but only where the GPU was actually watched.
  if (m_health_available > 0)
    m_out << " GPU health: " << m_throttled << " of " << m_samples
          << " samples taken while the GPU reported throttling (" << m_health_available << " of " << m_health_rows
          << " points monitored on " << m_health_device << ")"
          << (m_set_aside
                  ? "; " + std::to_string(m_set_aside) + " of them set aside by the protocol's throttling policy"
                  : std::string())
          << "\n";
  else if (m_health_rows > 0)
    m_out << " GPU health: not monitored (" << m_health_device << "); throttling unknown\n";
  else
    m_out << " GPU health: no health rows (archive before schema 3); throttling unknown\n";
  m_out << std::flush;
  m_experiment.clear();
}

void console_sink::finish() {
  print_pending();
  m_out << std::flush;
}

void console_sink::print_pending() {
  if (!m_ceilings.empty()) {
    // A bandwidth roof has bytes, a compute roof flops: each row fills its own columns.
    table t{{"ceiling", "clock", "bytes", "median", "GB/s", "TFLOP/s"}, {false, false, true, true, true, true}, {}};
    for (const auto& c : m_ceilings)
      t.rows.push_back({c.name, to_string(c.clock), c.flops > 0 ? "-" : std::to_string(c.bytes),
                        format_seconds(c.seconds), c.flops > 0 ? "-" : format("%.1f", c.bytes_per_second / 1e9),
                        c.flops > 0 ? format("%.1f", c.flops_per_second / 1e12) : "-"});
    t.print(m_out);
    m_out << '\n';
    m_ceilings.clear();
  }
  if (!m_summaries.empty()) {
    const bool blocks =
        std::any_of(m_summaries.begin(), m_summaries.end(), [](const summary_record& s) { return s.block_size != 0; });
    table t{{"variant", "layout", "extents"}, {false, false, true}, {}};
    if (blocks) {
      t.header.push_back("block");
      t.right_aligned.push_back(true);
    }
    // Host-in/host-out timers run once per host memory kind: without it two one_shot rows look alike.
    const bool memory = std::any_of(m_summaries.begin(), m_summaries.end(), [](const summary_record& s) {
      return s.memory_kind == "pageable" || s.memory_kind == "pinned";
    });
    const std::vector<std::pair<const char*, bool>> columns{{"timer", false},    {"host memory", false},
                                                            {"median", true},    {"GB/s", true},
                                                            {"% of roof", true}, {"samples", true}};
    for (const auto& [name, right] : columns) {
      if (!memory && std::string(name) == "host memory") continue;
      t.header.push_back(name);
      t.right_aligned.push_back(right);
    }
    for (const auto& s : m_summaries) {
      std::vector<std::string> row{s.variant, s.layout, extents_text(s.rows, s.features, s.depth)};
      if (blocks) row.push_back(s.block_size ? std::to_string(s.block_size) : "default");
      row.push_back(to_string(s.timer));
      if (memory) row.push_back(s.memory_kind == "pageable" || s.memory_kind == "pinned" ? s.memory_kind : "-");
      row.push_back(format_seconds(s.median));
      row.push_back(s.bytes_per_second > 0 ? format("%.1f", s.bytes_per_second / 1e9) : "-");
      // Above the roof of its own run and clock the roof is understated: said so, never printed as 102%.
      row.push_back(roof_exceeded(s.fraction_of_roof) ? "roof exceeded"
                    : s.fraction_of_roof > 0          ? format("%.1f%%", std::min(s.fraction_of_roof, 1.0) * 100.0)
                                                      : "-");
      row.push_back(std::to_string(s.samples));
      t.rows.push_back(std::move(row));
    }
    t.print(m_out);
    m_summaries.clear();
  }
}

}  // namespace kstudy
