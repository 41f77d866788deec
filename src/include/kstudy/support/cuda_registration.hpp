#pragma once
// The fields every CUDA escape-path variant shares (handwritten CUDA, or a vendor library called directly),
// for the declarations every build compiles. A variant whose code is a .cu file is declared by a .cpp file
// beside it with the same stem and an _info suffix (transpose_cuda.cu: transpose_cuda_info.cpp), and the .cu
// file binds its class to the declared id:
//
//   // transpose_cuda_info.cpp, every build: the fields, traffic model included
//   auto info = cuda_variant(variant_info_for("naive", "transpose_cuda", "one element per thread, ..."));
//   info.rung = 1;
//   variant_declaration{std::move(info)};
//   // transpose_cuda.cu, CUDA builds only: the class
//   variant_binding<transpose_naive>{"transpose_naive@cuda"};
//
// A CPU build then knows the variant as declared but not in this build (kstudy list says so, and an experiment
// naming it runs without it). Kokkos-free and CUDA-free.
#include "kstudy/variant.hpp"

namespace kstudy {

// `info` (its name, operation, family, description, layout and traffic filled in) run by the CUDA runtime
// on device memory; written by hand unless `kind` says a vendor library (or a mix) does the work.
inline variant_info cuda_variant(variant_info info, implementation kind = implementation::handwritten_cuda) {
  info.backend = "cuda";
  info.on_device = true;
  info.implementation = kind;
  return info;
}

}  // namespace kstudy
