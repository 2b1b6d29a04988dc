// A compiled model package (docs/package.md): a safetensors container whose
// `__metadata__` holds format `stringc-package`, version `1`, the target and
// the manifest. Loading validates all of it.
#pragma once

#include "stringrt/CudaSection.h"
#include "stringrt/KernelLibrary.h"
#include "stringrt/Manifest.h"

#include <memory>
#include <string>

namespace stringrt {

// Package format version this runtime writes and reads: 2 (ops may name
// compiled kernels; target "cpu"). Version 1 packages (no compiled kernels)
// are read too; target "cpu" needs version 2.
constexpr int kPackageVersion = 2;
constexpr int kOldestPackageVersion = 1;
// The target whose programs run on the CPU kernels.
constexpr const char *kReferenceTarget = "cpu-reference";
// The target whose packages carry compiler-generated CPU kernels (a shared
// object, KernelLibrary.h); ops that name a kernel run on it with
// KernelSet::Compiled, the others on the CPU kernels.
constexpr const char *kCpuTarget = "cpu";
// Packages of target kCudaTarget ("cuda", CudaSection.h) hold the same
// manifest plus GPU kernels; their programs also run on the CPU kernels.

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

  // The compiled CPU kernels of a "cpu" package (loaded and every symbol
  // the manifest names resolved); nullptr for other targets.
  const std::shared_ptr<const KernelLibrary> &kernelLibrary() const { return kernels_; }
  bool hasKernels() const { return kernels_ != nullptr; }
  // What the kernels were compiled for: LLVM triple, CPU and features.
  const std::string &kernelTriple() const { return kernelTriple_; }
  const std::string &kernelCpu() const { return kernelCpu_; }
  const std::string &kernelFeatures() const { return kernelFeatures_; }
  // Why this machine cannot run the compiled kernels (CPU features they use
  // that it lacks); empty when it can.
  const std::string &kernelsUnavailable() const { return kernelsUnavailable_; }

private:
  Package() = default;
  std::string path_;
  std::string target_;
  Manifest manifest_;
  std::shared_ptr<const CudaSection> cuda_;
  std::shared_ptr<const KernelLibrary> kernels_;
  std::string kernelTriple_, kernelCpu_, kernelFeatures_, kernelsUnavailable_;
};

} // namespace stringrt
