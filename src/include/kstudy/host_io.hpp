#pragma once
// Host arrays on either side of the one-shot boundary, in memory of one kind, for any operation.
#include <cstdint>
#include <vector>

#include "kstudy/operation.hpp"
#include "kstudy/views/host_buffers.hpp"

namespace kstudy {

// An operation's output arrays at a shape; spans() hands them to a variant's download().
class host_outputs {
 public:
  host_outputs() = default;
  host_outputs(const operation& op, const table_shape& shape, host_memory memory = host_memory::pageable);
  std::vector<host_span> spans() const;

 private:
  std::vector<host_buffer> m_buffers;
};

// Copies of a problem's streamed inputs (one-shot from pageable or page-locked memory).
class host_inputs {
 public:
  host_inputs() = default;
  host_inputs(const problem_data& problem, host_memory memory);
  std::vector<host_span> spans() const;
  std::int64_t bytes() const;

 private:
  std::vector<host_buffer> m_buffers;
};

}  // namespace kstudy
