#include "kstudy/host_io.hpp"

#include <algorithm>
#include <cstddef>

namespace kstudy {

host_outputs::host_outputs(const operation& op, const table_shape& shape, host_memory memory) {
  for (const auto bytes : op.output_bytes(shape)) m_buffers.emplace_back(memory, bytes);
}

std::vector<host_span> host_outputs::spans() const {
  std::vector<host_span> out;
  for (const auto& b : m_buffers) out.push_back({b.data(), b.bytes()});
  return out;
}

host_inputs::host_inputs(const problem_data& problem, host_memory memory) {
  for (const auto& input : problem.streamed_inputs()) {
    m_buffers.emplace_back(memory, input.bytes);
    std::copy(input.as<const std::byte>(), input.as<const std::byte>() + input.bytes, m_buffers.back().data());
  }
}

std::vector<host_span> host_inputs::spans() const {
  std::vector<host_span> out;
  for (const auto& b : m_buffers) out.push_back({b.data(), b.bytes()});
  return out;
}

std::int64_t host_inputs::bytes() const {
  std::int64_t total = 0;
  for (const auto& b : m_buffers) total += b.bytes();
  return total;
}

}  // namespace kstudy
