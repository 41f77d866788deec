#pragma once
// Pipelined one-shot: a strategy any queue-capable device variant runs under (not a copy of each
// variant). The table is cut into chunks of rows; chunk c's upload, kernel and download are queued on
// slot c % slots, each slot an instance of the variant on its own stream with its own page-locked
// staging buffers, so the transfers of one chunk overlap the kernels and transfers of the others.
// Pageable input is copied into the staging buffers by host threads while earlier chunks are in flight.
#include <cstdint>
#include <memory>
#include <vector>

#include "scoring/scoring_variant.hpp"
#include "kstudy/views/host_buffers.hpp"

namespace kstudy {

struct pipeline_options {
  // Rows per chunk; 0 picks max(65,536, rows / 8) so that even a mid-sized table is cut into enough
  // chunks for uploads, kernels and downloads to overlap.
  std::int64_t chunk_rows = 0;
  int slots = 3;
};

class pipelined_one_shot {
 public:
  // Prepares every slot (allocation, feature vectors: not part of a timed run). The problem gives the
  // shape and the feature vectors; its x is not read here. The outputs given to run() are of the same
  // memory kind as the input: page-locked outputs receive the downloads directly.
  pipelined_one_shot(const registered_variant& entry, const scoring_problem& problem, host_memory input_kind,
                     const run_options& options = {}, const pipeline_options& pipeline = {});
  ~pipelined_one_shot();

  // host_x: the whole table in the problem's layout (in memory of the kind given above); the outputs
  // are rows long. Returns when every score and flag is host-visible; returns the flagged count.
  std::int64_t run(const float* host_x, float* score, std::uint8_t* flag);

  std::int64_t chunks() const;

 private:
  struct slot;
  void finish(slot& s, float* score, std::uint8_t* flag);

  table_shape m_shape;
  std::int64_t m_chunk_rows = 0;
  pipeline_options m_pipeline;
  std::vector<std::unique_ptr<slot>> m_slots;  // regular slots, then a tail slot when rows % chunk != 0
  std::int64_t m_flagged = 0;
};

}  // namespace kstudy
