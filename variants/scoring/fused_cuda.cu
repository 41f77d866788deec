// fused_cuda: the handwritten CUDA escape path. Plain CUDA runtime code (no Kokkos) around the kernels of
// detail/fused_cuda_kernels.cuh, which NVRTC also compiles at run time (fused_cuda_nvrtc.cu).
//
// One class template serves every kernel: the layout (and, for row-major, the tiled kernel) only picks
// which extern "C" kernel is launched. Each variant queues its work on its own non-blocking stream and
// launches one resident wave of blocks that grid-stride over the rows (or tiles of rows).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "detail/fused_cuda_kernels.cuh"
#include "kstudy/cuda_escape.hpp"
#include "scoring/fused_cuda.hpp"
#include "scoring/scoring_variant.hpp"
#include "kstudy/support/cuda_buffers.hpp"
#include "kstudy/support/cuda_variant.hpp"

// The plain feature-major kernel as a user writes it without kstudy's argument struct: individual
// __restrict__ pointers, 32-bit indices (the host refuses tables too large for them), no count.
// Beside plain_cuda_feature_major (same grid, same carveout, the same kstudy_count_flags after it) it tells
// what the struct, the 64-bit index math and the missing __restrict__ of that kernel cost. In sm_90 SASS both
// loops are unrolled by four at 30 registers and issue their four x loads before the first use (with a
// 64-bit trip count plain_cuda_feature_major left one x load in flight per thread). nvcc only: NVRTC does not
// need it.
extern "C" __global__ void plain_minimal_cuda_feature_major(const float* __restrict__ x, const float* __restrict__ mean,
                                                            const float* __restrict__ inv_std,
                                                            const float* __restrict__ weight, float* __restrict__ score,
                                                            unsigned char* __restrict__ flag, int rows, int features,
                                                            float clip, float threshold) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.0f;
  for (int j = 0; j < features; ++j) {
    const float z = kstudy_clamp((x[j * rows + r] - mean[j]) * inv_std[j], clip);  // NaN passes through
    acc += z * weight[j];
  }
  score[r] = acc;
  flag[r] = acc > threshold;  // NaN compares false: flag 0
}

namespace kstudy {
namespace {

using kernel_fn = void (*)(kstudy_fused_args);

// Which kernel of a layout: the one-thread-per-row kernels that stride over one resident wave, the
// row-major tile kernel, or the seed's plain kernel (a thread per row, as many blocks as rows need), as
// kstudy writes it (the argument struct) or minimal (individual arguments, see above).
enum class kernel_kind { strided, tiled, plain, plain_minimal };

constexpr int default_block_size = 256;

// The strided and tiled kinds; plan_launch picks the plain kinds' kernels itself.
kernel_fn kernel_for(table_layout layout, kernel_kind kind) {
  if (kind == kernel_kind::tiled) return fused_cuda_row_major_tiled;
  switch (layout) {
    case table_layout::feature_major:
      return fused_cuda_feature_major;
    case table_layout::padded_row_major:
      return fused_cuda_padded;
    case table_layout::row_major:
      break;
  }
  return fused_cuda_row_major;
}

// Kernel is a kernel's function pointer or its entry as const void* (kernels of other signatures).
template <class Kernel>
int resident_blocks_per_sm(Kernel kernel, int block, int smem_bytes) {
  int blocks = 0;
  KSTUDY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, block, smem_bytes));
  return blocks;
}

template <class Kernel>
double occupancy(Kernel kernel, int block, int smem_bytes) {
  const int warps = resident_blocks_per_sm(kernel, block, smem_bytes) * (block / 32);
  return double(warps) / double(device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor) / 32);
}

