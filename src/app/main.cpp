#include <Kokkos_Core.hpp>

#include <iostream>

#include "kstudy/variant.hpp"

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  for (const auto* v : kstudy::variant_registry::instance().all()) std::cout << v->info.id() << "\n";
  return 0;
}
