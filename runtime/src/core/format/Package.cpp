// Package::load: the safetensors container, its metadata and the manifest
// (docs/package.md).
#include "stringrt/Package.h"

#include "format/Json.h"
#include "format/PackageKernels.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"

#include <fmt/format.h>

namespace stringrt {

using detail::quoteForMessage;

Package Package::load(const std::string &path) {
  SafetensorsFile file = SafetensorsFile::open(path);
  const std::map<std::string, std::string> &metadata = file.metadata();
  auto require = [&](const char *key) -> const std::string & {
    auto it = metadata.find(key);
    if (it == metadata.end())
      throw Error(path, fmt::format("not a stringc package: no \"{}\" in the "
                                    "metadata",
                                    key));
    return it->second;
  };
  const std::string &format = require("format");
  if (format != kPackageFormat)
    throw Error(path, fmt::format("not a stringc package: format is {} "
                                  "(expected \"{}\")",
                                  quoteForMessage(format), kPackageFormat));
  const std::string &version = require("version");
  int versionNumber = 0;
  for (int v = kOldestPackageVersion; v <= kPackageVersion; ++v)
    if (version == std::to_string(v))
      versionNumber = v;
  if (!versionNumber)
    throw Error(path, fmt::format("unsupported package version {} (this "
                                  "runtime reads versions {} to {}; a newer "
                                  "stringc wrote it, or it is not a package)",
                                  quoteForMessage(version), kOldestPackageVersion,
                                  kPackageVersion));
  const std::string &target = require("target");
  const bool cuda = target == kCudaTarget;
  const bool cpu = target == kCpuTarget;
  if (target != kReferenceTarget && !cuda && !cpu)
    throw Error(path, fmt::format("unsupported target {} (this runtime runs "
                                  "\"{}\", \"{}\" and \"{}\")",
                                  quoteForMessage(target), kCpuTarget, kReferenceTarget,
                                  kCudaTarget));
  if (cpu && versionNumber < 2)
    throw Error(path, fmt::format("target \"{}\" needs package version 2, this "
                                  "package is version {}",
                                  kCpuTarget, version));
  const std::string &manifest = require("manifest");
  for (const auto &[key, value] : metadata)
    if (key != "format" && key != "version" && key != "target" &&
        key != "manifest" && !(cuda && key == "cuda") &&
        !(cpu && detail::isKernelMetadataKey(key)))
      throw Error(path, fmt::format("unknown metadata key {}",
                                    quoteForMessage(key)));
  if (!cuda && !cpu && !file.tensors().empty())
    throw Error(path, fmt::format("target {} has no binary sections, but the "
                                  "package holds tensor {}",
                                  kReferenceTarget,
                                  quoteForMessage(file.tensors()[0].name)));

  Package package;
  package.path_ = path;
  package.target_ = target;
  package.manifest_ = parseManifest(manifest, path);
  if (cpu)
    package.cpuKernels_ = detail::loadCpuKernels(file, metadata, package.manifest_, path);
  else
    detail::checkNoKernels(package.manifest_, target, path);
  if (cuda)
    package.cuda_ = std::make_shared<const CudaSection>(
        parseCudaSection(require("cuda"), file, package.manifest_, path));
  return package;
}

std::shared_ptr<const KernelLibrary> Package::loadKernelLibrary() const {
  if (!cpuKernels_)
    throw Error(path_, "the package has no compiled kernels (target \"" + target_ + "\")");
  if (!cpuKernels_->unavailable.empty())
    throw Error(path_, "the package's compiled kernels cannot run on this machine: " +
                           cpuKernels_->unavailable);
  return cpuKernels_->load(path_);
}

bool Package::kernelLibraryLoaded() const { return cpuKernels_ && cpuKernels_->loaded(); }

namespace {
const std::string kNone;
} // namespace

const std::string &Package::kernelTriple() const {
  return cpuKernels_ ? cpuKernels_->triple : kNone;
}
const std::string &Package::kernelCpu() const { return cpuKernels_ ? cpuKernels_->cpu : kNone; }
const std::string &Package::kernelFeatures() const {
  return cpuKernels_ ? cpuKernels_->features : kNone;
}
const std::string &Package::kernelsUnavailable() const {
  return cpuKernels_ ? cpuKernels_->unavailable : kNone;
}

} // namespace stringrt
