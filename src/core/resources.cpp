#include "kstudy/resources.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace kstudy {
namespace fs = std::filesystem;

namespace {

struct kind_facts {
  const char* folder;  // beside the executable, and under share/kstudy/
  const char* env;     // the folder that comes first
};
kind_facts facts(resource_kind kind) {
  switch (kind) {
    case resource_kind::experiments:
      return {"experiments", "KSTUDY_EXPERIMENTS_DIR"};
    case resource_kind::variants:
      return {"variants", "KSTUDY_VARIANTS_DIR"};
    case resource_kind::scripts:
      break;
  }
  return {"scripts", "KSTUDY_SCRIPTS_DIR"};
}

// Function-local, so registrations from other translation units' static initialisers find it constructed.
std::vector<fs::path>& registered(resource_kind kind) {
  static std::vector<fs::path> experiments, scripts, variants;
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
  if (!dir.empty()) registered(kind).emplace_back(dir);
}

std::vector<fs::path> resource_dirs(resource_kind kind) {
  std::vector<fs::path> dirs;
  const char* env = std::getenv(facts(kind).env);
  if (env != nullptr && *env != '\0') dirs.emplace_back(env);
  for (const auto& dir : registered(kind)) dirs.push_back(dir);
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path() / facts(kind).folder);                              // bundle layout
    dirs.push_back(exe.parent_path() / ".." / "share" / "kstudy" / facts(kind).folder);  // install layout
  }
  return dirs;
}

}  // namespace kstudy
