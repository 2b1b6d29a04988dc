// Loading a package's kernel shared object from memory (KernelLibrary.h).
#include "stringrt/KernelLibrary.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <dlfcn.h>
#include <elf.h>
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

namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
constexpr uint16_t kHostMachine = EM_NONE; // not checked
#endif

// The ELF header checks the loader would make, with messages that say what
// is wrong.
void checkElfHeader(const std::vector<uint8_t> &bytes, const std::string &what) {
  if (bytes.size() < sizeof(Elf64_Ehdr) || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0)
    throw Error(what, "the kernel library is not an ELF file");
  Elf64_Ehdr header;
  std::memcpy(&header, bytes.data(), sizeof header);
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB)
    throw Error(what, "the kernel library is not a 64-bit little-endian ELF file");
  if (header.e_type != ET_DYN)
    throw Error(what, "the kernel library is not an ELF shared object");
  if (kHostMachine != EM_NONE && header.e_machine != kHostMachine)
    throw Error(what, fmt::format("the kernel library is for ELF machine {}, this one is {}",
                                  header.e_machine, kHostMachine));
  // The loader maps segments straight from the file: one that runs past
  // its end would fault on first touch, so check every table and segment
  // lies inside the bytes we have.
  const uint64_t size = bytes.size();
  auto inside = [&](uint64_t offset, uint64_t length) {
    return offset <= size && length <= size - offset;
  };
  if (header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum == 0 ||
      !inside(header.e_phoff, uint64_t(header.e_phnum) * sizeof(Elf64_Phdr)))
    throw Error(what, "the kernel library is damaged: its program header table is missing or "
                      "lies outside the file");
  if (header.e_shnum != 0 &&
      (header.e_shentsize != sizeof(Elf64_Shdr) ||
       !inside(header.e_shoff, uint64_t(header.e_shnum) * sizeof(Elf64_Shdr))))
    throw Error(what, "the kernel library is damaged: its section header table lies outside "
                      "the file");
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, bytes.data() + header.e_phoff + i * sizeof(Elf64_Phdr), sizeof segment);
    if (segment.p_type != PT_NULL && !inside(segment.p_offset, segment.p_filesz))
      throw Error(what, fmt::format("the kernel library is truncated or damaged: segment {} "
                                    "ends at byte {}, the library has {}",
                                    i, segment.p_offset + segment.p_filesz, size));
  }
}

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
                                                         const std::string &what) {
  checkElfHeader(bytes, what);
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
  return std::shared_ptr<const KernelLibrary>(new KernelLibrary(handle));
}

KernelLibrary::~KernelLibrary() {
  if (handle_)
    ::dlclose(handle_);
}

KernelFunction KernelLibrary::find(const std::string &symbol) const {
  void *address = ::dlsym(handle_, symbol.c_str());
  return reinterpret_cast<KernelFunction>(address);
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
    STRINGRT_FEATURE("avx512er", "avx512er") // Xeon Phi only
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
