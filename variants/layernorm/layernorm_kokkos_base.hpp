#pragma once
// The Kokkos LayerNorm variants' arrays (layernorm_kokkos.cpp, layernorm_kokkos_tuned.cpp): x, y, gamma and
// beta (with the residual also r and h) of a LayerNorm kind in one execution space, their transfers and the
// poisoning of the outputs. A variant derives and implements launch() (queues one resident run on m_space);
// one that plans its launch in prepare() calls prepare_arrays() from its own prepare().
#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/support/kokkos_support.hpp"
#include "layernorm/layernorm.hpp"

namespace kstudy::layernorm {

template <class ExecutionSpace, layernorm_kind K>
class layernorm_kokkos_base : public kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = kokkos_queued_variant<ExecutionSpace>;
  using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

 public:
  using memory_space = typename ExecutionSpace::memory_space;
  using device_type = Kokkos::Device<ExecutionSpace, memory_space>;
  using vector_type = Kokkos::View<float*, device_type>;
  using host_view = Kokkos::View<float*, Kokkos::HostSpace, unmanaged>;
  using const_host_view = Kokkos::View<const float*, Kokkos::HostSpace, unmanaged>;
  using kokkos_base::on_host;

  layernorm_kokkos_base() : kokkos_base(/*own_stream=*/true) {}
  ~layernorm_kokkos_base() override { m_instance.drain(); }  // queued work ends before the buffers are freed

  void prepare(const problem_data& problem, const run_options& options) override {
    this->upload(prepare_arrays(problem, options, /*rows_in_league=*/false).streamed_inputs());
  }

  void poison() override {
    Kokkos::deep_copy(m_space, m_y, std::numeric_limits<float>::quiet_NaN());
    if constexpr (has_residual(K)) Kokkos::deep_copy(m_space, m_h, std::numeric_limits<float>::quiet_NaN());
    m_space.fence();
  }

  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != std::size_t(input_count(K)))
      throw std::invalid_argument(std::string(operation_name(K)) + ": expected " + std::to_string(input_count(K)) +
                                  " input arrays");
    const auto elements = static_cast<std::size_t>(m_rows * m_hidden);
    Kokkos::deep_copy(m_space, m_x, const_host_view(inputs[0].as<const float>(), elements));
    if constexpr (has_residual(K))
      Kokkos::deep_copy(m_space, m_r, const_host_view(inputs[1].as<const float>(), elements));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    const auto elements = static_cast<std::size_t>(m_rows * m_hidden);
    Kokkos::deep_copy(m_space, host_view(y_output(outputs), elements), m_y);
    if constexpr (has_residual(K)) Kokkos::deep_copy(m_space, host_view(h_output(outputs), elements), m_h);
  }

 protected:
  // The problem's shape and its arrays: x and y (r and h) uninitialised (the upload and poison() write them),
  // gamma and beta queued for upload. rows_in_league: refuse more rows than a Kokkos league holds (a launch
  // whose league counts rows, or teams of rows, takes its rank from it).
  const layernorm_data& prepare_arrays(const problem_data& problem, const run_options& options, bool rows_in_league) {
    const auto& data = layernorm_problem(problem, K);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    m_rows = data.rows();
    m_hidden = data.hidden();
    if (rows_in_league && m_rows > std::numeric_limits<int>::max())
      throw std::invalid_argument(std::string(operation_name(K)) + ": more rows than a Kokkos league holds (2^31 - 1)");
    const auto elements = static_cast<std::size_t>(data.elements()), hidden = static_cast<std::size_t>(m_hidden);
    const auto alloc = [](const std::string& label) { return Kokkos::view_alloc(label, Kokkos::WithoutInitializing); };
    m_x = vector_type(alloc("kstudy::layernorm::x"), elements);
    m_y = vector_type(alloc("kstudy::layernorm::y"), elements);
    if constexpr (has_residual(K)) {
      m_r = vector_type(alloc("kstudy::layernorm::r"), elements);
      m_h = vector_type(alloc("kstudy::layernorm::h"), elements);
    }
    m_gamma = vector_type(alloc("kstudy::layernorm::gamma"), hidden);
    m_beta = vector_type(alloc("kstudy::layernorm::beta"), hidden);
    Kokkos::deep_copy(m_space, m_gamma, const_host_view(data.gamma(), hidden));
    Kokkos::deep_copy(m_space, m_beta, const_host_view(data.beta(), hidden));
    return data;
  }

  using kokkos_base::m_instance;
  using kokkos_base::m_space;
  std::int64_t m_rows = 0, m_hidden = 0;
  vector_type m_x, m_r, m_gamma, m_beta, m_y, m_h;
};

}  // namespace kstudy::layernorm
