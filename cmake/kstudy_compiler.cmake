# Runs before project(): for the CUDA flavour the C++ compiler must be Kokkos' nvcc_wrapper, and for a
# bootstrapped Kokkos we need its prefix before find_package can look for it.
#
# Order of preference for Kokkos: what the user gave (Kokkos_ROOT, CMAKE_PREFIX_PATH; checked by
# find_package after project()), then the bootstrap cache. The bootstrap is only run here for the CUDA
# flavour, where the compiler depends on it; the CPU flavour bootstraps after find_package failed.

function(kstudy_run_bootstrap flavour out_prefix)
  set(_args --no-packages --print-prefix --flavour ${flavour})
  if(flavour STREQUAL "cuda")
    list(APPEND _args --arch ${KSTUDY_CUDA_ARCH})
  elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # A clang build takes a clang-built Kokkos: one OpenMP runtime (LLVM's) in the process, not two.
    list(APPEND _args --cxx clang++)
  endif()
  message(STATUS "kstudy: bootstrapping Kokkos (${flavour}); first time builds it, later reuses the cache")
  execute_process(
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../scripts/bootstrap.sh ${_args}
    OUTPUT_VARIABLE _prefix
    ERROR_VARIABLE _log
    RESULT_VARIABLE _rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "kstudy: Kokkos bootstrap failed:\n${_log}\n"
                        "Point -DKokkos_ROOT= at an installed Kokkos to skip the bootstrap.")
  endif()
  set(${out_prefix} "${_prefix}" PARENT_SCOPE)
endfunction()

if(KSTUDY_ENABLE_CUDA AND NOT CMAKE_CXX_COMPILER)
  if(NOT Kokkos_ROOT AND DEFINED ENV{Kokkos_ROOT})
    set(Kokkos_ROOT "$ENV{Kokkos_ROOT}")
  endif()
  if(Kokkos_ROOT AND EXISTS "${Kokkos_ROOT}/bin/nvcc_wrapper")
    set(CMAKE_CXX_COMPILER "${Kokkos_ROOT}/bin/nvcc_wrapper" CACHE FILEPATH "C++ compiler")
  elseif(NOT Kokkos_ROOT AND KSTUDY_BOOTSTRAP_KOKKOS)
    kstudy_run_bootstrap(cuda _kstudy_kokkos_prefix)
    set(Kokkos_ROOT "${_kstudy_kokkos_prefix}" CACHE PATH "Kokkos install prefix" FORCE)
    set(KokkosKernels_ROOT "${_kstudy_kokkos_prefix}" CACHE PATH "Kokkos Kernels install prefix" FORCE)
    set(CMAKE_CXX_COMPILER "${_kstudy_kokkos_prefix}/bin/nvcc_wrapper" CACHE FILEPATH "C++ compiler")
  else()
    message(FATAL_ERROR "kstudy: the CUDA flavour needs Kokkos' nvcc_wrapper as C++ compiler: pass "
                        "-DCMAKE_CXX_COMPILER=<kokkos>/bin/nvcc_wrapper (or a Kokkos_ROOT that has bin/nvcc_wrapper)")
  endif()
  # nvcc_wrapper calls nvcc by name.
  if(EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{PATH} "$ENV{PATH}:/usr/local/cuda/bin")
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
endif()
