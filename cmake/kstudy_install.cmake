# cmake --install: kstudy as a library of a user's own project (find_package(kstudy) + kstudy_add_study; the
# README's "Study your own kernel", examples/out_of_tree/). Under the prefix:
#   bin/kstudy, bin/kstudy_bench            the CLI and the benchmark with the built-in operations
#   include/kstudy/                         the plug-in API (src/include, views/include), among them
#                                           kstudy/support/: what a plug-in's variants build on (Kokkos
#                                           support, the CUDA stream base, device buffers, the cuBLAS check);
#                                           not kstudy/runner/, the runner's internals (component
#                                           runner_headers, installed only when asked for)
#   lib/libkstudy_*.a                       views, core, archive (cuda flavour: cuda_tools)
#   lib/kstudy/objects-<config>/            the OBJECT libraries' objects: runner, variants, cli, bench_main
#   lib/cmake/kstudy/                       kstudyConfig.cmake, its version file, the targets, kstudyStudy.cmake
#   share/kstudy/experiments/               the built-in experiments
#   share/kstudy/scripts/                   kstudy_report.py and its kstudy_py package (report, compare, rungs)
#   share/kstudy/variants/                  the Python rungs (<operation>/python_*.py)
#
# Why the OBJECT libraries are installed as objects: operations, variants and experiment kinds register
# themselves from static initialisers, and nothing refers to those objects by symbol. In a static archive the
# linker would drop them (it takes only members that resolve an undefined symbol) unless every consumer linked
# the archive whole: $<LINK_LIBRARY:WHOLE_ARCHIVE,...> needs CMake 3.24 (kstudy supports 3.21), and
# -Wl,--whole-archive by hand is linker-specific and fragile under reordering. A shared library would need its
# static dependencies (Kokkos, Kokkos Kernels: non-PIC archives) rebuilt position-independent, and a second
# copy of Kokkos' global state beside the user's. install(TARGETS ... OBJECTS DESTINATION) (CMake >= 3.14)
# exports the objects themselves: a target that links an imported OBJECT library links every one of its
# objects, as in the build tree. Objects reach only targets that link the OBJECT library directly (not through
# another library), which kstudy_add_study does.
include(CMakePackageConfigHelpers)

set(KSTUDY_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kstudy)
set(kstudy_exported_targets kstudy_views kstudy_core kstudy_archive kstudy_runner kstudy_variant_support
                            kstudy_variants kstudy_cli kstudy_bench_main)
if(TARGET kstudy_cuda_tools)
  list(APPEND kstudy_exported_targets kstudy_cuda_tools)
endif()
foreach(target IN LISTS kstudy_exported_targets)
  string(REGEX REPLACE "^kstudy_" "" export_name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})  # kstudy::core, kstudy::cli, ...
endforeach()
# A sanitized build's objects need the sanitizer runtime wherever they are linked.
if(KSTUDY_SANITIZE)
  target_link_options(kstudy_core INTERFACE -fsanitize=${KSTUDY_SANITIZE})
endif()
install(TARGETS ${kstudy_exported_targets} EXPORT kstudyTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        OBJECTS DESTINATION ${CMAKE_INSTALL_LIBDIR}/kstudy)
install(TARGETS kstudy kstudy_bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The plug-in API only: kstudy/runner/ holds the runner's internals (the archive, profile, merge, submit, the
# environment record), which a study's plug-ins never include; its objects are installed compiled (above), so a
# study executable needs none of its headers. Whoever writes a program of their own against the runner installs
# them on purpose: cmake --install BUILD --component runner_headers.
install(DIRECTORY src/include/kstudy views/include/kstudy DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "runner" EXCLUDE)
install(DIRECTORY src/include/kstudy/runner DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kstudy
        COMPONENT runner_headers EXCLUDE_FROM_ALL FILES_MATCHING PATTERN "*.hpp")

set(KSTUDY_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/kstudy)
install(DIRECTORY experiments/ DESTINATION ${KSTUDY_INSTALL_DATADIR}/experiments FILES_MATCHING PATTERN "*.json")
install(PROGRAMS scripts/kstudy_report.py DESTINATION ${KSTUDY_INSTALL_DATADIR}/scripts)
install(DIRECTORY scripts/kstudy_py DESTINATION ${KSTUDY_INSTALL_DATADIR}/scripts
        PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)
# The Python rungs (kstudy/runner/python_rungs.hpp): variants/<operation>/python_*.py, nothing else of variants/.
install(DIRECTORY variants/ DESTINATION ${KSTUDY_INSTALL_DATADIR}/variants FILES_MATCHING PATTERN "python_*.py"
        PATTERN "__pycache__" EXCLUDE)

# What kstudyConfig.cmake checks a user's project against: the Kokkos and Kokkos Kernels the objects were
# compiled with (real paths, so a symlinked prefix compares equal).
get_filename_component(KSTUDY_KOKKOS_DIR "${Kokkos_DIR}" REALPATH)
get_filename_component(KSTUDY_KOKKOSKERNELS_DIR "${KokkosKernels_DIR}" REALPATH)
install(EXPORT kstudyTargets NAMESPACE kstudy:: DESTINATION ${KSTUDY_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/kstudyConfig.cmake.in ${PROJECT_BINARY_DIR}/kstudyConfig.cmake
                              INSTALL_DESTINATION ${KSTUDY_INSTALL_CMAKEDIR}
                              PATH_VARS KSTUDY_INSTALL_DATADIR)
# 0.x: a new minor version may change the interfaces a study compiles against.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kstudyConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kstudyConfig.cmake ${PROJECT_BINARY_DIR}/kstudyConfigVersion.cmake
              cmake/kstudyStudy.cmake
        DESTINATION ${KSTUDY_INSTALL_CMAKEDIR})
