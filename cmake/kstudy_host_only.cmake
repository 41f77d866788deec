# Sources that need no CUDA compiler, sent to the host compiler directly where the compiler is nvcc_wrapper.
#
# With a CUDA-enabled Kokkos the project's compiler is nvcc_wrapper, which runs every source through nvcc as CUDA:
# its device front end over all the host code. A cold CI run's cuda stage spent 3,290 s compiling 144 sources, 1,176
# of them on the 70 that include no Kokkos and no CUDA header (docs/performance_notes.md, session 22).
# `nvcc_wrapper --host-only` (every Kokkos since 3.x) compiles such a source with the host compiler and the same
# flags: json_sink.cpp took 20.5 s through nvcc and 7.9 s so.
#
# Which sources qualify is derived here from the sources themselves, never listed by hand: a source is host-only when
# it is a .cpp file and neither it nor any project header it includes (transitively, resolved against the project's
# include roots) includes a Kokkos, CUDA or vendor header, or mentions __CUDACC__, __CUDA_ARCH__, __global__ or
# __device__ (a header that changes with the compiler would otherwise compile differently in two sources). Includes
# inside #if count as present: a source is host-only only when that holds on every branch. A wrong verdict cannot
# pass silently: Kokkos refuses a host compile of its CUDA configuration, and the host compiler refuses CUDA syntax.
# Every scanned file is a configure dependency, so an edit that changes a verdict reconfigures.

set(kstudy_host_only_roots ${PROJECT_SOURCE_DIR}/src/include ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/variants
                           ${PROJECT_SOURCE_DIR}/views/include ${PROJECT_SOURCE_DIR}/tests ${PROJECT_BINARY_DIR}/generated)
# System headers that need nvcc (or that a CUDA build reaches only through nvcc): Kokkos, Kokkos Kernels, CUDA and
# its libraries.
set(kstudy_device_header_regex "^(Kokkos|KokkosKernels|KokkosBlas|KokkosSparse|KokkosBatched|impl/Kokkos|cuda|cub/|cublas|cudnn|curand|cufft|cusparse|nvrtc|mma\\.h|crt/|thrust/)")
set(kstudy_device_text_regex "__CUDACC__|__CUDA_ARCH__|__global__|__device__")

# Sets <out> to TRUE when <file> or what it includes needs a CUDA compiler. Verdicts are memoised per file.
function(kstudy_needs_device file out)
  get_property(known GLOBAL PROPERTY "kstudy_device_verdict:${file}" SET)
  if(known)
    get_property(verdict GLOBAL PROPERTY "kstudy_device_verdict:${file}")
    set(${out} ${verdict} PARENT_SCOPE)
    return()
  endif()
  # Assume host while this file is being scanned: an include cycle then ends here instead of recursing.
  set_property(GLOBAL PROPERTY "kstudy_device_verdict:${file}" FALSE)
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  set(verdict FALSE)
  file(STRINGS ${file} device_text REGEX "${kstudy_device_text_regex}" LIMIT_COUNT 1)
  if(device_text)
    set(verdict TRUE)
  endif()
  file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"][^>\"]+[>\"]")
  get_filename_component(here ${file} DIRECTORY)
  foreach(line IN LISTS includes)
    if(verdict)
      break()
    endif()
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"].*" "\\1" name "${line}")
    set(found "")
    foreach(root IN ITEMS ${here} ${kstudy_host_only_roots})
      if(EXISTS ${root}/${name} AND NOT IS_DIRECTORY ${root}/${name})
        get_filename_component(found ${root}/${name} ABSOLUTE)
        break()
      endif()
    endforeach()
    if(found)
      kstudy_needs_device(${found} nested)
      if(nested)
        set(verdict TRUE)
      endif()
    elseif(name MATCHES "${kstudy_device_header_regex}")
      set(verdict TRUE)
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "kstudy_device_verdict:${file}" ${verdict})
  set(${out} ${verdict} PARENT_SCOPE)
endfunction()

# Every library and executable the project defines, in every directory under `dir`.
function(kstudy_project_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirectories DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    kstudy_project_targets(${subdirectory} nested)
    list(APPEND targets ${nested})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Marks the host-only .cpp sources of every target of the project (nvcc_wrapper only; a no-op otherwise). Called
# once, after the last target is defined.
function(kstudy_compile_host_only)
  if(NOT CMAKE_CXX_COMPILER MATCHES "nvcc_wrapper$")
    return()
  endif()
  kstudy_project_targets(${PROJECT_SOURCE_DIR} targets)
  set(host 0)
  set(total 0)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    # nvcc_wrapper --host-only re-splits its command line, which breaks a definition holding quotes
    # (-DKSTUDY_SOURCE_DIR=\"...\"): such a target or source stays with nvcc (kstudy_tests, for now: its 12 sources
    # free of device code would move with its quoted definitions in a generated header).
    get_target_property(definitions ${target} COMPILE_DEFINITIONS)
    if(definitions MATCHES "\"")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    foreach(source IN LISTS sources)
      if(NOT source MATCHES "\\.cpp$")
        continue()
      endif()
      get_filename_component(path ${source} ABSOLUTE BASE_DIR ${source_dir})
      math(EXPR total "${total} + 1")
      get_source_file_property(source_definitions ${path} TARGET_DIRECTORY ${target} COMPILE_DEFINITIONS)
      if(source_definitions MATCHES "\"")
        continue()
      endif()
      kstudy_needs_device(${path} device)
      if(NOT device)
        set_property(SOURCE ${path} TARGET_DIRECTORY ${target} APPEND PROPERTY COMPILE_OPTIONS --host-only)
        math(EXPR host "${host} + 1")
      endif()
    endforeach()
  endforeach()
  message(STATUS "kstudy: ${host} of ${total} C++ sources compile host-only (nvcc_wrapper --host-only)")
endfunction()
