#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kstudy/variant.hpp"

namespace kstudy {

const char* to_string(operation_kind operation) {
  switch (operation) {
    case operation_kind::scoring: return "scoring";
  }
  throw std::invalid_argument("kstudy: operation_kind value " + std::to_string(static_cast<int>(operation)) +
                              " has no name");
}

traffic_model essential_traffic(const table_shape& shape) {
  traffic_model t;
  t.bytes_read = shape.rows * shape.features * std::int64_t(sizeof(float)) + 3 * shape.features * std::int64_t(sizeof(float));
  t.bytes_written = shape.rows * std::int64_t(sizeof(float) + sizeof(std::uint8_t));
  return t;
}

std::int64_t essential_flops(const table_shape& shape) { return flops_per_element * shape.rows * shape.features; }

variant_registry& variant_registry::instance() {
  static variant_registry registry;
  return registry;
}

void variant_registry::add(variant_info info, variant_factory factory) {
  if (info.name.empty() || info.backend.empty() || !info.traffic || !factory)
    throw std::logic_error("variant registration needs a name, a backend, a traffic model and a factory");
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
    if ((v->info.name == name || v->info.implementation == name) && (backend.empty() || v->info.backend == backend))
      out.push_back(v);
  return out;
}

const registered_variant* variant_registry::find(const std::string& id) const {
  for (const auto& v : m_variants)
    if (v.info.id() == id) return &v;
  return nullptr;
}

}  // namespace kstudy
