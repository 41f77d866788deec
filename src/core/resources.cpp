#include "kstudy/resources.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace kstudy {
namespace fs = std::filesystem;

namespace {

// One kind's folder name (beside the executable, and under share/kstudy/), its variable (the folder that comes
// first) and the folders registered for it. Function-local, so registrations from other translation units' static
// initialisers find it constructed.
struct kind_facts {
  const char* folder;
  const char* env;
  std::vector<fs::path> registered;
};
kind_facts& facts(resource_kind kind) {
  static kind_facts experiments{"experiments", "KSTUDY_EXPERIMENTS_DIR", {}};
  static kind_facts scripts{"scripts", "KSTUDY_SCRIPTS_DIR", {}};
  static kind_facts variants{"variants", "KSTUDY_VARIANTS_DIR", {}};
  switch (kind) {
    case resource_kind::experiments:
      return experiments;
    case resource_kind::variants:
      return variants;
    case resource_kind::scripts:
      break;
  }
  return scripts;
}

}  // namespace

void add_resource_dir(resource_kind kind, const std::string& dir) {
  if (!dir.empty()) facts(kind).registered.emplace_back(dir);
}

std::vector<fs::path> resource_dirs(resource_kind kind) {
  std::vector<fs::path> dirs;
  const char* env = std::getenv(facts(kind).env);
  if (env != nullptr && *env != '\0') dirs.emplace_back(env);
  for (const auto& dir : facts(kind).registered) dirs.push_back(dir);
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path() / facts(kind).folder);                              // bundle layout
    dirs.push_back(exe.parent_path() / ".." / "share" / "kstudy" / facts(kind).folder);  // install layout
  }
  return dirs;
}

}  // namespace kstudy
