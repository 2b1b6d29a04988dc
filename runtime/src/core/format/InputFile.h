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
  friend class MappedRegion;
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// `length` bytes of an open file from `offset`, mapped read-only into memory
// (mmap, MAP_PRIVATE): a page is read from the file when first touched, so a
// process reads only the parts it uses and a file larger than RAM can be
// used. The mapping outlives the InputFile. The file must not shrink while
// mapped (reading a page past its new end is SIGBUS): the data loaders map
// data sets, which nothing rewrites during a run.
class MappedRegion {
public:
  MappedRegion(const InputFile &file, uint64_t offset, uint64_t length);
  ~MappedRegion();
  MappedRegion(const MappedRegion &) = delete;
  MappedRegion &operator=(const MappedRegion &) = delete;

  const uint8_t *data() const { return data_; }
  uint64_t size() const { return length_; }

private:
  void *base_ = nullptr; // the page-aligned start of the mapping
  size_t mappedBytes_ = 0;
  const uint8_t *data_ = nullptr;
  uint64_t length_ = 0;
};

// strerror for an errno value.
std::string errnoText(int error);

} // namespace stringrt::detail
