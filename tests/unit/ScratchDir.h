//===- ScratchDir.h - a scratch directory for the compiler unit tests -----===//
//
// The compiler's tests write packages and kernel libraries; each gets a
// fresh directory of its own, removed with its contents at the end. (The
// runtime's tests have runtime/tests/TestFiles.h's TempDir: the two test
// trees share no headers, as the runtime never sees the compiler's.)
//
//===----------------------------------------------------------------------===//

#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>

namespace stringc::test {

class ScratchDir {
public:
  ScratchDir() {
    path = std::filesystem::temp_directory_path() /
           ("stringc-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir &) = delete;
  ScratchDir &operator=(const ScratchDir &) = delete;

  /// The path of `name` inside the directory.
  std::string file(const std::string &name) const { return (path / name).string(); }

private:
  static inline int counter = 0;
  std::filesystem::path path;
};

} // namespace stringc::test
