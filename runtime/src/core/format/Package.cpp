// Package::load: the safetensors container, its metadata and the manifest
// (docs/package.md).
#include "stringrt/Package.h"

#include "format/Json.h"
#include "format/PackageKernels.h"
#include "stringrt/Error.h"
#include "stringrt/ManifestLimits.h"
#include "stringrt/Safetensors.h"

#include <fmt/format.h>

namespace stringrt {

using detail::quoteForMessage;

namespace {

// Versions 1 and 2 sized a program's arena plan in 4-byte elements (every
// value at 4 bytes) and reported its slots packed: the plan in bytes, its
// arena_bytes figure checked against that rule and replaced by this
// runtime's (each slot rounded up to kArenaSlotAlignment).
void arenaInBytes(Program &program, const std::string &name, int version,
                  const std::string &path) {
  if (!program.arena)
    return;
  ProgramArena &arena = *program.arena;
  const std::string where = "manifest.programs." + name + ".arena";
  for (size_t k = 0; k < arena.slots.size(); ++k) {
    auto &[perBatch, fixed] = arena.slots[k];
    if (perBatch > kMaxExampleElements || fixed > kMaxExampleElements)
      throw Error(path, fmt::format("{}.slots[{}]: slot size [{}, {}] out of range", where, k,
                                    perBatch, fixed));
    perBatch *= 4;
    fixed *= 4;
  }
  std::optional<int64_t> packed = arenaSlotsBytes(arena.slots, arena.reportBatch, 4);
  if (!packed || *packed != arena.arenaBytes)
    throw Error(path, fmt::format("{}.report: arena_bytes {} is not the plan's {} (package "
                                  "version {}: 4-byte elements, slots packed)",
                                  where, arena.arenaBytes, packed.value_or(-1), version));
  arena.arenaBytes = arenaSlotsBytes(arena.slots, arena.reportBatch).value_or(*packed);
}

} // namespace

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
  auto program = [&](const std::string &name) -> Program & {
    return name == "forward" ? package.manifest_.forward : package.manifest_.gradients;
  };
  if (versionNumber < 3)
    for (const char *name : {"forward", "gradients"})
      arenaInBytes(program(name), name, versionNumber, path);
  if (cpu)
    package.cpuKernels_ = detail::loadCpuKernels(file, metadata, package.manifest_, path);
  else
    detail::checkNoKernels(package.manifest_, target, path);
  if (cuda) {
    package.cuda_ = std::make_shared<const CudaSection>(
        parseCudaSection(require("cuda"), file, package.manifest_, path));
    // The plan of a version 3 cuda package stores its bf16 values at 2
    // bytes an element; versions 1 and 2 planned every value at 4.
    if (versionNumber >= 3)
      for (const CudaProgramSteps &steps : package.cuda_->steps) {
        Program &stored = program(steps.program);
        if (!stored.arena || steps.valueDTypes.empty())
          continue;
        stored.arena->elementBytes.assign(stored.values.size(), 4);
        for (const auto &[value, dtype] : steps.valueDTypes)
          stored.arena->elementBytes.at(size_t(value)) = int64_t(dtypeSize(dtype));
      }
  }
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
