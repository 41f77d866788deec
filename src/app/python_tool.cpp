#include "python_tool.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "kstudy/resources.hpp"

namespace kstudy {

int exec_python_tool(int argc, char** argv) {
  namespace fs = std::filesystem;
  const std::string script_name = "kstudy_report.py";
  const auto dirs = resource_dirs(resource_kind::scripts);
  std::error_code ec;
  std::string script;
  for (const auto& dir : dirs)
    if (fs::is_regular_file(dir / script_name, ec)) {
      script = fs::weakly_canonical(dir / script_name, ec).string();
      break;
    }
  const std::string command = argc > 1 ? argv[1] : "report";
  if (script.empty()) {
    std::cerr << "kstudy: error: " << command << " needs scripts/" << script_name << " (looked in";
    for (const auto& dir : dirs) std::cerr << " " << dir.string();
    std::cerr << "; set KSTUDY_SCRIPTS_DIR to the folder holding it)\n";
    return 2;
  }
  // Debian's system python sees Debian's python3-* packages; the python3 first on PATH may not.
  const char* env_python = std::getenv("KSTUDY_PYTHON");
  const std::string python = env_python != nullptr ? env_python : "/usr/bin/python3";
  std::vector<char*> args{const_cast<char*>(python.c_str()), const_cast<char*>(script.c_str())};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(python.c_str(), args.data());
  std::cerr << "kstudy: error: cannot run " << python << " (" << std::strerror(errno) << "): `kstudy " << command
            << "` needs Debian's python3 with python3-h5py python3-pandas python3-numpy python3-matplotlib "
               "python3-scipy (apt-get install python3 python3-h5py python3-pandas python3-numpy "
               "python3-matplotlib python3-scipy; KSTUDY_PYTHON selects another interpreter)\n";
  return 127;
}

}  // namespace kstudy
