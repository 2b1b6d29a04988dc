// Loading a package's kernel shared object from memory (KernelLibrary.h).
#include "stringrt/KernelLibrary.h"

#include "format/AffineSize.h"
#include "format/Json.h"
#include "format/KernelElf.h"
#include "stringrt/Error.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace stringrt {

std::string kernelChecksum(const void *data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  const auto *bytes = static_cast<const uint8_t *>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", hash);
}

std::string kernelSizeDigest(const std::vector<std::vector<int64_t>> &shapes) {
  std::string text;
  for (const std::vector<int64_t> &shape : shapes) {
    auto [perBatch, fixed] = detail::affineSize(shape);
    text += fmt::format("{}*B+{};", perBatch, fixed);
  }
  return kernelChecksum(text.data(), text.size());
}

namespace {

// An anonymous in-memory file holding `bytes`, or -1.
int memoryFile(const std::vector<uint8_t> &bytes) {
#ifdef SYS_memfd_create
  int fd = static_cast<int>(::syscall(SYS_memfd_create, "stringc-kernels", 1u /*MFD_CLOEXEC*/));
  if (fd < 0)
    return -1;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ::close(fd);
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return fd;
#else
  (void)bytes;
  return -1;
#endif
}

// Writes `bytes` to a new private temporary file; returns its path.
std::string temporaryFile(const std::vector<uint8_t> &bytes, const std::string &what) {
  const char *dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/stringc-kernels-XXXXXX";
  int fd = ::mkstemp(path.data());
  if (fd < 0)
    throw Error(what, fmt::format("cannot create a temporary file for the kernel library: {}",
                                  std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int error = errno;
      ::close(fd);
      ::unlink(path.c_str());
      throw Error(what, fmt::format("cannot write the kernel library: {}", std::strerror(error)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return path;
}

} // namespace

std::shared_ptr<const KernelLibrary> KernelLibrary::load(const std::vector<uint8_t> &bytes,
                                                         const std::vector<std::string> &symbols,
                                                         const std::string &what) {
  detail::checkKernelElf(bytes, what);
  void *handle = nullptr;
  int fd = memoryFile(bytes);
  if (fd >= 0) {
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ::close(fd); // the loader's mapping keeps the memory
  }
  // No memfd, or no /proc to open it through: a private temporary file.
  if (!handle && (fd < 0 || ::access("/proc/self/fd", F_OK) != 0)) {
    std::string path = temporaryFile(bytes, what);
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ::unlink(path.c_str());
  }
  if (!handle) {
    const char *message = ::dlerror();
    throw Error(what, fmt::format("cannot load the kernel library: {}",
                                  message ? message : "unknown dynamic loader error"));
  }
  std::shared_ptr<KernelLibrary> library(new KernelLibrary(handle));
  struct link_map *self = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &self) != 0 || !self)
    throw Error(what, "cannot locate the loaded kernel library");
  const std::vector<detail::ElfRange> code = detail::elfExecutableSegments(bytes);
  for (const std::string &symbol : symbols) {
    ::dlerror();
    void *address = ::dlsym(handle, symbol.c_str());
    // dlsym on a handle also searches the library's dependencies (the C
    // library): the kernel must be this library's own code.
    Dl_info info{};
    struct link_map *owner = nullptr;
    const bool found = address && ::dladdr1(address, &info, reinterpret_cast<void **>(&owner),
                                            RTLD_DL_LINKMAP) != 0;
    if (!found || owner != self) {
      const std::string where = !address ? "nowhere"
                                : found  ? fmt::format("{} in {}", address,
                                                       info.dli_fname ? info.dli_fname : "?")
                                         : fmt::format("{}, in no loaded object", address);
      throw Error(what, fmt::format("kernel {} resolves to {}, outside the kernel library",
                                    detail::quoteForMessage(symbol), where));
    }
    const uint64_t offset = reinterpret_cast<uintptr_t>(address) - self->l_addr;
    bool inCode = false;
    for (const detail::ElfRange &r : code)
      inCode = inCode || (offset >= r.begin && offset < r.end);
    if (!inCode)
      throw Error(what, fmt::format("kernel {} is not in an executable segment of the kernel "
                                    "library",
                                    detail::quoteForMessage(symbol)));
    library->kernels_[symbol] = reinterpret_cast<KernelFunction>(address);
  }
  return library;
}

KernelLibrary::~KernelLibrary() {
  if (handle_)
    ::dlclose(handle_);
}

KernelFunction KernelLibrary::find(const std::string &symbol) const {
  auto it = kernels_.find(symbol);
  return it == kernels_.end() ? nullptr : it->second;
}

std::string targetMismatch(const std::string &triple) {
#if defined(__x86_64__)
  const uint16_t host = EM_X86_64;
  const char *hostName = "x86_64 Linux";
#elif defined(__aarch64__)
  const uint16_t host = EM_AARCH64;
  const char *hostName = "aarch64 Linux";
#else
  const uint16_t host = EM_NONE;
  const char *hostName = "an architecture without compiled kernels";
#endif
  const bool onLinux = triple.find("-linux") != std::string::npos;
  const uint16_t machine = detail::elfMachineOfTriple(triple);
  if (host != EM_NONE && machine == host && onLinux)
    return "";
  return fmt::format("they were compiled for {}, this machine is {}",
                     detail::quoteForMessage(triple), hostName);
}

std::string missingCpuFeatures(const std::string &features) {
  std::string missing;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  std::stringstream list(features);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item.size() < 2 || item[0] != '+')
      continue;
    const std::string name = item.substr(1);
    // The features __builtin_cpu_supports can test (it takes literals).
    int supported = -1;
#define STRINGRT_FEATURE(llvmName, gccName)                                                      \
  if (name == llvmName)                                                                          \
    supported = __builtin_cpu_supports(gccName);
    STRINGRT_FEATURE("sse4.1", "sse4.1")
    STRINGRT_FEATURE("sse4.2", "sse4.2")
    STRINGRT_FEATURE("avx", "avx")
    STRINGRT_FEATURE("avx2", "avx2")
    STRINGRT_FEATURE("fma", "fma")
    STRINGRT_FEATURE("f16c", "f16c")
    STRINGRT_FEATURE("bmi", "bmi")
    STRINGRT_FEATURE("bmi2", "bmi2")
    STRINGRT_FEATURE("avx512f", "avx512f")
    STRINGRT_FEATURE("avx512bw", "avx512bw")
    STRINGRT_FEATURE("avx512dq", "avx512dq")
    STRINGRT_FEATURE("avx512vl", "avx512vl")
    STRINGRT_FEATURE("avx512cd", "avx512cd")
    STRINGRT_FEATURE("avx512vnni", "avx512vnni")
    STRINGRT_FEATURE("avx512bf16", "avx512bf16")
    STRINGRT_FEATURE("avx512vp2intersect", "avx512vp2intersect")
#if !defined(__clang__) || __clang_major__ < 19 // clang 19 dropped Xeon Phi's features
    STRINGRT_FEATURE("avx512er", "avx512er") // Xeon Phi only
#endif
#undef STRINGRT_FEATURE
    if (supported == 0)
      missing += (missing.empty() ? "" : ", ") + name;
  }
#else
  (void)features;
#endif
  return missing;
}

} // namespace stringrt
