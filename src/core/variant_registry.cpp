#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "detail/name_table.hpp"
#include "detail/registry_lookup.hpp"
#include "kstudy/platform/devices.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/variant_unavailable.hpp"

namespace kstudy {

namespace {
constexpr detail::name_table<implementation, 8> k_implementation_names{{
    {implementation::kokkos, "kokkos"},
    {implementation::kokkos_kernels, "kokkos_kernels"},
    {implementation::handwritten_cuda, "handwritten_cuda"},
    {implementation::vendor_library, "vendor_library"},
    {implementation::reference, "reference"},
    {implementation::mixed, "mixed"},
    {implementation::kokkos_mixed, "kokkos_mixed"},
    {implementation::framework, "framework"},
}};

constexpr detail::name_table<fusion_level, 3> k_fusion_level_names{{
    {fusion_level::none, "none"},
    {fusion_level::partial, "partial"},
    {fusion_level::full, "full"},
}};

std::string variant_id(const registered_variant& variant) { return variant.info.id(); }

std::string sm_name(int capability) { return "sm_" + std::to_string(capability); }

// The factory of a variant that needs more than any GPU: each make() first asks the GPU this process runs on
// and the build's target, and throws variant_unavailable (recorded as skipped, never failed) where either
// falls short; the variant's code, compiled as a trap for an older target, is never entered.
variant_factory checked_against_gpu(const variant_info& info, variant_factory factory) {
  if (!info.unavailable.empty())  // known when it registered (a Python rung's framework is not installed)
    return [why = info.unavailable]() -> std::unique_ptr<variant> { throw variant_unavailable(why); };
  if (!info.needs.any()) return factory;
  return [needs = info.needs, factory = std::move(factory)]() -> std::unique_ptr<variant> {
    const auto why = unmet_requirement(needs, platform::gpu_compute_capability(), platform::build_compute_capability());
    if (!why.empty()) throw variant_unavailable(why);
    return factory();
  };
}
}  // namespace

std::string describe(const gpu_requirement& needs) {
  if (!needs.any()) return "";
  return sm_name(needs.compute_capability) + (needs.arch_specific ? "a" : "") +
         (needs.features.empty() ? "" : " (" + needs.features + ")");
}

std::string unmet_requirement(const gpu_requirement& needs, int device, int built) {
  if (!needs.any()) return "";
  const std::string what = "needs " + describe(needs);
  if (device <= 0) return what + "; no CUDA GPU is visible";
  const std::string gpu = "this GPU is " + sm_name(device) + " (compute capability " + std::to_string(device / 10) +
                          "." + std::to_string(device % 10) + ")";
  const std::string build =
      "this build's device code targets " + sm_name(built) + " (KSTUDY_CUDA_ARCH=" + std::to_string(built) + ")";
  if (needs.arch_specific) {
    if (device != needs.compute_capability) return what + ", which only that GPU generation runs; " + gpu;
    if (built != needs.compute_capability)
      return what + "; " + build + ": build with KSTUDY_CUDA_ARCH=" + std::to_string(needs.compute_capability);
    return "";
  }
  if (device < needs.compute_capability) return what + "; " + gpu;
  if (built < needs.compute_capability)
    return what + "; " + build + ": build with KSTUDY_CUDA_ARCH=" + std::to_string(device) + " for this GPU";
  return "";
}

std::string_view to_string(implementation kind) {
  return detail::name_of(k_implementation_names, kind, "implementation");
}

std::string_view to_string(fusion_level level) { return detail::name_of(k_fusion_level_names, level, "fusion_level"); }

implementation parse_implementation(const std::string& name) {
  return detail::value_of(k_implementation_names, name, "implementation");
}

fusion_level parse_fusion_level(const std::string& name) {
  return detail::value_of(k_fusion_level_names, name, "fusion level");
}

variant_registry& variant_registry::instance() {
  static variant_registry registry;
  return registry;
}

void variant_registry::add(variant_info info, variant_factory factory) {
  if (!factory) throw std::logic_error("variant registration " + info.name + " needs a factory");
  const auto id = info.id();
  declare(std::move(info));
  bind(id, std::move(factory));
}

void variant_registry::declare(variant_info info) {
  if (info.name.empty() || info.operation.empty() || info.backend.empty())
    throw std::logic_error("variant declaration " + info.name + " needs a name, an operation and a backend");
  // No model of its own: the variant moves the operation's essential bytes. Looked up when called, since the
  // operation may register after the variant (static initialisation order across files is unspecified).
  if (!info.traffic)
    info.traffic = [operation = info.operation](const table_shape& shape) {
      const auto* op = operation_registry::instance().find(operation);
      if (op == nullptr)
        throw std::logic_error("a variant names operation '" + operation + "', which is not registered");
      return op->essential_traffic(shape);
    };
  const auto id = info.id();
  detail::require_unregistered(m_variants, id, variant_id, "variant");
  variant_factory factory;
  if (const auto pending = m_pending_binds.find(id); pending != m_pending_binds.end()) {
    factory = std::move(pending->second);
    m_pending_binds.erase(pending);
  }
  if (factory) factory = checked_against_gpu(info, std::move(factory));
  m_variants.push_back({std::move(info), std::move(factory)});
}

void variant_registry::bind(const std::string& id, variant_factory factory) {
  if (!factory) throw std::logic_error("variant " + id + " bound to an empty factory");
  for (auto& v : m_variants)
    if (v.info.id() == id) {
      if (v.make) throw std::logic_error("variant " + id + " bound twice");
      v.make = checked_against_gpu(v.info, std::move(factory));
      return;
    }
  if (!m_pending_binds.emplace(id, std::move(factory)).second) throw std::logic_error("variant " + id + " bound twice");
}

void variant_registry::check_bindings() const {
  if (m_pending_binds.empty()) return;
  std::string ids;
  for (const auto& [id, factory] : m_pending_binds) ids += (ids.empty() ? "" : ", ") + id;
  throw std::logic_error("variant code bound to an id that nothing declares: " + ids);
}

const registered_variant* variant_registry::declared(const std::string& id) const {
  return detail::find_entry(m_variants, id, variant_id);
}

std::vector<const registered_variant*> variant_registry::sorted(bool bound) const {
  check_bindings();
  std::vector<const registered_variant*> out;
  for (const auto& v : m_variants)
    if (static_cast<bool>(v.make) == bound) out.push_back(&v);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->info.id() < b->info.id(); });
  return out;
}

