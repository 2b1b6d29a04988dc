// writePackage: a package file from its parts (Package.h), the inverse of
// Package::load: the metadata (format, version, target, the manifest's JSON,
// a cpu package's kernel keys, a cuda package's section JSON) and the binary
// sections as U8 tensors (docs/package.md).
#include "stringrt/Package.h"

#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"

#include <map>
#include <string>
#include <vector>

namespace stringrt {

void writePackage(const std::string &path, const PackageContents &contents) {
  const std::string &target = contents.target;
  const bool cpu = target == kCpuTarget, cuda = target == kCudaTarget;
  if (!cpu && !cuda && target != kReferenceTarget)
    throw Error(path, "cannot write a package of unknown target \"" + target + "\"");
  if (cpu != !contents.kernelObject.empty())
    throw Error(path, cpu ? "target \"cpu\" needs the compiled kernels' shared object"
                          : "target \"" + target + "\" carries no compiled CPU kernels");
  if (cuda != contents.cuda.has_value())
    throw Error(path, cuda ? "target \"cuda\" needs its GPU kernels"
                           : "target \"" + target + "\" carries no GPU kernels");

  std::map<std::string, std::string> metadata = {
      {"format", kPackageFormat},
      {"version", std::to_string(kPackageVersion)},
      {"target", target},
      {"manifest", writeManifestJson(contents.manifest)},
  };
  std::vector<TensorView> tensors;
  auto bytes = [](const std::string &name, const void *data, size_t size) {
    return TensorView{name, DType::U8, {int64_t(size)}, data};
  };
  if (cpu) {
    const std::string &object = contents.kernelObject;
    metadata["kernels_triple"] = contents.kernelTriple;
    metadata["kernels_cpu"] = contents.kernelCpu;
    metadata["kernels_features"] = contents.kernelFeatures;
    metadata["kernels_checksum"] = kernelChecksum(object.data(), object.size());
    tensors.push_back(bytes(kKernelSection, object.data(), object.size()));
  }
  if (cuda) {
    metadata["cuda"] = writeCudaSectionJson(*contents.cuda);
    for (const CudaKernel &kernel : contents.cuda->kernels) {
      tensors.push_back(bytes("ptx." + kernel.name, kernel.ptx.data(), kernel.ptx.size()));
      tensors.push_back(bytes("cubin." + kernel.name, kernel.cubin.data(), kernel.cubin.size()));
    }
  }
  writeSafetensors(path, tensors, metadata);
}

} // namespace stringrt
