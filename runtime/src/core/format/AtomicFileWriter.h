// Writes a file so that readers see either the old contents or the complete
// new ones, never a partial file. Private to the runtime.
#pragma once

#include <cstddef>
#include <string>

namespace stringrt::detail {

// Bytes go to "<path>.tmp.<pid>"; commit() fsyncs it and renames it over
// `path`. Any failure throws an Error naming `path`; if commit() is never
// reached (an error, an exception elsewhere) the destructor removes the
// temporary file and `path` keeps its old contents.
class AtomicFileWriter {
public:
  explicit AtomicFileWriter(const std::string &path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;

  void write(const void *data, size_t count);
  void commit();

  const std::string &tempPath() const { return tempPath_; }

private:
  [[noreturn]] void fail(const std::string &action, int error);

  std::string path_;
  std::string tempPath_;
  int fd_ = -1;
  bool committed_ = false;
};

} // namespace stringrt::detail
