# Build provenance baked into the binaries and written to every archive's root attributes. The git
# commit and dirty flag are read at build time (not configure time), so a binary names the tree it was
# built from; the header is rewritten only when its content changes.
set(KSTUDY_FLAVOUR cpu)
set(KSTUDY_BUILT_CUDA_ARCH 0)
if(KSTUDY_ENABLE_CUDA)
  set(KSTUDY_FLAVOUR cuda)
  set(KSTUDY_BUILT_CUDA_ARCH ${KSTUDY_CUDA_ARCH})
endif()
set(_kstudy_build_info ${PROJECT_BINARY_DIR}/generated/kstudy/build_info.hpp)
add_custom_target(kstudy_build_info ALL
  COMMAND ${CMAKE_COMMAND}
    -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${_kstudy_build_info}
    -DTEMPLATE=${PROJECT_SOURCE_DIR}/src/build_info.hpp.in
    -DPROJECT_VERSION=${PROJECT_VERSION} -DKSTUDY_FLAVOUR=${KSTUDY_FLAVOUR}
    -DKSTUDY_BUILT_CUDA_ARCH=${KSTUDY_BUILT_CUDA_ARCH}
    "-DCXX_COMPILER=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} (${CMAKE_CXX_COMPILER})"
    -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE} -DKokkos_DIR=${Kokkos_DIR}
    -P ${PROJECT_SOURCE_DIR}/cmake/kstudy_write_build_info.cmake
  BYPRODUCTS ${_kstudy_build_info}
  COMMENT "kstudy: build provenance"
  VERBATIM)
