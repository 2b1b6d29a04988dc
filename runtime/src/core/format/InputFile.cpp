#include "format/InputFile.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace stringrt::detail {

std::string errnoText(int error) { return std::strerror(error); }

InputFile::InputFile(const std::string &path) : path_(path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is rejected
  // below.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    int error = errno;
    if (error == ENOENT)
      throw Error(path, "no such file");
    throw Error(path, "cannot open: " + errnoText(error));
  }
  struct stat info;
  if (::fstat(fd_, &info) != 0) {
    int error = errno;
    ::close(fd_);
    throw Error(path, "cannot stat: " + errnoText(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd_);
    throw Error(path, S_ISDIR(info.st_mode) ? "is a directory, not a file"
                                            : "is not a regular file");
  }
  size_ = static_cast<uint64_t>(info.st_size);
}

MappedRegion::MappedRegion(const InputFile &file, uint64_t offset, uint64_t length)
    : length_(length) {
  if (offset > file.size() || length > file.size() - offset)
    throw Error(file.path(), fmt::format("bytes [{}, {}) are past the end of the file ({} bytes)",
                                         offset, offset + length, file.size()));
  if (length == 0) {
    static const uint8_t nothing = 0;
    data_ = &nothing;
    return;
  }
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  mappedBytes_ = static_cast<size_t>(offset - start + length);
  base_ = ::mmap(nullptr, mappedBytes_, PROT_READ, MAP_PRIVATE, file.fd_, static_cast<off_t>(start));
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    throw Error(file.path(), fmt::format("cannot map bytes [{}, {}) into memory: {}", offset,
                                         offset + length, errnoText(errno)));
  }
  data_ = static_cast<const uint8_t *>(base_) + (offset - start);
}

MappedRegion::~MappedRegion() {
  if (base_)
    ::munmap(base_, mappedBytes_);
}

InputFile::~InputFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

void InputFile::readAt(uint64_t offset, void *destination, size_t count) const {
  auto *out = static_cast<unsigned char *>(destination);
  size_t done = 0;
  while (done < count) {
    ssize_t got = ::pread(fd_, out + done, count - done,
                          static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR)
        continue;
      throw Error(path_, fmt::format("read error at byte {}: {}", offset + done,
                                     errnoText(errno)));
    }
    if (got == 0)
      throw Error(
          path_,
          fmt::format(
              "unexpected end of file at byte {} while reading bytes [{}, {}) "
              "(was the file changed after it was opened?)",
              offset + done, offset, offset + count));
    done += static_cast<size_t>(got);
  }
}

std::vector<uint8_t> InputFile::readAll(uint64_t maxBytes,
                                        const char *what) const {
  if (size_ > maxBytes)
    throw Error(path_, fmt::format("is {} bytes, over the {}-byte limit for {}",
                                   size_, maxBytes, what));
  std::vector<uint8_t> bytes(static_cast<size_t>(size_));
  readAt(0, bytes.data(), bytes.size());
  return bytes;
}

} // namespace stringrt::detail
