// The compiled-kernel part of a "cpu" package (docs/package.md, "Target
// cpu"): the shared object tensor, its metadata, and the kernels the
// manifest's ops name. Private to Package.cpp.
#pragma once

#include "stringrt/KernelLibrary.h"
#include "stringrt/Manifest.h"
#include "stringrt/Safetensors.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace stringrt::detail {

// kernels_triple, kernels_cpu, kernels_features, kernels_checksum.
bool isKernelMetadataKey(std::string_view key);

struct CpuKernels {
  std::shared_ptr<const KernelLibrary> library;
  std::string triple, cpu, features;
  std::string unavailable; // missingCpuFeatures(features)
};

// Validates the kernel metadata and the `kernels.so` tensor (the only one),
// checks its checksum, loads it and resolves every symbol the manifest's
// ops name. Throws Error(path, ...).
CpuKernels loadCpuKernels(const SafetensorsFile &file,
                          const std::map<std::string, std::string> &metadata,
                          const Manifest &manifest, const std::string &path);

// Throws Error(path, ...) if an op names a kernel (targets without them).
void checkNoKernels(const Manifest &manifest, const std::string &target,
                    const std::string &path);

} // namespace stringrt::detail
