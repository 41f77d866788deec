// The build tree's executables (kstudy, kstudy_bench, kstudy_tests) read the source tree's experiments/ and
// scripts/ (kstudy/resources.hpp). Only while they run from the build tree: an installed bin/kstudy (built
// from the same objects) or a GPU bundle's copy finds its own folders beside it, and must not read a source
// tree that may have moved on since it was built.
#include <filesystem>
#include <string>
#include <system_error>

#include "kstudy/resources.hpp"

namespace {

bool running_from_build_tree() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto exe = fs::weakly_canonical(fs::read_symlink("/proc/self/exe", ec), ec).string();
  if (ec) return false;
  std::string build = fs::weakly_canonical(KSTUDY_BINARY_DIR, ec).string();
  if (ec) return false;
  if (build.empty() || build.back() != '/') build += '/';
  return exe.compare(0, build.size(), build) == 0;
}

struct source_tree_registration {
  source_tree_registration() {
    if (!running_from_build_tree()) return;
    kstudy::add_resource_dir(kstudy::resource_kind::experiments, KSTUDY_SOURCE_DIR "/experiments");
    kstudy::add_resource_dir(kstudy::resource_kind::scripts, KSTUDY_SOURCE_DIR "/scripts");
    kstudy::add_resource_dir(kstudy::resource_kind::variants, KSTUDY_SOURCE_DIR "/variants");
  }
};
const source_tree_registration register_source_tree;

}  // namespace
