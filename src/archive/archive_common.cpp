// Helpers shared by the archive's sinks: names, open modes, the up-front writability check, and the record
// schemas every sink writes through.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/detail/name_table.hpp"
#include "detail/record_fields.hpp"
#include "kstudy/runner/archive.hpp"

namespace kstudy {

namespace {
constexpr detail::name_table<open_mode, 4> k_open_mode_names{{
    {open_mode::create, "create"},
    {open_mode::overwrite, "overwrite"},
    {open_mode::append, "append"},
    {open_mode::resume, "resume"},
}};
}  // namespace

const char* to_string(open_mode mode) { return detail::name_of(k_open_mode_names, mode, "open_mode"); }

open_mode parse_open_mode(const std::string& name) {
  return detail::value_of(k_open_mode_names, name, "archive open mode");
}

const record_schema& record_batch::schema() const {
  if (const record_schema* schema = archive_detail::find_schema(*this, archive_detail::record_types{})) return *schema;
  throw std::logic_error(
      "kstudy: a record batch of a type with no field table (src/archive/detail/record_fields.hpp lists them)");
}

namespace archive_detail {

void check_experiment_name(const std::string& name) {
  if (name.empty() || name == "." || name.find('/') != std::string::npos)
    throw std::invalid_argument("kstudy: experiment name '" + name +
                                "' cannot name an archive group (empty, '.' or containing '/')");
}

void check_path_writable(const std::string& path, const char* what) {
  namespace fs = std::filesystem;
  const std::string prefix = std::string("kstudy: cannot write the ") + what + " '" + path + "': ";
  if (path.empty()) throw std::runtime_error(std::string("kstudy: empty ") + what + " path");
  std::error_code ec;
  const fs::path target(path);
  const auto target_status = fs::status(target, ec);
  if (fs::is_directory(target_status)) throw std::runtime_error(prefix + "it is a directory");
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  const auto dir_status = fs::status(dir, ec);
  if (!fs::exists(dir_status)) throw std::runtime_error(prefix + "directory '" + dir.string() + "' does not exist");
  if (!fs::is_directory(dir_status)) throw std::runtime_error(prefix + "'" + dir.string() + "' is not a directory");
  if (fs::exists(target_status)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      throw std::runtime_error(prefix + "the existing file cannot be opened for writing: " + std::strerror(errno));
    ::close(fd);
  }
  // A real create: permission bits, read-only mounts, full quotas and pseudo file systems all show here.
  const fs::path probe = dir / (".kstudy-probe-" + std::to_string(::getpid()) + "-" + target.filename().string());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error(prefix + "cannot create a file in '" + dir.string() + "': " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace archive_detail
}  // namespace kstudy
