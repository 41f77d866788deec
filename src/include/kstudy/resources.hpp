#pragma once
// Where a kstudy executable finds its built-in experiments (<dir>/<name>.json), the report scripts
// (<dir>/kstudy_report.py with its kstudy_py package) and the Python rungs (<dir>/<operation>/python_*.py). Folders are
// searched in this order:
//   1. $KSTUDY_EXPERIMENTS_DIR / $KSTUDY_SCRIPTS_DIR / $KSTUDY_VARIANTS_DIR, when set;
//   2. the folders the executable registered at static-initialisation time, in registration order: the
//      build tree's kstudy registers the source tree's experiments/ and scripts/ (src/app/source_tree.cpp),
//      an executable of kstudy_add_study its own experiments and then the install prefix's share/kstudy/;
//   3. beside the executable: <kind>/ (a GPU bundle) and ../share/kstudy/<kind>/ (an installed bin/kstudy).
// Folders that do not exist are skipped by the lookups, so an executable copied to another machine falls
// through to its own surroundings.
#include <filesystem>
#include <string>
#include <vector>

namespace kstudy {

// variants: the folders whose <operation>/python_*.py modules hold Python rungs (src/study/python_rungs.cpp), the
// source tree's variants/ or an install's share/kstudy/variants/; $KSTUDY_VARIANTS_DIR first.
enum class resource_kind { experiments, scripts, variants };

void add_resource_dir(resource_kind kind, const std::string& dir);
// The search order above, existing or not.
std::vector<std::filesystem::path> resource_dirs(resource_kind kind);

// For a namespace-scope registration: `const kstudy::resource_dir_registration r{kind, "/path"};`
struct resource_dir_registration {
  resource_dir_registration(resource_kind kind, const char* dir) { add_resource_dir(kind, dir); }
};

}  // namespace kstudy
