#include "scoring/pipeline.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace kstudy {

struct pipelined_one_shot::slot {
  std::unique_ptr<scoring_variant> variant;
  std::int64_t rows = 0;       // rows this slot's instance was prepared for
  table_shape shape;           // the chunk's shape
  host_buffer x, score, flag;  // page-locked staging (x only when the input cannot be sent directly)
  bool busy = false;
  std::int64_t row_begin = 0;  // rows of the chunk in flight
};

namespace {

// Copies rows [r0, r0 + n) of a table into a contiguous chunk table of the same layout, with host
// threads (a single thread copies pageable memory at a fraction of the bus rate).
void gather_chunk(const table_shape& whole, const float* x, std::int64_t r0, std::int64_t n, float* chunk) {
  // Kokkos' host threads rather than a raw OpenMP region: the process's OpenMP pool belongs to Kokkos.
  using host_policy = Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>;
  if (whole.layout == table_layout::feature_major) {
    Kokkos::parallel_for("kstudy::pipeline::gather_feature_major", host_policy(0, whole.features),
                         [=](const std::int64_t f) {
                           std::memcpy(chunk + f * n, x + f * whole.rows + r0, std::size_t(n) * sizeof(float));
                         });
  } else {
    const std::int64_t pitch = whole.layout == table_layout::padded_row_major ? whole.pitch : whole.features;
    const std::int64_t elements = n * pitch;
    const std::int64_t block = std::int64_t(1) << 16;
    const float* src = x + r0 * pitch;
    Kokkos::parallel_for("kstudy::pipeline::gather_rows", host_policy(0, (elements + block - 1) / block),
                         [=](const std::int64_t b) {
                           const std::int64_t begin = b * block, count = std::min(block, elements - begin);
                           std::memcpy(chunk + begin, src + begin, std::size_t(count) * sizeof(float));
                         });
  }
  Kokkos::DefaultHostExecutionSpace().fence();
}

}  // namespace

pipelined_one_shot::pipelined_one_shot(const registered_variant& entry, const scoring_problem& problem,
                                       host_memory input_kind, const run_options& options,
                                       const pipeline_options& pipeline)
    : m_shape(problem.shape), m_pipeline(pipeline) {
  problem.validate();
  if (pipeline.chunk_rows < 0 || pipeline.slots <= 0)
    throw std::invalid_argument("pipelined one-shot needs a positive chunk size (or 0: automatic) and slot count");
  m_chunk_rows = pipeline.chunk_rows > 0 ? pipeline.chunk_rows : std::max<std::int64_t>(65536, (m_shape.rows + 7) / 8);
  const std::int64_t chunk = std::min(m_chunk_rows, m_shape.rows);
  const std::int64_t full_chunks = m_shape.rows / chunk;
  const std::int64_t tail = m_shape.rows - full_chunks * chunk;
  const int regular = static_cast<int>(std::min<std::int64_t>(pipeline.slots, full_chunks));
  // The slots' instances are prepared on placeholder data (the first rows of the table would do too,
  // but x is not required to be readable here); every run uploads its own chunk.
  const auto make_slot = [&](std::int64_t rows) {
    auto s = std::make_unique<slot>();
    s->rows = rows;
    s->shape = make_shape(rows, m_shape.features, m_shape.layout, m_shape.pitch - m_shape.features);
    std::vector<float> placeholder(std::size_t(s->shape.allocated_elements()), 0.0f);
    scoring_problem p = problem;
    p.shape = s->shape;
    p.x = placeholder.data();
    s->variant = make_scoring_variant(entry);
    s->variant->prepare_table(p, options);
    // Pinned input goes up without staging: contiguous rows as they are, feature-major chunks as one
    // strided copy where the variant can queue one.
    const bool direct = input_kind == host_memory::pinned &&
                        (m_shape.layout != table_layout::feature_major || s->variant->can_upload_columns());
    // Staging is page-locked where the build can allocate it (host variants, used by the tests, stage
    // in pageable memory).
    const host_memory staging = pinned_memory_available() ? host_memory::pinned : host_memory::pageable;
    if (!direct) s->x = host_buffer(staging, s->shape.allocated_elements() * std::int64_t(sizeof(float)));
    if (input_kind != host_memory::pinned) {  // page-locked outputs take the downloads directly
      s->score = host_buffer(staging, rows * std::int64_t(sizeof(float)));
      s->flag = host_buffer(staging, rows);
    }
    return s;
  };
  for (int i = 0; i < regular; ++i) m_slots.push_back(make_slot(chunk));
  if (tail > 0) m_slots.push_back(make_slot(tail));
}