// Each kernel states its own split of the SM's unified L1/shared memory: as much L1 as the shared memory
// of its resident blocks leaves. Without a preference of its own a kernel gets the device-wide one, and
// Kokkos 3.4's initialisation sets that to "prefer shared" (cudaDeviceSetCacheConfig) for the whole
// process: on the H200 the same binary's one-thread-per-row kernels then ran 1.2-4.4x slower than in a
// Kokkos 4.6 process, which sets a carveout per Kokkos kernel instead (data/h200-2026-11-30-s4).
template <class Kernel>
void prefer_l1(Kernel kernel, int block, int smem_bytes) {
  int carveout = cudaSharedmemCarveoutMaxL1;
  if (smem_bytes > 0) {
    KSTUDY_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                           cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared));
    cudaFuncAttributes attributes{};
    KSTUDY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)));
    const std::int64_t per_block = std::int64_t(smem_bytes) + std::int64_t(attributes.sharedSizeBytes) +
                                   device_attribute(cudaDevAttrReservedSharedMemoryPerBlock);
    const std::int64_t needed = per_block * resident_blocks_per_sm(kernel, block, smem_bytes);
    const std::int64_t per_sm = device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
    carveout = static_cast<int>(std::min<std::int64_t>(100, (100 * needed + per_sm - 1) / per_sm));
  }
  KSTUDY_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                         cudaFuncAttributePreferredSharedMemoryCarveout, carveout));
}

struct launch_geometry {
  const void* kernel = nullptr;  // the layout's kernel, or the variant of it the shape needs
  int grid = 0;
  int block = 0;
  int smem_bytes = 0;
  int rows_per_thread = 1;
  int count_grid = 0;  // the plain kernel's flag-count kernel: blocks of 256, at most one resident wave
};

// One resident wave (or fewer blocks when there is less work): the kernels grid-stride, so bigger grids
// would only add flagged-count atomics.
launch_geometry plan_launch(kernel_kind kind, const table_shape& shape, int block) {
  launch_geometry g;
  g.block = block;
  if (kind == kernel_kind::plain || kind == kernel_kind::plain_minimal) {  // as the seed wrote it: no wave sizing
    g.kernel = kind == kernel_kind::plain ? reinterpret_cast<const void*>(plain_cuda_feature_major)
                                          : reinterpret_cast<const void*>(plain_minimal_cuda_feature_major);
    prefer_l1(g.kernel, block, 0);
    g.grid = static_cast<int>((shape.rows + block - 1) / block);
    prefer_l1(kstudy_count_flags, 256, 0);
    const std::int64_t count_resident = std::int64_t(resident_blocks_per_sm(kstudy_count_flags, 256, 0)) *
                                        device_attribute(cudaDevAttrMultiProcessorCount);
    g.count_grid = static_cast<int>(std::max<std::int64_t>(1, std::min(count_resident, (shape.rows + 255) / 256)));
    return g;
  }
  kernel_fn kernel = kernel_for(shape.layout, kind);
  const bool tiled = kind == kernel_kind::tiled;
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  // The feature-major kernel takes four rows per thread (16-byte loads) when rows are a multiple of 4
  // and there are still enough quads to give every resident thread one; with fewer (262,144 x 256:
  // 65,536 quads for 135,168 resident threads) it ran at 24% achieved occupancy, so wide, short tables
  // take one row per thread instead.
  if (kernel == fused_cuda_feature_major && shape.rows % 4 == 0 &&
      shape.rows / 4 >= std::int64_t(resident_blocks_per_sm(kernel, block, 0)) * sms * block)
    g.rows_per_thread = 4;
  else if (kernel == fused_cuda_feature_major)
    kernel = fused_cuda_feature_major_rows;
  g.kernel = reinterpret_cast<const void*>(kernel);
  const std::int64_t threads_needed = shape.rows / g.rows_per_thread;
  std::int64_t work_blocks = (threads_needed + block - 1) / block;
  if (tiled) {
    const kstudy_tile_plan plan = kstudy_plan_tile(shape.features, block, true);  // cudaMalloc: 256-byte aligned
    g.smem_bytes = plan.smem_bytes;
    const std::int64_t rows_per_step = plan.mode == kstudy_global_rows ? block / 32 * kstudy_warp_rows : plan.tile_rows;
    work_blocks = (shape.rows + rows_per_step - 1) / rows_per_step;
  }
  prefer_l1(kernel, block, g.smem_bytes);
  const int per_sm = resident_blocks_per_sm(kernel, block, g.smem_bytes);
  if (per_sm < 1)
    throw std::runtime_error("fused_cuda: a block of " + std::to_string(block) + " threads does not fit an SM");
  const std::int64_t resident = std::int64_t(per_sm) * sms;
  // As many waves of work as needed, spread evenly over the grid: every block strides over the same
  // number of rows (262,144 rows on 660 blocks of 256 left some threads two rows and others one).
  const std::int64_t waves = std::max<std::int64_t>(1, (work_blocks + resident - 1) / resident);
  g.grid = static_cast<int>(std::max<std::int64_t>(1, (work_blocks + waves - 1) / waves));
  return g;
}

