#pragma once
// The scoring operation's handwritten CUDA kernels seen from outside fused_cuda.cu (CUDA flavour only,
// KSTUDY_HAVE_CUDA_VARIANTS): their occupancy, and NVRTC compilation of their source, which CMake embeds
// from detail/fused_cuda_kernels.cuh, the very text nvcc compiles into fused_cuda.cu.
#include <cstdint>

#include "kstudy/cuda_escape.hpp"
#include "kstudy/views/table_shape.hpp"

namespace kstudy::scoring_cuda {

// The embedded kernel source and the kernels a load must find in it.
const cuda_escape::runtime_source& kernel_source();

// Compiles kernel_source() for sm_<compute_capability> (wall seconds), and the same followed by a module load
// on the current device (kstudy/cuda_escape.hpp).
double nvrtc_compile_seconds(int compute_capability);
cuda_escape::nvrtc_timing nvrtc_compile_and_load(int compute_capability);

// Active warps / the SM's maximum warps for the one-thread-per-row kernel of the layout at this block
// size, from cudaOccupancyMaxActiveBlocksPerMultiprocessor; in [0, 1].
double calculated_occupancy(table_layout layout, int block_size);
// The same for fused_cuda_row_major_tiled, whose shared memory per block depends on the feature count.
double calculated_occupancy_tiled(int block_size, std::int64_t features);

}  // namespace kstudy::scoring_cuda
