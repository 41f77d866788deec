#pragma once
// Files the tests read from the source tree (fixtures, malformed experiments). Found beside the test
// executable first: a GPU bundle carries them there in the same layout (scripts/make_gpu_bundle.sh), so a
// bundle built in one folder passes its suite from another machine's folder; else in the source tree the
// build came from.
#include <filesystem>
#include <string>
#include "kstudy_test_paths.hpp"  // KSTUDY_SOURCE_DIR and the build's executables (tests/CMakeLists.txt)

inline std::filesystem::path source_file(const std::string& relative) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = exe.parent_path() / relative;
    if (std::filesystem::exists(beside, ec)) return beside;
  }
  return std::filesystem::path(KSTUDY_SOURCE_DIR) / relative;
}

// The kstudy executable: beside the test binary in a GPU bundle, else where CMake built it (KSTUDY_EXE).
inline std::string kstudy_exe() {
  std::error_code ec;
  const auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "kstudy";
  if (!ec && std::filesystem::is_regular_file(beside, ec)) return beside.string();
  return KSTUDY_EXE;
}