namespace {

// name, family, or either restricted to one backend with "@backend".
bool matches(const variant_info& info, const std::string& pattern) {
  const auto at = pattern.find('@');
  const std::string name = pattern.substr(0, at);
  const std::string backend = at == std::string::npos ? "" : pattern.substr(at + 1);
  return (info.name == name || info.family == name) && (backend.empty() || info.backend == backend);
}

}  // namespace

std::vector<const registered_variant*> variant_registry::all() const { return sorted(true); }

std::vector<const registered_variant*> variant_registry::match(const std::string& pattern) const {
  std::vector<const registered_variant*> out;
  for (const auto* v : all())
    if (matches(v->info, pattern)) out.push_back(v);
  return out;
}

const registered_variant* variant_registry::find(const std::string& id) const {
  check_bindings();
  const auto* v = declared(id);
  return v != nullptr && v->make ? v : nullptr;
}

std::vector<const registered_variant*> variant_registry::of_operation(const std::string& operation) const {
  std::vector<const registered_variant*> out;
  for (const auto* v : all())
    if (v->info.operation == operation) out.push_back(v);
  return out;
}

std::vector<const variant_info*> variant_registry::declared_elsewhere() const {
  std::vector<const variant_info*> out;
  for (const auto* v : sorted(false)) out.push_back(&v->info);
  return out;
}

std::vector<const variant_info*> variant_registry::match_declared(const std::string& pattern) const {
  std::vector<const variant_info*> out;
  for (const auto* info : declared_elsewhere())
    if (matches(*info, pattern)) out.push_back(info);
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
