// Validating the compiled CPU kernels of a "cpu" package, and loading them
// when asked (PackageKernels.h).
#include "format/PackageKernels.h"

#include "format/CompiledKernelRules.h"
#include "format/Json.h"
#include "format/KernelElf.h"
#include "stringrt/Error.h"

#include <fmt/format.h>

#include <set>

namespace stringrt::detail {

namespace {
const char *const kKernelKeys[] = {"kernels_triple", "kernels_cpu", "kernels_features",
                                   "kernels_checksum"};

// The bytes of the `kernels.so` tensor, the only tensor, a non-empty U8
// vector whose checksum is the one the metadata records.
std::vector<uint8_t> libraryBytes(const SafetensorsFile &file,
                                  const std::map<std::string, std::string> &metadata,
                                  const std::string &path) {
  const TensorInfo *section = file.find(kKernelSection);
  if (!section)
    throw Error(path, fmt::format("target cpu needs the kernel library (tensor \"{}\"), "
                                  "the package has none",
                                  kKernelSection));
  for (const TensorInfo &t : file.tensors())
    if (t.name != kKernelSection)
      throw Error(path, fmt::format("unknown tensor {} in a cpu package (it holds only \"{}\")",
                                    quoteForMessage(t.name), kKernelSection));
  if (section->dtype != DType::U8 || section->shape.size() != 1 || section->shape[0] < 1)
    throw Error(path, fmt::format("tensor \"{}\" must be a non-empty U8 vector", kKernelSection));
  std::vector<uint8_t> bytes = file.readBytes(kKernelSection);
  const std::string &want = metadata.at("kernels_checksum");
  const std::string got = kernelChecksum(bytes.data(), bytes.size());
  if (got != want)
    throw Error(path, fmt::format("the kernel library is corrupt: checksum {}, the package "
                                  "records {}",
                                  got, quoteForMessage(want)));
  return bytes;
}

// What the library exports must be exactly the kernels the manifest names.
void checkExports(const std::vector<uint8_t> &bytes, const Manifest &manifest,
                  const std::string &path) {
  const ElfExports exports = elfExports(bytes, path);
  if (!exports.others.empty())
    throw Error(path, fmt::format("the kernel library exports {}, which is not a function (a "
                                  "kernel library exports only its kernels)",
                                  quoteForMessage(exports.others.front())));
  const std::set<std::string> functions(exports.functions.begin(), exports.functions.end());
  for (const char *name : {"forward", "gradients"}) {
    const Program &program = manifest.program(name);
    for (size_t i = 0; i < program.ops.size(); ++i)
      for (const ProgramKernel &k : program.ops[i].kernels)
        if (!functions.count(k.symbol))
          throw Error(path, fmt::format("manifest.programs.{}.ops[{}] ({}): the kernel library "
                                        "has no kernel {}",
                                        name, i, program.ops[i].op,
                                        quoteForMessage(k.symbol)));
  }
  const std::vector<std::string> named = manifestKernelSymbols(manifest);
  const std::set<std::string> wanted(named.begin(), named.end());
  for (const std::string &function : exports.functions)
    if (!wanted.count(function))
      throw Error(path, fmt::format("the kernel library exports {}, which no op of the manifest "
                                    "names (it must export exactly the manifest's kernels)",
                                    quoteForMessage(function)));
}

} // namespace

bool isKernelMetadataKey(std::string_view key) {
  for (const char *k : kKernelKeys)
    if (key == k)
      return true;
  return false;
}

std::shared_ptr<const KernelLibrary> CpuKernels::load(const std::string &path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!library_)
    library_ = KernelLibrary::load(bytes_, symbols_, path);
  return library_;
}

bool CpuKernels::loaded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return library_ != nullptr;
}

std::shared_ptr<const CpuKernels>
loadCpuKernels(const SafetensorsFile &file, const std::map<std::string, std::string> &metadata,
               const Manifest &manifest, const std::string &path) {
  for (const char *key : kKernelKeys)
    if (!metadata.count(key))
      throw Error(path, fmt::format("target cpu needs \"{}\" in the metadata", key));
  auto kernels = std::make_shared<CpuKernels>();
  kernels->triple = metadata.at("kernels_triple");
  kernels->cpu = metadata.at("kernels_cpu");
  kernels->features = metadata.at("kernels_features");
  kernels->bytes_ = libraryBytes(file, metadata, path);

  const uint16_t machine = checkKernelElf(kernels->bytes_, path);
  const uint16_t recorded = elfMachineOfTriple(kernels->triple);
  if (recorded != 0 /*EM_NONE*/ && recorded != machine)
    throw Error(path, fmt::format("the kernel library is for ELF machine {}, but the package "
                                  "records target {} (ELF machine {})",
                                  machine, quoteForMessage(kernels->triple), recorded));
  for (const char *name : {"forward", "gradients"}) {
    const Program &program = manifest.program(name);
    for (size_t i = 0; i < program.ops.size(); ++i) {
      try {
        checkOpKernels(program.ops[i], program,
                       fmt::format("manifest.programs.{}.ops[{}] ({})", name, i,
                                   program.ops[i].op));
      } catch (const Error &e) {
        throw Error(path, e.what());
      }
    }
  }
  checkExports(kernels->bytes_, manifest, path);
  checkSharedKernels(manifest, path);
  kernels->symbols_ = manifestKernelSymbols(manifest);

  kernels->unavailable = targetMismatch(kernels->triple);
  if (kernels->unavailable.empty()) {
    const std::string missing = missingCpuFeatures(kernels->features);
    if (!missing.empty())
      kernels->unavailable = fmt::format("they were compiled for CPU {}, and this CPU lacks {}",
                                         quoteForMessage(kernels->cpu), missing);
  }
  return kernels;
}

void checkNoKernels(const Manifest &manifest, const std::string &target,
                    const std::string &path) {
  for (const char *name : {"forward", "gradients"}) {
    const Program &program = manifest.program(name);
    for (size_t i = 0; i < program.ops.size(); ++i)
      if (!program.ops[i].kernels.empty())
        throw Error(path, fmt::format("manifest.programs.{}.ops[{}] ({}) names a compiled "
                                      "kernel, but target {} has none (only \"cpu\" does)",
                                      name, i, program.ops[i].op, quoteForMessage(target)));
  }
}

} // namespace stringrt::detail
