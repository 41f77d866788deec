// Softmax over rows through cuDNN (family cudnn, softmax_cudnn): cudnnSoftmaxForward with
// CUDNN_SOFTMAX_ACCURATE (the max subtracted) and CUDNN_SOFTMAX_MODE_INSTANCE over an N x C x 1 x 1 NCHW
// tensor, N = rows, C = cols: one softmax per row over its C values, on the variant's own stream.
// Built only where CMake found cudnn.h (KSTUDY_HAVE_CUDNN). The library is not linked: it is opened with
// dlopen on the first prepare, so kstudy starts on a machine without cuDNN and only this variant fails, with
// an error saying what to set. It looks for $KSTUDY_CUDNN_LIBRARY if set, then libcudnn.so.9 on the loader's
// path (LD_LIBRARY_PATH: e.g. the lib directory of the nvidia-cudnn Python wheel), then the library CMake
// found at configure time.
#ifdef KSTUDY_HAVE_CUDNN
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "kstudy/support/cuda_variant.hpp"
#include "kstudy/cuda_escape.hpp"
#include "detail/cudnn_library.hpp"
#include "kstudy/variant.hpp"
#include "softmax/softmax.hpp"

#ifndef KSTUDY_CUDNN_CONFIGURED_LIBRARY
#define KSTUDY_CUDNN_CONFIGURED_LIBRARY ""
#endif

namespace kstudy::softmax {
namespace {

// The cuDNN entry points this variant calls, resolved from the opened library.
struct cudnn_api {
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnCreateTensorDescriptor) create_tensor = nullptr;
  decltype(&cudnnSetTensor4dDescriptor) set_tensor_4d = nullptr;
  decltype(&cudnnDestroyTensorDescriptor) destroy_tensor = nullptr;
  decltype(&cudnnSoftmaxForward) softmax_forward = nullptr;
  std::string path;   // the library opened
  std::string error;  // why it could not be, or ""
};

// Opened once per process; the result (or the reason it failed) is kept.
const cudnn_api& cudnn() {
  static cudnn_api api;
  static std::once_flag once;
  std::call_once(once, [] {
    api.path = kstudy::detail::open_cudnn(
        [](void* library) {
          using kstudy::detail::resolve_symbol;
          std::string missing;
          kstudy::detail::resolve_cudnn_handle_api(library, api, missing);
          resolve_symbol(library, "cudnnCreateTensorDescriptor", api.create_tensor, missing);
          resolve_symbol(library, "cudnnSetTensor4dDescriptor", api.set_tensor_4d, missing);
          resolve_symbol(library, "cudnnDestroyTensorDescriptor", api.destroy_tensor, missing);
          resolve_symbol(library, "cudnnSoftmaxForward", api.softmax_forward, missing);
          return missing;
        },
        KSTUDY_CUDNN_CONFIGURED_LIBRARY, api.error);
  });
  if (!api.error.empty()) throw std::runtime_error("softmax_cudnn: " + api.error);
  return api;
}

void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                           cudnn().error_string(status));
}
#define KSTUDY_CUDNN_CHECK(call) check_cudnn((call), #call, __FILE__, __LINE__)

class softmax_cudnn final : public kstudy::cuda_stream_variant<> {
 public:
  ~softmax_cudnn() override {
    if (m_stream != nullptr) cudaStreamSynchronize(m_stream);
    release();
    if (m_descriptor != nullptr) cudnn().destroy_tensor(m_descriptor);
    if (m_handle != nullptr) cudnn().destroy(m_handle);
  }

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = softmax_problem(problem);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    // cuDNN's legacy tensor descriptors take int dimensions and strides (the element count included).
    if (data.elements() > std::numeric_limits<int>::max())
      throw std::invalid_argument("softmax_cudnn: " + std::to_string(data.rows()) + " x " +
                                  std::to_string(data.cols()) + " exceeds cuDNN's 32-bit tensor extents");
    const auto& api = cudnn();
    release();
    create_stream();
    if (m_handle == nullptr) KSTUDY_CUDNN_CHECK(api.create(&m_handle));
    KSTUDY_CUDNN_CHECK(api.set_stream(m_handle, m_stream));
    if (m_descriptor == nullptr) KSTUDY_CUDNN_CHECK(api.create_tensor(&m_descriptor));
    KSTUDY_CUDNN_CHECK(api.set_tensor_4d(m_descriptor, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                         static_cast<int>(data.rows()), static_cast<int>(data.cols()), 1, 1));
    m_bytes = static_cast<std::size_t>(data.elements()) * sizeof(float);
    void* p = nullptr;
    KSTUDY_CUDA_CHECK(cudaMalloc(&p, m_bytes));
    m_x = static_cast<float*>(p);
    KSTUDY_CUDA_CHECK(cudaMalloc(&p, m_bytes));
    m_y = static_cast<float*>(p);
    upload(data.streamed_inputs());
  }

  void poison() override {
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_y, 0xFF, m_bytes, m_stream));  // all-ones bytes: a float NaN
    wait();
  }
  void enqueue_run() override {
    const float alpha = 1.0f, beta = 0.0f;
    KSTUDY_CUDNN_CHECK(cudnn().softmax_forward(m_handle, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &alpha,
                                               m_descriptor, m_x, &beta, m_descriptor, m_y));
  }
  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != 1) throw std::invalid_argument("softmax: expected one input array");
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_x, inputs[0].data, m_bytes, cudaMemcpyHostToDevice, m_stream));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(y_output(outputs), m_y, m_bytes, cudaMemcpyDeviceToHost, m_stream));
  }

 private:
  void release() {
    if (m_x != nullptr) cudaFree(m_x);
    if (m_y != nullptr) cudaFree(m_y);
    m_x = m_y = nullptr;
  }

  cudnnHandle_t m_handle = nullptr;
  cudnnTensorDescriptor_t m_descriptor = nullptr;
  float *m_x = nullptr, *m_y = nullptr;
  std::size_t m_bytes = 0;
};

// Declared with its fields in softmax_cudnn_info.cpp, which every build compiles: a build without cudnn.h
// knows it as not in this build.
const variant_binding<softmax_cudnn> bind_softmax_cudnn{"softmax_cudnn@cuda"};

}  // namespace
}  // namespace kstudy::softmax
#endif  // KSTUDY_HAVE_CUDNN
