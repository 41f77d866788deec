#pragma once
// Device buffers of handwritten CUDA variants: allocation checked like every CUDA call, at least one element
// so that a zero-sized problem still gets a valid pointer, and a free that never throws (it runs from
// destructors). Empty where CUDA is not compiled (a cpu flavour's .cpp).
#if defined(__CUDACC__) || defined(KSTUDY_HAVE_CUDA_VARIANTS)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kstudy/cuda_escape.hpp"

namespace kstudy {

template <class T>
void device_alloc(T*& pointer, std::int64_t count) {
  void* p = nullptr;
  KSTUDY_CUDA_CHECK(cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T)));
  pointer = static_cast<T*>(p);
}

template <class T>
void device_free(T*& pointer) noexcept {
  if (pointer != nullptr) cudaFree(pointer);
  pointer = nullptr;
}

}  // namespace kstudy

#endif  // __CUDACC__ || KSTUDY_HAVE_CUDA_VARIANTS