template <table_layout L, kernel_kind Kind = kernel_kind::strided>
class fused_cuda final : public scoring_variant {
  static_assert(Kind != kernel_kind::tiled || L == table_layout::row_major, "the tiled kernel reads row-major tables");
  static constexpr bool plain_kind = Kind == kernel_kind::plain || Kind == kernel_kind::plain_minimal;
  static_assert(!plain_kind || L == table_layout::feature_major, "the plain kernels read feature-major tables");

 public:
  fused_cuda() = default;
  fused_cuda(const fused_cuda&) = delete;
  fused_cuda& operator=(const fused_cuda&) = delete;
  ~fused_cuda() override {
    release();
    if (m_stream != nullptr) cudaStreamDestroy(m_stream);
  }

  void prepare_table(const scoring_problem& problem, const run_options& options) override {
    problem.validate();
    if (problem.shape.layout != L)
      throw std::invalid_argument("fused_cuda expects a " + std::string(to_string(L)) + " table, got " +
                                  std::string(to_string(problem.shape.layout)));
    const int block = options.block_size == 0 ? default_block_size : options.block_size;
    if (block < 32 || block > 1024 || block % 32 != 0)
      throw std::invalid_argument("block_size must be a multiple of 32 in [32, 1024], got " +
                                  std::to_string(options.block_size));
    // Its int row index runs up to rows + block - 2, its element index to rows * features - 1.
    constexpr std::int64_t int_elements = std::numeric_limits<int>::max() - 1024;
    if (Kind == kernel_kind::plain_minimal && problem.shape.allocated_elements() > int_elements)
      throw std::invalid_argument("plain_minimal_cuda_feature_major indexes with int: at most " +
                                  std::to_string(int_elements) + " table elements");
    release();
    if (m_stream == nullptr) KSTUDY_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
    m_shape = problem.shape;
    m_geometry = plan_launch(Kind, m_shape, block);
    const std::int64_t rows = m_shape.rows, features = m_shape.features;
    device_alloc(m_x, m_shape.allocated_elements());
    device_alloc(m_mean, features);
    device_alloc(m_inv_std, features);
    device_alloc(m_weight, features);
    device_alloc(m_score, rows);
    device_alloc(m_flag, rows);
    device_alloc(m_counters, 2);  // the running count and the finished-block ticket
    KSTUDY_CUDA_CHECK(cudaHostAlloc(&m_host_counter, sizeof(unsigned long long), cudaHostAllocMapped));
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_counters, 0, 2 * sizeof(unsigned long long), m_stream));
    void* mapped_counter = nullptr;
    KSTUDY_CUDA_CHECK(cudaHostGetDevicePointer(&mapped_counter, m_host_counter, 0));
    const std::size_t vector_bytes = static_cast<std::size_t>(features) * sizeof(float);
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_mean, problem.mean.data, vector_bytes, cudaMemcpyHostToDevice, m_stream));
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_inv_std, problem.inv_std.data, vector_bytes, cudaMemcpyHostToDevice, m_stream));
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_weight, problem.weight.data, vector_bytes, cudaMemcpyHostToDevice, m_stream));
    m_args = kstudy_fused_args{m_x,
                               m_mean,
                               m_inv_std,
                               m_weight,
                               m_score,
                               m_flag,
                               m_counters,
                               reinterpret_cast<unsigned int*>(m_counters + 1),
                               static_cast<unsigned long long*>(mapped_counter),
                               rows,
                               features,
                               m_shape.pitch,
                               problem.clip,
                               problem.threshold,
                               m_geometry.rows_per_thread};
    upload_table(problem.x);  // fences the stream, vectors included
    m_flagged = -1;
  }

  // One kernel on the stream: its last block writes the count to mapped host memory (see
  // kstudy_add_flagged), so no memset or count copy is queued around it.
  void run() override {
    enqueue_run();
    wait();
  }

  void upload_table(const float* host_x) override {
    const auto bytes = static_cast<std::size_t>(m_shape.allocated_elements()) * sizeof(float);
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_x, host_x, bytes, cudaMemcpyHostToDevice, m_stream));
    KSTUDY_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  }

  void download_scores(float* host_score, std::uint8_t* host_flag) override {
    const auto rows = static_cast<std::size_t>(m_shape.rows);
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(host_score, m_score, rows * sizeof(float), cudaMemcpyDeviceToHost, m_stream));
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(host_flag, m_flag, rows, cudaMemcpyDeviceToHost, m_stream));
    KSTUDY_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  }

  std::int64_t flagged_count() const override { return m_flagged; }

  void poison() override {
    const auto rows = static_cast<std::size_t>(m_shape.rows);
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_score, 0xFF, rows * sizeof(float), m_stream));  // all-ones: a NaN
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_flag, 0xAB, rows, m_stream));
    KSTUDY_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    m_flagged = -1;
  }

  void* stream() const override { return static_cast<void*>(m_stream); }

  double calculated_occupancy() const override {
    return occupancy(m_geometry.kernel, m_geometry.block, m_geometry.smem_bytes);
  }

  // Queued pieces for the pipelined one-shot: the same calls without the stream synchronisation.
  bool queues_asynchronously() const override { return true; }
  void enqueue_upload_table(const float* host_x) override {
    const auto bytes = static_cast<std::size_t>(m_shape.allocated_elements()) * sizeof(float);
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(m_x, host_x, bytes, cudaMemcpyHostToDevice, m_stream));
  }
  bool can_upload_columns() const override { return L == table_layout::feature_major; }
  void enqueue_upload_columns(const float* first, std::int64_t source_rows) override {
    if (!can_upload_columns()) scoring_variant::enqueue_upload_columns(first, source_rows);
    const auto width = static_cast<std::size_t>(m_shape.rows) * sizeof(float);
    KSTUDY_CUDA_CHECK(cudaMemcpy2DAsync(m_x, width, first, static_cast<std::size_t>(source_rows) * sizeof(float), width,
                                        static_cast<std::size_t>(m_shape.features), cudaMemcpyHostToDevice, m_stream));
  }
  void enqueue_run() override {
    void* args[] = {&m_args};
    if constexpr (Kind == kernel_kind::plain_minimal) {
      int rows = static_cast<int>(m_shape.rows), features = static_cast<int>(m_shape.features);
      void* minimal_args[] = {&m_args.x,    &m_args.mean, &m_args.inv_std, &m_args.weight, &m_args.score,
                              &m_args.flag, &rows,        &features,       &m_args.clip,   &m_args.threshold};
      KSTUDY_CUDA_CHECK(cudaLaunchKernel(m_geometry.kernel, dim3(m_geometry.grid), dim3(m_geometry.block), minimal_args,
                                         0, m_stream));
    } else {
      KSTUDY_CUDA_CHECK(cudaLaunchKernel(m_geometry.kernel, dim3(m_geometry.grid), dim3(m_geometry.block), args,
                                         m_geometry.smem_bytes, m_stream));
    }
    KSTUDY_CUDA_CHECK(cudaGetLastError());
    if constexpr (plain_kind) {  // the flagged count, by a second kernel (see the plain kernel)
      KSTUDY_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(kstudy_count_flags), dim3(m_geometry.count_grid),
                                         dim3(256), args, 0, m_stream));
      KSTUDY_CUDA_CHECK(cudaGetLastError());
    }
  }
  void enqueue_download_scores(float* host_score, std::uint8_t* host_flag) override {
    const auto rows = static_cast<std::size_t>(m_shape.rows);
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(host_score, m_score, rows * sizeof(float), cudaMemcpyDeviceToHost, m_stream));
    KSTUDY_CUDA_CHECK(cudaMemcpyAsync(host_flag, m_flag, rows, cudaMemcpyDeviceToHost, m_stream));
  }
  void wait() override {
    KSTUDY_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    m_flagged = static_cast<std::int64_t>(*static_cast<volatile unsigned long long*>(m_host_counter));
  }

 private:
  // Frees the buffers, never throws (also runs from the destructor); the stream is kept for reuse.
  void release() noexcept {
    for (void* p : {static_cast<void*>(m_x), static_cast<void*>(m_mean), static_cast<void*>(m_inv_std),
                    static_cast<void*>(m_weight), static_cast<void*>(m_score), static_cast<void*>(m_flag),
                    static_cast<void*>(m_counters)})
      if (p != nullptr) cudaFree(p);
    if (m_host_counter != nullptr) cudaFreeHost(m_host_counter);
    m_x = m_mean = m_inv_std = m_weight = m_score = nullptr;
    m_flag = nullptr;
    m_counters = m_host_counter = nullptr;
  }

  cudaStream_t m_stream = nullptr;
  table_shape m_shape{};
  launch_geometry m_geometry{};
  kstudy_fused_args m_args{};
  float* m_x = nullptr;
  float* m_mean = nullptr;
  float* m_inv_std = nullptr;
  float* m_weight = nullptr;
  float* m_score = nullptr;
  std::uint8_t* m_flag = nullptr;
  unsigned long long* m_counters = nullptr;      // device: running count, finished blocks
  unsigned long long* m_host_counter = nullptr;  // mapped pinned: the last launch's count
  std::int64_t m_flagged = -1;
};

