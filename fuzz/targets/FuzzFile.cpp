#include "FuzzFile.h"

#include <cstdio>
#include <cstdlib>

#include <sys/mman.h>
#include <unistd.h>

namespace stringc::fuzz {

namespace {
[[noreturn]] void die(const char *what) {
  std::perror(what);
  std::abort();
}
} // namespace

FuzzFile::FuzzFile(const char *name) {
  fd_ = memfd_create(name, MFD_CLOEXEC);
  if (fd_ < 0)
    die("memfd_create");
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

FuzzFile::~FuzzFile() { ::close(fd_); }

void FuzzFile::write(const uint8_t *data, size_t size) {
  if (::ftruncate(fd_, 0) != 0)
    die("ftruncate");
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0)
      die("pwrite");
    done += static_cast<size_t>(n);
  }
}

} // namespace stringc::fuzz
