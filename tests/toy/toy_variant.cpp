// The toy variant of docs/extending.md: toy_axpy in one Kokkos kernel, registered on every enabled backend.
#include <Kokkos_Core.hpp>

#include <cstdint>

#include "kstudy/support/kokkos_arrays.hpp"

namespace toy {

template <class Space>
class axpy_kokkos final : public kstudy::kokkos_array_variant<Space> {
 public:
  void launch() override {  // inputs x, y and output z are the operation's arrays, in its order
    const auto x = this->input(0), y = this->input(1), z = this->output(0);
    Kokkos::parallel_for(
        "toy::axpy", Kokkos::RangePolicy<Space>(this->m_space, 0, z.extent(0)),
        KOKKOS_LAMBDA(const std::int64_t i) { z(i) = 2.0f * x(i) + y(i); });
  }
};

[[maybe_unused]] const int registered = kstudy::register_kokkos_array_variant<axpy_kokkos>([] {
  kstudy::variant_info info;
  info.name = "toy_axpy_kokkos";
  info.operation = "toy_axpy";
  info.family = "toy_kokkos";
  info.description = "Kokkos RangePolicy, one element per work item";
  return info;
}());

}  // namespace toy
