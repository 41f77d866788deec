// Shards: a deterministic slice of a run's (point, replication) units, one per Slurm array task.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kstudy/experiment_kind.hpp"
#include "kstudy/study.hpp"

namespace kstudy {

std::string shard_spec::text() const { return std::to_string(index) + "/" + std::to_string(count); }

shard_spec parse_shard(const std::string& text) {
  const auto fail = [&]() -> shard_spec {
    throw std::invalid_argument("--shard '" + text + "': expected K/N with 0 <= K < N (e.g. 2/8)");
  };
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) return fail();
  const auto digits = [](const std::string& t) {
    return !t.empty() && t.size() <= 6 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const auto k = text.substr(0, slash), n = text.substr(slash + 1);
  if (!digits(k) || !digits(n)) return fail();
  shard_spec shard{std::stoi(k), std::stoi(n)};
  if (shard.count < 1 || shard.index >= shard.count) return fail();
  return shard;
}

bool in_shard(const shard_spec& shard, std::int64_t point, int replication, int replications) {
  if (!shard.sharded()) return true;
  return (point * replications + replication) % shard.count == shard.index;
}

std::int64_t point_count(const experiment& e) { return kind_of(e).point_count(e); }

std::int64_t shard_units(const experiment& e, const shard_spec& shard) {
  std::int64_t units = 0;
  for (std::int64_t p = 0, n = point_count(e); p < n; ++p)
    for (int r = 0; r < e.protocol.replication_slots(); ++r)
      units += in_shard(shard, p, r, e.protocol.replication_slots());
  return units;
}

}  // namespace kstudy
