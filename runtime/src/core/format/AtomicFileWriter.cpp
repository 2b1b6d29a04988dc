#include "format/AtomicFileWriter.h"

#include "format/InputFile.h"
#include "stringrt/Error.h"

#include <fmt/format.h>

#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace stringrt::detail {

namespace {
// Makes the rename itself durable. Best effort: some file systems refuse to
// fsync a directory, and the new file is already complete and in place.
void syncParentDirectory(const std::string &path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  if (parent.empty())
    parent = ".";
  int dirFd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0)
    return;
  ::fsync(dirFd);
  ::close(dirFd);
}
} // namespace

AtomicFileWriter::AtomicFileWriter(const std::string &path)
    : path_(path), tempPath_(fmt::format("{}.tmp.{}", path, ::getpid())) {
  // Fail before writing anything when the rename is bound to fail.
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    throw Error(path, "cannot write: is a directory");
  // O_NOFOLLOW: never write through a symlink planted at the temporary name.
  fd_ = ::open(tempPath_.c_str(),
               O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd_ < 0) {
    int error = errno;
    throw Error(path, fmt::format("cannot create temporary file {}: {}",
                                  tempPath_, errnoText(error)));
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!committed_)
    ::unlink(tempPath_.c_str());
}

void AtomicFileWriter::fail(const std::string &action, int error) {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  ::unlink(tempPath_.c_str());
  throw Error(path_, fmt::format("{} failed: {}", action, errnoText(error)));
}

void AtomicFileWriter::write(const void *data, size_t count) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  while (count > 0) {
    ssize_t written = ::write(fd_, bytes, count);
    if (written < 0) {
      int error = errno;
      if (error == EINTR)
        continue;
      fail(fmt::format("writing {}", tempPath_), error);
    }
    bytes += written;
    count -= static_cast<size_t>(written);
  }
}

void AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) {
    int error = errno;
    fail(fmt::format("fsync of {}", tempPath_), error);
  }
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int error = errno;
    fail(fmt::format("closing {}", tempPath_), error);
  }
  if (::rename(tempPath_.c_str(), path_.c_str()) != 0) {
    int error = errno;
    fail(fmt::format("renaming {} over it", tempPath_), error);
  }
  committed_ = true;
  syncParentDirectory(path_);
}

} // namespace stringrt::detail