// Declared with their fields in fused_cuda_info.cpp, which every build compiles.
const variant_binding<fused_cuda<table_layout::row_major>> bind_fused_cuda_row_major{"fused_cuda_row_major@cuda"};
const variant_binding<fused_cuda<table_layout::feature_major>> bind_fused_cuda_feature_major{
    "fused_cuda_feature_major@cuda"};
const variant_binding<fused_cuda<table_layout::padded_row_major>> bind_fused_cuda_padded{"fused_cuda_padded@cuda"};
const variant_binding<fused_cuda<table_layout::feature_major, kernel_kind::plain>> bind_plain_cuda_feature_major{
    "plain_cuda_feature_major@cuda"};
const variant_binding<fused_cuda<table_layout::feature_major, kernel_kind::plain_minimal>>
    bind_plain_minimal_cuda_feature_major{"plain_minimal_cuda_feature_major@cuda"};
const variant_binding<fused_cuda<table_layout::row_major, kernel_kind::tiled>> bind_fused_cuda_row_major_tiled{
    "fused_cuda_row_major_tiled@cuda"};

}  // namespace

namespace scoring_cuda {

double calculated_occupancy(table_layout layout, int block_size) {
  return occupancy(kernel_for(layout, kernel_kind::strided), block_size, 0);
}

double calculated_occupancy_tiled(int block_size, std::int64_t features) {
  return occupancy(kernel_for(table_layout::row_major, kernel_kind::tiled), block_size,
                   kstudy_plan_tile(features, block_size, true).smem_bytes);
}

}  // namespace scoring_cuda
}  // namespace kstudy
