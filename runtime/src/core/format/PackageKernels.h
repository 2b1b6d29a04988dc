// The compiled-kernel part of a "cpu" package (docs/package.md, "Target
// cpu"): the shared object tensor, its metadata, and the kernels the
// manifest's ops name. Private to Package.cpp.
#pragma once

#include "stringrt/KernelLibrary.h"
#include "stringrt/Manifest.h"
#include "stringrt/Safetensors.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace stringrt::detail {

// kernels_triple, kernels_cpu, kernels_features, kernels_checksum.
bool isKernelMetadataKey(std::string_view key);

// A package's kernel library, validated but not loaded: its bytes stay in
// memory until load() maps them into the process (KernelSet::Compiled
// only), so that running a package on the fast or reference kernels never
// runs a byte of its code. Shared by the copies of a Package.
class CpuKernels {
public:
  std::string triple, cpu, features;
  std::string unavailable; // why this machine cannot run them; "" when it can

  // The loaded library (loaded on the first call; thread-safe). Throws
  // Error(path, ...) when it cannot be loaded.
  std::shared_ptr<const KernelLibrary> load(const std::string &path) const;
  bool loaded() const;

private:
  friend std::shared_ptr<const CpuKernels>
  loadCpuKernels(const SafetensorsFile &, const std::map<std::string, std::string> &,
                 const Manifest &, const std::string &);
  std::vector<uint8_t> bytes_;
  std::vector<std::string> symbols_; // every kernel the manifest names
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const KernelLibrary> library_;
};

// Validates the kernel metadata, the `kernels.so` tensor (the only one):
// its checksum, its ELF image, that it exports exactly the kernels the
// manifest's ops name and nothing else, and each op's kernels against the
// code generator's rules (CompiledKernelRules.h). Loads nothing. Throws
// Error(path, ...).
std::shared_ptr<const CpuKernels>
loadCpuKernels(const SafetensorsFile &file, const std::map<std::string, std::string> &metadata,
               const Manifest &manifest, const std::string &path);

// Throws Error(path, ...) if an op names a kernel (targets without them).
void checkNoKernels(const Manifest &manifest, const std::string &target,
                    const std::string &path);

} // namespace stringrt::detail
