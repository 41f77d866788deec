#include "kstudy/resources.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace kstudy {
namespace fs = std::filesystem;

namespace {

// Function-local, so registrations from other translation units' static initialisers find it constructed.
std::vector<fs::path>& registered(resource_kind kind) {
  static std::vector<fs::path> experiments, scripts;
  return kind == resource_kind::experiments ? experiments : scripts;
}

const char* folder_name(resource_kind kind) { return kind == resource_kind::experiments ? "experiments" : "scripts"; }

}  // namespace

void add_resource_dir(resource_kind kind, const std::string& dir) {
  if (!dir.empty()) registered(kind).emplace_back(dir);
}

std::vector<fs::path> resource_dirs(resource_kind kind) {
  std::vector<fs::path> dirs;
  const char* env = std::getenv(kind == resource_kind::experiments ? "KSTUDY_EXPERIMENTS_DIR" : "KSTUDY_SCRIPTS_DIR");
  if (env != nullptr && *env != '\0') dirs.emplace_back(env);
  for (const auto& dir : registered(kind)) dirs.push_back(dir);
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path() / folder_name(kind));                              // bundle layout
    dirs.push_back(exe.parent_path() / ".." / "share" / "kstudy" / folder_name(kind));  // install layout
  }
  return dirs;
}

}  // namespace kstudy
