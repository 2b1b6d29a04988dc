// Fuzz target: a whole model package file (docs/package.md) through
// Package::load, as stringrun loads one: the safetensors container, the
// metadata, the manifest JSON with its programs and arena plans, the cuda
// section (kernel table, PTX, cubin) and the cpu target's kernel metadata and
// section. A package that loads is then built into a Model on the reference
// kernels, which checks the programs against the manifest once more.
//
// A cpu package whose kernel library is an ELF file is skipped: past its
// checksum and header checks that library goes to the dynamic loader, which
// trusts a well-formed shared object (it runs its code), so mutated ones would
// only fuzz ld.so. Every check before that point is fuzzed (the seeds include
// a cpu package whose library has its ELF magic broken).
#include "FuzzFile.h"

#include "stringrt/Error.h"
#include "stringrt/KernelSet.h"
#include "stringrt/Model.h"
#include "stringrt/Package.h"
#include "stringrt/Safetensors.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
// Whether Package::load could hand this file's bytes to dlopen: target "cpu"
// and a kernel section that starts like an ELF file (KernelLibrary.cpp rejects
// any other before loading it).
bool reachesDynamicLoader(const std::string &path) {
  try {
    stringrt::SafetensorsFile file = stringrt::SafetensorsFile::open(path);
    auto target = file.metadata().find("target");
    if (target == file.metadata().end() || target->second != stringrt::kCpuTarget ||
        !file.find(stringrt::kKernelSection))
      return false;
    std::vector<uint8_t> library = file.readBytes(stringrt::kKernelSection);
    return library.size() >= 4 && std::memcmp(library.data(), "\x7f" "ELF", 4) == 0;
  } catch (const stringrt::Error &) {
    return false; // Package::load fails at the same point.
  }
}

// A model is built only when its parameters fit in 64 MiB: the fuzzer can
// declare any shape, and a huge model is not malformed, only large.
constexpr int64_t kMaxFuzzParameters = int64_t(16) << 20;
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static stringc::fuzz::FuzzFile file("model.pkg");
  file.write(data, size);
  if (reachesDynamicLoader(file.path()))
    return -1;
  try {
    stringrt::Package package = stringrt::Package::load(file.path());
    int64_t parameters = 0;
    for (const stringrt::ManifestParam &param : package.manifest().params) {
      int64_t n = param.numel();
      if (n > kMaxFuzzParameters - parameters)
        return 0;
      parameters += n;
    }
    stringrt::Model model(std::move(package), stringrt::KernelSet::Reference);
    if (model.parameterCount() != parameters)
      std::abort();
  } catch (const stringrt::Error &) {
    // Malformed input: a clear error is the right answer.
  }
  return 0;
}
