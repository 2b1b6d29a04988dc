// The compiler-generated CPU kernels of a "cpu" package (docs/codegen.md,
// docs/package.md): an ELF shared object, loaded from memory with the C
// library's dynamic loader (no MLIR or LLVM here).
//
// Every kernel is exported with one C signature:
//
//   void SYMBOL(void *const *buffers, int64_t batch, int64_t begin, int64_t end);
//
// `buffers` holds the data pointers of the op's operands, then its results
// (row-major f32 with the value table's shapes, `batch` for -1); the call
// computes iterations [begin, end) of the kernel's parallel loop, so
// disjoint ranges may run on different threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace stringrt {

// The container tensor (dtype U8, rank 1) holding the shared object.
constexpr const char *kKernelSection = "kernels.so";

// FNV-1a (64-bit) of the bytes, as 16 lower-case hex digits: the package
// records it as `kernels_checksum`, so a damaged shared object is refused
// before the dynamic loader sees it.
std::string kernelChecksum(const void *data, size_t size);

using KernelFunction = void (*)(void *const *buffers, int64_t batch, int64_t begin, int64_t end);

class KernelLibrary {
public:
  // Loads the shared object `bytes` (through a memfd opened as
  // /proc/self/fd/N, or a private temporary file unlinked at once where
  // there is no memfd or no /proc). Throws Error(what, ...) when it is not
  // an ELF shared object for this machine, a segment or table lies outside
  // the bytes, or the loader refuses it.
  static std::shared_ptr<const KernelLibrary> load(const std::vector<uint8_t> &bytes,
                                                   const std::string &what);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

  // The exported kernel; nullptr when the library has no such symbol.
  KernelFunction find(const std::string &symbol) const;

private:
  explicit KernelLibrary(void *handle) : handle_(handle) {}
  void *handle_;
};

// Why this CPU cannot run code compiled for the LLVM feature string
// `features` ("+avx2,+fma,-avx512f,..."): the x86 features it requires that
// this CPU lacks (of those the runtime can test), e.g. "avx512f"; empty when
// it can. On other architectures, always empty.
std::string missingCpuFeatures(const std::string &features);

} // namespace stringrt
