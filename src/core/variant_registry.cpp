#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kstudy/variant.hpp"

namespace kstudy {

std::string_view to_string(implementation kind) {
  switch (kind) {
    case implementation::kokkos:
      return "kokkos";
    case implementation::kokkos_kernels:
      return "kokkos_kernels";
    case implementation::handwritten_cuda:
      return "handwritten_cuda";
    case implementation::vendor_library:
      return "vendor_library";
    case implementation::reference:
      return "reference";
    case implementation::mixed:
      return "mixed";
    case implementation::kokkos_mixed:
      return "kokkos_mixed";
  }
  throw std::invalid_argument("kstudy: implementation value " + std::to_string(static_cast<int>(kind)) +
                              " has no name");
}

std::string_view to_string(fusion_level level) {
  switch (level) {
    case fusion_level::none:
      return "none";
    case fusion_level::partial:
      return "partial";
    case fusion_level::full:
      return "full";
  }
  throw std::invalid_argument("kstudy: fusion_level value " + std::to_string(static_cast<int>(level)) + " has no name");
}

variant_registry& variant_registry::instance() {
  static variant_registry registry;
  return registry;
}

void variant_registry::add(variant_info info, variant_factory factory) {
  if (info.name.empty() || info.operation.empty() || info.backend.empty() || !info.traffic || !factory)
    throw std::logic_error("variant registration " + info.name +
                           " needs a name, an operation, a backend, a traffic model and a factory");
  if (find(info.id()) != nullptr) throw std::logic_error("variant " + info.id() + " registered twice");
  m_variants.push_back({std::move(info), std::move(factory)});
}

std::vector<const registered_variant*> variant_registry::all() const {
  std::vector<const registered_variant*> out;
  for (const auto& v : m_variants) out.push_back(&v);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->info.id() < b->info.id(); });
  return out;
}

std::vector<const registered_variant*> variant_registry::match(const std::string& pattern) const {
  // name, family, or either restricted to one backend with "@backend".
  const auto at = pattern.find('@');
  const std::string name = pattern.substr(0, at);
  const std::string backend = at == std::string::npos ? "" : pattern.substr(at + 1);
  std::vector<const registered_variant*> out;
  for (const auto* v : all())
    if ((v->info.name == name || v->info.family == name) && (backend.empty() || v->info.backend == backend))
      out.push_back(v);
  return out;
}

const registered_variant* variant_registry::find(const std::string& id) const {
  for (const auto& v : m_variants)
    if (v.info.id() == id) return &v;
  return nullptr;
}

std::vector<const registered_variant*> variant_registry::of_operation(const std::string& operation) const {
  std::vector<const registered_variant*> out;
  for (const auto* v : all())
    if (v->info.operation == operation) out.push_back(v);
  return out;
}

const operation& operation_of(const registered_variant& variant) {
  const auto* op = operation_registry::instance().find(variant.info.operation);
  if (op == nullptr)
    throw std::logic_error("variant " + variant.info.id() + " names operation '" + variant.info.operation +
                           "', which is not registered");
  return *op;
}

std::int64_t footprint_bytes(const variant_info& info, const table_shape& shape) {
  return info.footprint ? info.footprint(shape) : info.traffic(shape).total();
}

}  // namespace kstudy