pipelined_one_shot::~pipelined_one_shot() {
  // Drains queued work before its buffers go; a failing wait (a lost CUDA context) must not escape a
  // destructor and terminate the process.
  for (auto& s : m_slots) {
    try {
      if (s->busy) s->variant->wait();
    } catch (const std::exception&) {
    }
  }
}

std::int64_t pipelined_one_shot::chunks() const {
  const std::int64_t chunk = std::min(m_chunk_rows, m_shape.rows);
  return (m_shape.rows + chunk - 1) / chunk;
}

void pipelined_one_shot::finish(slot& s, float* score, std::uint8_t* flag) {
  s.variant->wait();
  if (s.score.bytes() > 0) {
    std::memcpy(score + s.row_begin, s.score.data(), std::size_t(s.rows) * sizeof(float));
    std::memcpy(flag + s.row_begin, s.flag.data(), std::size_t(s.rows));
  }
  m_flagged += s.variant->flagged_count();
  s.busy = false;
}

std::int64_t pipelined_one_shot::run(const float* host_x, float* score, std::uint8_t* flag) {
  m_flagged = 0;
  const std::int64_t chunk = std::min(m_chunk_rows, m_shape.rows);
  const std::int64_t n_chunks = chunks();
  const bool has_tail = m_shape.rows % chunk != 0;
  const std::int64_t regular = static_cast<std::int64_t>(m_slots.size()) - (has_tail ? 1 : 0);
  const std::int64_t pitch = m_shape.layout == table_layout::padded_row_major ? m_shape.pitch : m_shape.features;
  for (std::int64_t c = 0; c < n_chunks; ++c) {
    const std::int64_t r0 = c * chunk;
    const bool tail = has_tail && c == n_chunks - 1;
    slot& s = tail ? *m_slots.back() : *m_slots[static_cast<std::size_t>(c % regular)];
    if (s.busy) finish(s, score, flag);  // its previous chunk must be out of the staging buffers
    s.row_begin = r0;
    if (s.x.bytes() > 0) {
      gather_chunk(m_shape, host_x, r0, s.rows, s.x.as<float>());
      s.variant->enqueue_upload_table(s.x.as<float>());
    } else if (m_shape.layout == table_layout::feature_major) {
      s.variant->enqueue_upload_columns(host_x + r0, m_shape.rows);  // pinned: one strided copy
    } else {
      s.variant->enqueue_upload_table(host_x + r0 * pitch);  // pinned, contiguous rows: straight from the caller
    }
    s.variant->enqueue_run();
    if (s.score.bytes() > 0)
      s.variant->enqueue_download_scores(s.score.as<float>(), s.flag.as<std::uint8_t>());
    else
      s.variant->enqueue_download_scores(score + r0, flag + r0);
    s.busy = true;
  }
  // Drain in chunk order.
  for (std::int64_t c = std::max<std::int64_t>(0, n_chunks - std::int64_t(m_slots.size())); c < n_chunks; ++c) {
    const bool tail = has_tail && c == n_chunks - 1;
    slot& s = tail ? *m_slots.back() : *m_slots[static_cast<std::size_t>(c % regular)];
    if (s.busy) finish(s, score, flag);
  }
  for (auto& s : m_slots)
    if (s->busy) finish(*s, score, flag);
  return m_flagged;
}

}  // namespace kstudy
