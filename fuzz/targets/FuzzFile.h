// The fuzzers' input as a file: the runtime's readers take paths, so each
// input is written to an in-memory file (memfd) that they open through
// /proc/self/fd. No disk traffic, nothing left behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace stringc::fuzz {

class FuzzFile {
public:
  // `name` shows up in /proc and in the readers' messages.
  explicit FuzzFile(const char *name);
  ~FuzzFile();
  FuzzFile(const FuzzFile &) = delete;
  FuzzFile &operator=(const FuzzFile &) = delete;

  // Replaces the file's contents; aborts if the write fails (a harness bug,
  // not a finding).
  void write(const uint8_t *data, size_t size);
  // A path the readers can open.
  const std::string &path() const { return path_; }

private:
  int fd_ = -1;
  std::string path_;
};

} // namespace stringc::fuzz
