// A temporary directory for a test's files, removed with everything in it at the end.
#ifndef FAIRGATE_TESTS_TEMP_DIR_H_
#define FAIRGATE_TESTS_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace fairgate::testing {

class TempDir {
 public:
  // In the system's temporary directory, or in `parent` when one is given.
  explicit TempDir(const std::filesystem::path& parent = std::filesystem::temp_directory_path()) {
    std::string t = (parent / "fairgate-test-XXXXXX").string();
    if (mkdtemp(t.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = t;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_TEMP_DIR_H_
