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
#include <map>
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

// The digest of the buffers a generated kernel was built for: 16 hex digits
// of FNV-1a over each buffer's element count, affine in the batch, operands
// then results (`shapes` as in the value table, kBatchDim for the batch).
// A generated kernel's symbol carries it ("stringc_k<N>_<digest>_<kind>"),
// and the runtime recomputes it from the value table before the kernel may
// run: a manifest edited to give an op buffers of other sizes no longer
// names a kernel its library has (docs/package.md, "Target cpu").
std::string kernelSizeDigest(const std::vector<std::vector<int64_t>> &shapes);

using KernelFunction = void (*)(void *const *buffers, int64_t batch, int64_t begin, int64_t end);

class KernelLibrary {
public:
  // Loads the shared object `bytes` (through a memfd opened as
  // /proc/self/fd/N, or a private temporary file unlinked at once where
  // there is no memfd or no /proc) and resolves every one of `symbols`:
  // dlsym on the library's own handle, and the address must lie in an
  // executable segment of this library, which dladdr must name as its
  // owner (a name the library does not define would resolve in the C
  // library or another object: refused). Throws Error(what, ...) when it
  // is not an ELF shared object, a segment or table lies outside the bytes,
  // the loader refuses it or a symbol does not resolve inside it. The
  // caller has checked what it exports (PackageKernels.cpp) and that this
  // machine can run it: loading runs the library's initialisers.
  static std::shared_ptr<const KernelLibrary> load(const std::vector<uint8_t> &bytes,
                                                   const std::vector<std::string> &symbols,
                                                   const std::string &what);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

  // One of the kernels resolved by load(); nullptr for any other name.
  KernelFunction find(const std::string &symbol) const;

private:
  explicit KernelLibrary(void *handle) : handle_(handle) {}
  void *handle_;
  std::map<std::string, KernelFunction> kernels_;
};

// Why this machine cannot run code compiled for the LLVM target `triple`
// ("x86_64-pc-linux-gnu"), as a phrase ("they were compiled for
// aarch64-unknown-linux-gnu, this machine is x86_64 Linux"); empty when it
// can.
std::string targetMismatch(const std::string &triple);

// Why this CPU cannot run code compiled for the LLVM feature string
// `features` ("+avx2,+fma,-avx512f,..."): the x86 features it requires that
// this CPU lacks (of those the runtime can test), e.g. "avx512f"; empty when
// it can. On other architectures, always empty.
std::string missingCpuFeatures(const std::string &features);

} // namespace stringrt
