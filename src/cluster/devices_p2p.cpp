#include "kstudy/runner/devices_p2p.hpp"

#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace kstudy {

#ifndef KSTUDY_HAVE_CUDA_VARIANTS
bool peer_copy_available() { return false; }

std::vector<peer_copy_result> measure_peer_copies(const std::vector<int>&, const peer_copy_options&) {
  throw std::runtime_error("peer-to-peer copies need the cuda flavour of kstudy (this is the cpu flavour)");
}
#endif

std::string peer_copy_ceiling_name(int src, int dst, bool peer) {
  return "p2p_copy_" + std::to_string(src) + "_" + std::to_string(dst) + (peer ? "_peer" : "_staged");
}

std::vector<ceiling_record> peer_copy_ceilings(const std::vector<peer_copy_result>& results) {
  std::vector<ceiling_record> out;
  for (const auto& r : results) {
    if (!r.measured()) continue;
    ceiling_record c;
    c.name = peer_copy_ceiling_name(r.src, r.dst, r.peer);
    c.bytes = r.bytes;
    c.seconds = r.seconds;
    c.bytes_per_second = r.bytes_per_second;
    c.clock = timer_kind::device_events;
    out.push_back(c);
  }
  return out;
}

std::vector<peer_copy_result> peer_copies_from_ceilings(const std::vector<ceiling_record>& ceilings) {
  static const std::regex pattern("p2p_copy_([0-9]+)_([0-9]+)_(peer|staged)");
  std::vector<peer_copy_result> out;
  for (const auto& c : ceilings) {
    std::smatch m;
    if (!std::regex_match(c.name, m, pattern)) continue;
    peer_copy_result r;
    r.src = std::stoi(m[1]);
    r.dst = std::stoi(m[2]);
    r.peer = m[3] == "peer";
    r.bytes = c.bytes;
    r.seconds = c.seconds;
    r.bytes_per_second = c.bytes_per_second;
    out.push_back(r);
  }
  return out;
}

std::string format_peer_matrix(const std::vector<peer_copy_result>& results, const std::vector<int>& devices) {
  if (devices.size() < 2) return "one device: no pairs\n";
  std::map<std::tuple<int, int, bool>, const peer_copy_result*> by_pair;
  for (const auto& r : results) by_pair[{r.src, r.dst, r.peer}] = &r;
  std::ostringstream os;
  char cell[32];
  for (const bool peer : {true, false}) {
    os << (peer ? "peer access enabled" : "without peer access (staged)")
       << ": copy bandwidth GB/s, rows = source, columns = destination\n";
    std::snprintf(cell, sizeof cell, "%8s", "src\\dst");
    os << cell;
    for (const int d : devices) {
      std::snprintf(cell, sizeof cell, "%9d", d);
      os << cell;
    }
    os << "\n";
    for (const int s : devices) {
      std::snprintf(cell, sizeof cell, "%8d", s);
      os << cell;
      for (const int d : devices) {
        const auto it = by_pair.find({s, d, peer});
        if (s == d)
          std::snprintf(cell, sizeof cell, "%9s", "-");
        else if (it == by_pair.end() || !it->second->measured())
          std::snprintf(cell, sizeof cell, "%9s", "n/a");
        else
          std::snprintf(cell, sizeof cell, "%9.1f", it->second->bytes_per_second / 1e9);
        os << cell;
      }
      os << "\n";
    }
  }
  for (const auto& r : results)
    if (!r.note.empty())
      os << "  " << r.src << " -> " << r.dst << (r.peer ? " (peer)" : " (staged)") << ": " << r.note << "\n";
  return os.str();
}

}  // namespace kstudy
