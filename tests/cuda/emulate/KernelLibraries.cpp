// The host kernel libraries (Emulator.h, kernels()): the libraries
// host_kernels.py builds from stringc's NVVM, named by
// STRINGRT_EMULATED_KERNELS, and the kernels each one indexes.
#include "Emulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <sstream>

namespace stringrt::emulator {
namespace {

// One kernel's signature record:
// "params=ptr,i64,...;shared=N[;dynamic=N];regions=N;waits=0|1;hash=H".
bool parseSignature(const char *record, HostKernel &kernel) {
  std::string text(record);
  std::stringstream fields(text);
  std::string field;
  bool params = false, hash = false;
  while (std::getline(fields, field, ';')) {
    size_t eq = field.find('=');
    if (eq == std::string::npos)
      return false;
    std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "params") {
      params = true;
      std::stringstream types(value);
      std::string type;
      while (std::getline(types, type, ',')) {
        if (type == "ptr")
          kernel.params.push_back(ParamType::Ptr);
        else if (type == "i64")
          kernel.params.push_back(ParamType::I64);
        else if (type == "i32")
          kernel.params.push_back(ParamType::I32);
        else if (type == "f32")
          kernel.params.push_back(ParamType::F32);
        else
          return false;
      }
    } else if (key == "shared") {
      kernel.sharedBytes = std::strtoull(value.c_str(), nullptr, 10);
    } else if (key == "dynamic") {
      kernel.dynamicSharedBytes = std::strtoull(value.c_str(), nullptr, 10);
    } else if (key == "regions") {
      kernel.sharedRegions.resize(std::strtoull(value.c_str(), nullptr, 10));
    } else if (key == "waits") {
      if (value != "0" && value != "1")
        return false;
      kernel.waits = value == "1";
    } else if (key == "hash") {
      kernel.hash = value;
      hash = true;
    }
  }
  return params && hash;
}

// Makes this library's symbols (emu_*, __nv_*) visible to the kernel
// libraries, which leave them undefined: the runtime opens the emulator
// with RTLD_LOCAL.
bool exportOurSymbols() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void *>(&exportOurSymbols), &info) || !info.dli_fname)
    return false;
  return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL) != nullptr;
}

} // namespace

Kernels &kernels() {
  static Kernels k;
  if (k.loaded)
    return k;
  k.loaded = true;
  const char *list = std::getenv("STRINGRT_EMULATED_KERNELS");
  k.libraries = list ? list : "";
  if (k.libraries.empty())
    return k; // every cuModuleGetFunction then says why
  if (!exportOurSymbols()) {
    report(fmt::format("cannot make the emulator's symbols global for the kernels: {}",
                       dlerror() ? dlerror() : "dladdr failed"));
    k.status = CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
    return k;
  }
  std::stringstream paths(k.libraries);
  std::string path;
  while (std::getline(paths, path, ':')) {
    if (path.empty())
      continue;
    void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char *error = dlerror();
      report(fmt::format("STRINGRT_EMULATED_KERNELS: cannot load {}: {}", path,
                         error ? error : "unknown reason"));
      k.status = CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
      return k;
    }
    // The kernels of a library: its index, a comma-separated list of names.
    auto *index = static_cast<const char *>(dlsym(library, "stringrt_emulated_kernel_names"));
    if (!index) {
      report(fmt::format("{} has no kernel index (not built by host_kernels.py?)", path));
      k.status = CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
      return k;
    }
    std::stringstream names(index);
    std::string kernelName;
    size_t found = 0;
    while (std::getline(names, kernelName, ',')) {
      HostKernel kernel;
      kernel.name = kernelName;
      kernel.library = path;
      auto *record =
          static_cast<const char *>(dlsym(library, (kernelName + "_signature").c_str()));
      kernel.packed = reinterpret_cast<void (*)(const uint64_t *)>(
          dlsym(library, (kernelName + "_packed").c_str()));
      if (!record || !kernel.packed || !parseSignature(record, kernel)) {
        report(fmt::format("{}: kernel {} has no valid {}_packed / signature record", path,
                           kernelName, kernelName));
        k.status = CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
        return k;
      }
      if (!kernel.sharedRegions.empty()) {
        auto *regions = static_cast<const HostKernel::Region *>(
            dlsym(library, (kernelName + "_shared_regions").c_str()));
        if (!regions) {
          report(fmt::format("{}: kernel {} has no {}_shared_regions", path, kernelName,
                             kernelName));
          k.status = CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
          return k;
        }
        std::copy(regions, regions + kernel.sharedRegions.size(), kernel.sharedRegions.begin());
      }
      auto [it, inserted] = k.byName.emplace(kernelName, kernel);
      if (!inserted && it->second.hash != kernel.hash) {
        report(fmt::format("kernel {} is built from different code in {} and {}", kernelName,
                           it->second.library, path));
        k.status = CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
        return k;
      }
      ++found;
    }
    if (found == 0) {
      report(fmt::format("{} has no kernels (not built by host_kernels.py?)", path));
      k.status = CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
      return k;
    }
  }
  return k;
}

} // namespace stringrt::emulator
