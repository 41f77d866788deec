# Script mode (cmake -P): writes build_info.hpp from the template with the current git state: the commit, the
# dirty flag (tracked files differ from HEAD) and, for a dirty tree, the SHA-256 of the exact bytes of
# `git diff --no-color --no-ext-diff HEAD` (tracked changes, staged or not; untracked files are not part of
# it, as they are not part of the dirty flag). The same hash from a shell, in the tree that was built:
#   git diff --no-color --no-ext-diff HEAD | sha256sum
set(KSTUDY_GIT_COMMIT "unknown")
set(KSTUDY_GIT_DIRTY "unknown")
set(KSTUDY_GIT_DIFF_SHA256 "")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE KSTUDY_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE _status OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_status STREQUAL "")
    set(KSTUDY_GIT_DIRTY "false")
  else()
    set(KSTUDY_GIT_DIRTY "true")
    # The diff goes to a file, not a variable, so that its hash is of its exact bytes (no stripping).
    set(_diff "${OUTPUT}.diff")
    execute_process(COMMAND ${GIT_EXECUTABLE} diff --no-color --no-ext-diff HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                    OUTPUT_FILE ${_diff} RESULT_VARIABLE _diff_result ERROR_QUIET)
    if(_diff_result EQUAL 0)
      file(SHA256 ${_diff} KSTUDY_GIT_DIFF_SHA256)
    else()
      set(KSTUDY_GIT_DIFF_SHA256 "unknown")
    endif()
    file(REMOVE ${_diff})
  endif()
endif()
set(CMAKE_CXX_COMPILER_ID "")
set(CMAKE_CXX_COMPILER_VERSION "")
configure_file(${TEMPLATE} ${OUTPUT}.tmp @ONLY)
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
