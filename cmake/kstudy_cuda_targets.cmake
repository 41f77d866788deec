# What a .cu file needs beyond the build's target (KSTUDY_CUDA_ARCH), declared in the file itself by one line:
#
#   // kstudy-build: also sm_90a
#
# An arch-specific target ("a": wgmma, setmaxnreg, TMA multicast) exists for exactly one compute capability.
# Where the build targets that capability, the file is also compiled for it (nvcc 13 assembles sm_90a only in
# the -gencode form; -arch=sm_90a also runs a plain sm_90 pass that rejects those instructions) and gets
# KSTUDY_HAVE_SM90A=1, with which it binds its variants; elsewhere it compiles for the plain target alone, its
# arch-specific kernels empty (guarded by __CUDA_ARCH_FEAT_SM90_ALL), and its variants stay declared but not
# in this build. Code that only needs a newer target (sm_80's cp.async, mma.sync on 16-bit inputs) needs no
# line here: it is guarded in the source (kstudy/support/cuda_arch.hpp) and its variants declare the capability.
function(kstudy_cuda_arch_specific_sources)
  foreach(source IN LISTS ARGN)
    file(STRINGS ${source} markers REGEX "^// kstudy-build: also sm_[0-9]+a$")
    foreach(marker IN LISTS markers)
      string(REGEX REPLACE "^// kstudy-build: also sm_([0-9]+)a$" "\\1" capability "${marker}")
      if(capability STREQUAL KSTUDY_CUDA_ARCH)
        set_property(SOURCE ${source} APPEND PROPERTY COMPILE_OPTIONS
                     "-gencode=arch=compute_${capability}a,code=sm_${capability}a")
        set_property(SOURCE ${source} APPEND PROPERTY COMPILE_DEFINITIONS KSTUDY_HAVE_SM${capability}A=1)
      endif()
    endforeach()
  endforeach()
endfunction()
