// stencil_kokkos: what a Kokkos user writes first, one RangePolicy parallel_for over n on the variant's own
// execution-space instance, registered on every backend this Kokkos enables (serial, openmp, cuda). The thin
// base (kstudy/support/kokkos_arrays.hpp) holds x and y as Views and does the copies and poison.
#include <Kokkos_Core.hpp>

#include <cstdint>

#include "kstudy/support/kokkos_arrays.hpp"
#include "stencil.hpp"

namespace stencil {
namespace {

template <class Space>
class stencil_kokkos final : public kstudy::kokkos_array_variant<Space> {
 public:
  void launch() override {  // input x, output y: the operation's arrays, in its order
    const auto x = this->input(0), y = this->output(0);
    const std::int64_t n = y.extent(0);
    const float w = side_weight, c = centre_weight;  // captured by value into device code
    Kokkos::parallel_for(
        "stencil::stencil3", Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>(this->m_space, 0, n),
        KOKKOS_LAMBDA(const std::int64_t i) {
          y(i) = w * ((i > 0 ? x(i - 1) : 0.0f) + (i + 1 < n ? x(i + 1) : 0.0f)) + c * x(i);
        });
  }
};

[[maybe_unused]] const int registered = kstudy::register_kokkos_array_variant<stencil_kokkos>(
    variant_info_for("stencil_kokkos", "Kokkos RangePolicy, one element per work item"));

}  // namespace
}  // namespace stencil
