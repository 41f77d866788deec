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
  array_problem(const array_problem& other) : array_problem(other, other.m_shape) {}
  // A copy of the arrays under another shape of the same extents (a relayout that keeps the values).
  array_problem(const array_problem& other, const table_shape& shape) : m_shape(shape) {
    for (const auto& a : other.m_arrays) {
      auto& copy = m_arrays.emplace_back(
          entry{a.name, a.type, a.element_bytes, a.elements, a.streamed, allocate_storage<std::byte>(a.bytes())});
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
    return adopt(std::move(name), allocate<T>(std::size_t(n)), n, streamed);
  }
  // Adds an array of n elements of T the generator has already written, taking ownership of it; a null
  // `data` adds nothing (an input this problem does not have) and returns nullptr.
  template <class T>
  T* adopt(std::string name, std::unique_ptr<T[]> data, std::int64_t n, bool streamed = true) {
    if (data == nullptr) return nullptr;
    if (n < 0) throw std::invalid_argument("array " + name + ": negative element count");
    T* raw = data.release();
    m_arrays.push_back(entry{std::move(name), &typeid(T), sizeof(T), n, streamed, owned<T>(raw)});
    return raw;
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
  // An array's bytes, freed as the T[] they were allocated as.
  using storage = std::unique_ptr<std::byte, void (*)(std::byte*)>;
  template <class T>
  static storage owned(T* data) {
    return storage(reinterpret_cast<std::byte*>(data), [](std::byte* p) { delete[] reinterpret_cast<T*>(p); });
  }
  template <class T>
  static std::unique_ptr<T[]> allocate(std::size_t n) {
    return std::unique_ptr<T[]>(new T[n]);  // default-initialised: uninitialised for arithmetic types
  }
  template <class T>
  static storage allocate_storage(std::size_t n) {
    return owned<T>(allocate<T>(n).release());
  }
  struct entry {
    std::string name;
    const std::type_info* type;
    std::size_t element_bytes;
    std::int64_t elements;
    bool streamed;
    storage data;
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

// One streamed float32 array x of rows x features elements, row-major (a vector of n when features is 1):
// the problem of an operation whose only input is a matrix. An operation derives a final class of its own
// from it, so problem_as tells its problems from another operation's.
class float_matrix_problem : public array_problem {
 public:
  // x uninitialised: the generator writes every element.
  explicit float_matrix_problem(const table_shape& shape)
      : array_problem(shape), m_x(add<float>("x", shape.rows * shape.features)) {}
  float_matrix_problem(const float_matrix_problem& other) : float_matrix_problem(other, other.shape()) {}
  float_matrix_problem(const float_matrix_problem& other, const table_shape& shape)
      : array_problem(other, shape), m_x(array<float>(0)) {}

  std::int64_t rows() const { return shape().rows; }
  std::int64_t cols() const { return shape().features; }
  std::int64_t elements() const { return rows() * cols(); }
  const float* x() const { return m_x; }
  float* x() { return m_x; }

 private:
  float* m_x;  // array 0, kept so the gate's per-element reads skip the checked lookup
};

// The problem as the operation's own problem_data type; std::invalid_argument naming the operation where a
// variant or the runner hands it another operation's problem.
template <class Problem>
const Problem& problem_as(const problem_data& problem, std::string_view operation) {
  const auto* p = dynamic_cast<const Problem*>(&problem);
  if (p == nullptr) throw std::invalid_argument(std::string(operation) + ": given another operation's problem");
  return *p;
}

// The relayout of a one-layout operation: a copy of the problem under `shape`, which keeps its extents
// (std::invalid_argument naming the operation otherwise). Problem has a (const Problem&, const table_shape&)
// constructor, as float_matrix_problem.
template <class Problem>
std::unique_ptr<problem_data> copied_problem(const Problem& problem, const table_shape& shape,
                                             std::string_view operation) {
  const table_shape& from = problem.shape();
  if (from.rows != shape.rows || from.features != shape.features || from.depth != shape.depth)
    throw std::invalid_argument(std::string(operation) + ": relayout cannot change the shape");
  return std::make_unique<Problem>(problem, shape);
}

}  // namespace kstudy
