// Loading the compiled CPU kernels of a "cpu" package (PackageKernels.h).
#include "PackageKernels.h"

#include "Json.h"
#include "stringrt/Error.h"

#include <fmt/format.h>

namespace stringrt::detail {

namespace {
const char *const kKernelKeys[] = {"kernels_triple", "kernels_cpu", "kernels_features",
                                   "kernels_checksum"};
} // namespace

bool isKernelMetadataKey(std::string_view key) {
  for (const char *k : kKernelKeys)
    if (key == k)
      return true;
  return false;
}

CpuKernels loadCpuKernels(const SafetensorsFile &file,
                          const std::map<std::string, std::string> &metadata,
                          const Manifest &manifest, const std::string &path) {
  for (const char *key : kKernelKeys)
    if (!metadata.count(key))
      throw Error(path, fmt::format("target cpu needs \"{}\" in the metadata", key));
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

  CpuKernels kernels;
  kernels.triple = metadata.at("kernels_triple");
  kernels.cpu = metadata.at("kernels_cpu");
  kernels.features = metadata.at("kernels_features");
  kernels.unavailable = missingCpuFeatures(kernels.features);
  kernels.library = KernelLibrary::load(bytes, path);
  for (const char *name : {"forward", "gradients"}) {
    const Program &program = manifest.program(name);
    for (size_t i = 0; i < program.ops.size(); ++i)
      for (const ProgramKernel &k : program.ops[i].kernels) {
        if (!kernels.library->find(k.symbol))
          throw Error(path, fmt::format("manifest.programs.{}.ops[{}] ({}): the kernel library "
                                        "has no kernel {}",
                                        name, i, program.ops[i].op,
                                        quoteForMessage(k.symbol)));
      }
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
