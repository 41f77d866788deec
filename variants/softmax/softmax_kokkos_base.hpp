#pragma once
// The Kokkos softmax variants' arrays (softmax_kokkos.cpp, softmax_kokkos_tuned.cpp): x and y in one
// execution space, their transfers and the poisoning of y. A variant derives, calls prepare_arrays() from its
// prepare() and implements launch().
#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/support/kokkos_support.hpp"
#include "softmax/softmax.hpp"

namespace kstudy::softmax {

template <class ExecutionSpace>
class softmax_kokkos_base : public kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = kokkos_queued_variant<ExecutionSpace>;
  using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

 public:
  using memory_space = typename ExecutionSpace::memory_space;
  using matrix_type = Kokkos::View<float*, Kokkos::Device<ExecutionSpace, memory_space>>;  // rows x cols, flat
  using kokkos_base::on_host;

  softmax_kokkos_base() : kokkos_base(/*own_stream=*/true) {}
  ~softmax_kokkos_base() override { m_instance.drain(); }  // queued work ends before the arrays are freed

  void poison() override {
    Kokkos::deep_copy(m_space, m_y, std::numeric_limits<float>::quiet_NaN());
    m_space.fence();
  }

  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != 1) throw std::invalid_argument("softmax: expected one input array");
    Kokkos::deep_copy(
        m_space, m_x,
        Kokkos::View<const float*, Kokkos::HostSpace, unmanaged>(inputs[0].as<const float>(), m_x.size()));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    Kokkos::deep_copy(m_space, Kokkos::View<float*, Kokkos::HostSpace, unmanaged>(y_output(outputs), m_y.size()), m_y);
  }

 protected:
  // The problem's shape and uninitialised x and y (the upload and poison() write them); `name` words the error
  // for more rows than a Kokkos league holds (a team per row, or per few rows, takes its rank from it).
  const softmax_data& prepare_arrays(const problem_data& problem, const run_options& options, const char* name) {
    const auto& data = softmax_problem(problem);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    m_rows = data.rows();
    m_cols = data.cols();
    if (m_rows > std::numeric_limits<int>::max())
      throw std::invalid_argument(std::string(name) + ": more rows than a Kokkos league holds (2^31 - 1)");
    const auto n = static_cast<std::size_t>(data.elements());
    m_x = matrix_type(Kokkos::view_alloc("kstudy::softmax::x", Kokkos::WithoutInitializing), n);
    m_y = matrix_type(Kokkos::view_alloc("kstudy::softmax::y", Kokkos::WithoutInitializing), n);
    return data;
  }

  using kokkos_base::m_instance;
  using kokkos_base::m_space;
  std::int64_t m_rows = 0, m_cols = 0;
  matrix_type m_x, m_y;
};

}  // namespace kstudy::softmax
