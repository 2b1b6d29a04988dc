// Read-only access to a regular file, for the runtime's loaders. Private to
// the runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stringrt::detail {

// An open regular file. Opening refuses directories, FIFOs and devices (which
// could block or never end) with an Error naming the path. Reads go through
// the descriptor, so they see the file that was opened even if the path is
// replaced later, and a file that shrank gives an error, never short data.
class InputFile {
public:
  explicit InputFile(const std::string &path);
  ~InputFile();
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;

  const std::string &path() const { return path_; }
  // Size when opened.
  uint64_t size() const { return size_; }

  // Reads exactly `count` bytes at `offset`; safe to call from several threads.
  void readAt(uint64_t offset, void *destination, size_t count) const;

  // The whole file; throws if it is larger than `maxBytes` (`what` names the
  // kind of file in that message, e.g. "IDX files").
  std::vector<uint8_t> readAll(uint64_t maxBytes, const char *what) const;

private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// strerror for an errno value.
std::string errnoText(int error);

} // namespace stringrt::detail
