#pragma once
// The cuBLAS status check of CUDA variants and the compute roofs, the companion of KSTUDY_CUDA_CHECK: throws
// std::runtime_error naming the call, file, line and cuBLAS's status name and text. Empty where CUDA is not
// compiled (a cpu flavour's .cpp).
#if defined(__CUDACC__) || defined(KSTUDY_HAVE_CUDA_VARIANTS)
#include <cublas_v2.h>

#include <stdexcept>
#include <string>

namespace kstudy {

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                           cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

}  // namespace kstudy

// Checks a cuBLAS call (cublasStatus_t): throws std::runtime_error on failure.
#define KSTUDY_CUBLAS_CHECK(call) ::kstudy::check_cublas((call), #call, __FILE__, __LINE__)

#endif  // __CUDACC__ || KSTUDY_HAVE_CUDA_VARIANTS
