#pragma once
// A fresh folder per test: <temp>/kstudy_<prefix>_<pid>_<suite>_<test>, removed afterwards (kept when the
// test failed, for a look).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace kstudy::test {

class scratch_dir {
 public:
  explicit scratch_dir(const std::string& prefix) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    m_path = std::filesystem::temp_directory_path() / ("kstudy_" + prefix + "_" + std::to_string(::getpid()) + "_" +
                                                       info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
  }
  ~scratch_dir() {
    std::error_code ec;
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(m_path, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  const std::filesystem::path& path() const { return m_path; }
  std::filesystem::path operator/(const std::string& name) const { return m_path / name; }
  std::string file(const std::string& name) const { return (m_path / name).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(m_path)) out.push_back(e.path().filename().string());
    return out;
  }

 private:
  std::filesystem::path m_path;
};

}  // namespace kstudy::test
