// A compiled model package (docs/package.md): a safetensors container whose
// `__metadata__` holds format `stringc-package`, the version, the target and
// the manifest. Loading validates all of it; writePackage writes it.
#pragma once

#include "stringrt/CudaSection.h"
#include "stringrt/KernelLibrary.h"
#include "stringrt/Manifest.h"

#include <memory>
#include <optional>
#include <string>

namespace stringrt {

namespace detail {
class CpuKernels;
}

// Package format version this runtime writes and reads: 3 (arena plans in
// bytes, a cuda package's bf16 values at 2 bytes an element). Versions 1 (no
// compiled kernels) and 2 (ops may name compiled kernels; target "cpu") are
// read too, their arena plans (4-byte elements) converted; target "cpu"
// needs version 2 or later.
constexpr int kPackageVersion = 3;
constexpr int kOldestPackageVersion = 1;
// The metadata's "format".
constexpr const char *kPackageFormat = "stringc-package";
// The target whose programs run on the CPU kernels.
constexpr const char *kReferenceTarget = "cpu-reference";
// The target whose packages carry compiler-generated CPU kernels (a shared
// object, KernelLibrary.h); ops that name a kernel run on it with
// KernelSet::Compiled, the others on the CPU kernels.
constexpr const char *kCpuTarget = "cpu";
// Packages of target kCudaTarget ("cuda", CudaSection.h) hold the same
// manifest plus GPU kernels; their programs also run on the CPU kernels.

// What a package file holds, for writePackage: the compiler fills one per
// target, and Package::load reads the same parts back.
struct PackageContents {
  std::string target = kReferenceTarget; // kReferenceTarget, kCpuTarget or kCudaTarget
  Manifest manifest;
  // kCpuTarget: the compiled kernels' shared object (KernelLibrary.h) and
  // what it was compiled for (LLVM triple, CPU, features).
  std::string kernelObject, kernelTriple, kernelCpu, kernelFeatures;
  // kCudaTarget: the GPU kernels, their PTX and cubins included.
  std::optional<CudaSection> cuda;
};

// Writes `contents` as the package file `path` (docs/package.md), the
// inverse of Package::load; atomically: a failure leaves an earlier file
// intact. The manifest is written as it is (Package::load validates it);
// throws stringrt::Error when the parts do not fit the target (kernels for
// a target without them, none for one that needs them) or the file cannot
// be written.
void writePackage(const std::string &path, const PackageContents &contents);

class Package {
public:
  // Reads and validates the package at `path`; throws stringrt::Error
  // "<path>: <what is wrong>" for anything malformed.
  static Package load(const std::string &path);

  const std::string &path() const { return path_; }
  const std::string &target() const { return target_; }
  const Manifest &manifest() const { return manifest_; }
  // The GPU kernels of a "cuda" package; nullptr for other targets.
  const CudaSection *cuda() const { return cuda_.get(); }

  // Whether the package carries compiled CPU kernels (target "cpu"). load()
  // validates them (checksum, ELF image, the library exports exactly the
  // kernels the manifest names, each op's kernels of its kind and range)
  // but runs none of their code: the library is mapped into the process
  // only by loadKernelLibrary(), which Model calls for KernelSet::Compiled
  // alone. A package's kernels are machine code: load it with the compiled
  // kernels only if you trust it as you would a shared library.
  bool hasKernels() const { return cpuKernels_ != nullptr; }
  // The compiled kernels, loaded on the first call (copies of the package
  // share the library; thread-safe). Throws Error when the package has none
  // or this machine cannot run them (kernelsUnavailable()).
  std::shared_ptr<const KernelLibrary> loadKernelLibrary() const;
  // Whether loadKernelLibrary() has loaded the library (here or in a copy).
  bool kernelLibraryLoaded() const;
  // What the kernels were compiled for: LLVM triple, CPU and features.
  const std::string &kernelTriple() const;
  const std::string &kernelCpu() const;
  const std::string &kernelFeatures() const;
  // Why this machine cannot run the compiled kernels, as a phrase ("they
  // were compiled for CPU "znver4", and this CPU lacks avx512f"; another
  // architecture or OS); empty when it can or there are none.
  const std::string &kernelsUnavailable() const;

private:
  Package() = default;
  std::string path_;
  std::string target_;
  Manifest manifest_;
  std::shared_ptr<const CudaSection> cuda_;
  std::shared_ptr<const detail::CpuKernels> cpuKernels_;
};

} // namespace stringrt
