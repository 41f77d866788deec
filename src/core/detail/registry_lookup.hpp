// The registries' lookups (operations and experiment kinds by name, variants by id), written once: a linear search,
// since a registry holds tens of entries and is searched at start-up and once an experiment, and a list sorted by
// the key, so that `kstudy list` and the reports read in the same order whichever file registered first.
#pragma once

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kstudy::detail {

// An entry's address, whether the registry holds it by value or through a unique_ptr.
template <class T>
const T* entry_address(const T& entry) {
  return &entry;
}
template <class T>
const T* entry_address(const std::unique_ptr<T>& entry) {
  return entry.get();
}

// The entry whose key_of(entry) is `key`, or nullptr.
template <class Entries, class KeyOf>
auto find_entry(const Entries& entries, const std::string& key, KeyOf key_of)
    -> decltype(entry_address(*entries.begin())) {
  for (const auto& entry : entries)
    if (key_of(*entry_address(entry)) == key) return entry_address(entry);
  return nullptr;
}

// Throws std::logic_error "<what> <key> registered twice" where an entry already has the key.
template <class Entries, class KeyOf>
void require_unregistered(const Entries& entries, const std::string& key, KeyOf key_of, const std::string& what) {
  if (find_entry(entries, key, key_of) != nullptr) throw std::logic_error(what + " " + key + " registered twice");
}

// Every entry, sorted by key_of.
template <class Entries, class KeyOf>
auto sorted_entries(const Entries& entries, KeyOf key_of) {
  std::vector<decltype(entry_address(*entries.begin()))> out;
  for (const auto& entry : entries) out.push_back(entry_address(entry));
  std::sort(out.begin(), out.end(), [&](const auto* a, const auto* b) { return key_of(*a) < key_of(*b); });
  return out;
}

}  // namespace kstudy::detail
