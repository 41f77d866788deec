#pragma once
// A problem held as named host arrays of one shape: the problem_data an operation uses as it is, or derives
// from for named accessors, when its inputs are plain arrays. It owns the arrays, lists the streamed ones for
// the one-shot boundary, copies itself (the relayout of a one-layout operation), and problem_as<> downcasts
// with an error that names the operation instead of a bad_cast.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "kstudy/operation.hpp"

namespace kstudy {

class array_problem : public problem_data {
 public:
  explicit array_problem(const table_shape& shape) : m_shape(shape) {}
  array_problem(const array_problem& other) : m_shape(other.m_shape) {
    for (const auto& a : other.m_arrays) {
      auto& copy = m_arrays.emplace_back(entry{a.name, a.type, a.element_bytes, a.elements, a.streamed, nullptr});
      copy.data.reset(new std::byte[a.bytes()]);
      if (a.bytes() > 0) std::memcpy(copy.data.get(), a.data.get(), a.bytes());
    }
  }
  array_problem& operator=(const array_problem&) = delete;

  const table_shape& shape() const override { return m_shape; }
  // The streamed arrays, in the order they were added.
  std::vector<host_span> streamed_inputs() const override {
    std::vector<host_span> spans;
    for (const auto& a : m_arrays)
      if (a.streamed) spans.push_back({a.data.get(), std::int64_t(a.bytes())});
    return spans;
  }

  // Adds an array of n elements of T, uninitialised (the generator writes every element; zeroing gigabytes
  // first would double the generation's memory traffic). Streamed arrays are copied from host memory in every
  // one-shot call; the others are parameters a variant uploads once in prepare.
  template <class T>
  T* add(std::string name, std::int64_t n, bool streamed = true) {
    if (n < 0) throw std::invalid_argument("array " + name + ": negative element count");
    auto& a = m_arrays.emplace_back(entry{std::move(name), &typeid(T), sizeof(T), n, streamed, nullptr});
    a.data.reset(new std::byte[a.bytes()]);
    return reinterpret_cast<T*>(a.data.get());
  }

  std::size_t arrays() const { return m_arrays.size(); }
  const std::string& name(std::size_t index) const { return m_arrays.at(index).name; }
  std::int64_t elements(std::size_t index) const { return m_arrays.at(index).elements; }
  template <class T>
  const T* array(std::size_t index) const {
    return reinterpret_cast<const T*>(checked<T>(index).data.get());
  }
  template <class T>
  T* array(std::size_t index) {
    return reinterpret_cast<T*>(checked<T>(index).data.get());
  }

 private:
  struct entry {
    std::string name;
    const std::type_info* type;
    std::size_t element_bytes;
    std::int64_t elements;
    bool streamed;
    std::unique_ptr<std::byte[]> data;
    std::size_t bytes() const { return element_bytes * std::size_t(elements); }
  };
  template <class T>
  const entry& checked(std::size_t index) const {
    const auto& a = m_arrays.at(index);
    if (*a.type != typeid(T)) throw std::logic_error("array " + a.name + " read as another element type");
    return a;
  }

  table_shape m_shape;
  std::vector<entry> m_arrays;
};

// The problem as the operation's own problem_data type; std::invalid_argument naming the operation where a
// variant or the runner hands it another operation's problem.
template <class Problem>
const Problem& problem_as(const problem_data& problem, std::string_view operation) {
  const auto* p = dynamic_cast<const Problem*>(&problem);
  if (p == nullptr) throw std::invalid_argument(std::string(operation) + ": given another operation's problem");
  return *p;
}

}  // namespace kstudy
