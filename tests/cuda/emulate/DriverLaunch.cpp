// The driver API's module and launch entries: a package's cubin or PTX
// image loaded as its entry names (each needing a host build of the kernel,
// Emulator.h's kernels()), and launches queued on their stream; the state
// they share is DriverState.h's.
#include "DriverState.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <elf.h>

namespace stringrt::emulator {

struct Function {
  const HostKernel *kernel;
  std::string name;
  unsigned maxThreads = 1024;
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: the dynamic shared
  // memory a launch may ask for (48 KiB less the static until raised).
  unsigned maxDynamicShared = 0;
};

struct Module {
  std::set<std::string> entries;
  std::vector<std::unique_ptr<Function>> functions; // handed out; freed on unload
  // From a PTX image: each entry's parameter types (".u64", ".f32", ...)
  // and its .maxntid, when given.
  std::map<std::string, std::vector<std::string>> ptxParams;
  std::map<std::string, unsigned> maxThreads;
};

namespace {

// ---- Module images ----

// Entry names of a cubin: the ELF's function symbols.
bool cubinEntries(const unsigned char *image, Module &module) {
  const auto *header = reinterpret_cast<const Elf64_Ehdr *>(image);
  if (header->e_ident[EI_CLASS] != ELFCLASS64 || header->e_shentsize != sizeof(Elf64_Shdr))
    return false;
  const auto *sections = reinterpret_cast<const Elf64_Shdr *>(image + header->e_shoff);
  for (unsigned i = 0; i < header->e_shnum; ++i) {
    if (sections[i].sh_type != SHT_SYMTAB || sections[i].sh_link >= header->e_shnum)
      continue;
    const auto *symbols = reinterpret_cast<const Elf64_Sym *>(image + sections[i].sh_offset);
    const char *names = reinterpret_cast<const char *>(image +
                                                       sections[sections[i].sh_link].sh_offset);
    size_t count = sections[i].sh_size / sizeof(Elf64_Sym);
    for (size_t s = 0; s < count; ++s)
      if (ELF64_ST_TYPE(symbols[s].st_info) == STT_FUNC &&
          ELF64_ST_BIND(symbols[s].st_info) == STB_GLOBAL)
        module.entries.insert(names + symbols[s].st_name);
  }
  return true;
}

// Entry names, parameter types and .maxntid of a PTX text.
void ptxEntries(const char *text, Module &module) {
  const std::string ptx(text);
  size_t at = 0;
  while ((at = ptx.find(".entry ", at)) != std::string::npos) {
    at += 7;
    size_t open = ptx.find('(', at);
    if (open == std::string::npos)
      break;
    std::string name = ptx.substr(at, open - at);
    name.erase(std::remove_if(name.begin(), name.end(), ::isspace), name.end());
    module.entries.insert(name);
    size_t close = ptx.find(')', open);
    std::vector<std::string> types;
    std::string params = ptx.substr(open + 1, close - open - 1);
    size_t p = 0;
    while ((p = params.find(".param", p)) != std::string::npos) {
      p += 6;
      size_t dot = params.find('.', p);
      size_t end = params.find_first_of(" \t\n", dot);
      types.push_back(params.substr(dot, end - dot));
    }
    module.ptxParams[name] = types;
    size_t body = ptx.find('{', close);
    std::string between = ptx.substr(close, body - close);
    if (size_t maxntid = between.find(".maxntid"); maxntid != std::string::npos) {
      unsigned x = 1, y = 1, z = 1;
      std::sscanf(between.c_str() + maxntid + 8, " %u , %u , %u", &x, &y, &z);
      module.maxThreads[name] = x * y * z;
    }
  }
}

const char *ptxTypeFor(ParamType type) {
  switch (type) {
  case ParamType::Ptr:
  case ParamType::I64:
    return ".u64";
  case ParamType::I32:
    return ".u32";
  case ParamType::F32:
    return ".f32";
  }
  return "?";
}

} // namespace
} // namespace stringrt::emulator

using namespace stringrt::emulator;

// ---- Modules and launches ----

STRINGRT_EMU_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                                unsigned int numOptions, CUjit_option *options,
                                                void **optionValues) {
  REQUIRE_INIT();
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  auto loaded = std::make_unique<Module>();
  const auto *bytes = static_cast<const unsigned char *>(image);
  bool ok = true;
  if (std::memcmp(bytes, ELFMAG, SELFMAG) == 0)
    ok = cubinEntries(bytes, *loaded);
  else
    ptxEntries(static_cast<const char *>(image), *loaded);
  if (!ok || loaded->entries.empty()) {
    const char *why = "stringrt CUDA emulator: the image is neither a 64-bit cubin nor PTX with "
                      "an .entry";
    report(why);
    for (unsigned i = 0; i + 1 < numOptions; ++i)
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER && options[i + 1] ==
                                                       CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
        size_t size = size_t(reinterpret_cast<uintptr_t>(optionValues[i + 1]));
        if (size)
          std::snprintf(static_cast<char *>(optionValues[i]), size, "%s", why);
      }
    return CUDA_ERROR_INVALID_IMAGE;
  }
  Module *raw = loaded.release();
  state().modules.insert(raw);
  *module = reinterpret_cast<CUmodule>(raw);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuModuleUnload(CUmodule handle) {
  REQUIRE_INIT();
  auto *module = reinterpret_cast<Module *>(handle);
  if (!state().modules.erase(module))
    return CUDA_ERROR_INVALID_HANDLE;
  delete module; // and its functions (a graph keeps the host kernel, not them)
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuModuleGetFunction(CUfunction *function, CUmodule handle,
                                                 const char *name) {
  REQUIRE_INIT();
  auto *module = reinterpret_cast<Module *>(handle);
  if (!function || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!state().modules.count(module))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!module->entries.count(name)) {
    report(fmt::format("cuModuleGetFunction({}): the module's image has no such entry", name));
    return CUDA_ERROR_NOT_FOUND;
  }
  Kernels &k = kernels();
  auto it = k.byName.find(name);
  if (it == k.byName.end()) {
    report(fmt::format("cuModuleGetFunction({}): no host build of this kernel in "
                       "STRINGRT_EMULATED_KERNELS ({})",
                       name, k.libraries.empty() ? "not set" : k.libraries));
    return CUDA_ERROR_NOT_FOUND;
  }
  const HostKernel &kernel = it->second;
  if (auto params = module->ptxParams.find(name); params != module->ptxParams.end()) {
    bool same = params->second.size() == kernel.params.size();
    for (size_t i = 0; same && i < kernel.params.size(); ++i) {
      std::string want = ptxTypeFor(kernel.params[i]), have = params->second[i];
      same = have == want || (want == ".u64" && have == ".b64") ||
             (want == ".u32" && (have == ".b32" || have == ".s32"));
    }
    if (!same) {
      report(fmt::format("cuModuleGetFunction({}): the PTX's parameters differ from the host "
                         "build's (a stale STRINGRT_EMULATED_KERNELS library?)",
                         name));
      return CUDA_ERROR_INVALID_IMAGE;
    }
  }
  module->functions.push_back(std::make_unique<Function>(
      Function{&kernel, name, 1024, unsigned((48u << 10) - std::min<size_t>(kernel.sharedBytes, 48u << 10))}));
  Function *made = module->functions.back().get();
  if (auto limit = module->maxThreads.find(name); limit != module->maxThreads.end())
    made->maxThreads = limit->second;
  *function = reinterpret_cast<CUfunction>(made);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuFuncSetAttribute(CUfunction handle, CUfunction_attribute attribute,
                                                int value) {
  REQUIRE_INIT();
  if (!handle)
    return CUDA_ERROR_INVALID_HANDLE;
  Function &function = *reinterpret_cast<Function *>(handle);
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    report(fmt::format("cuFuncSetAttribute({}): attribute {} is not emulated", function.name,
                       int(attribute)));
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The static and the dynamic shared memory together within the opt-in limit.
  if (value < 0 || size_t(value) + function.kernel->sharedBytes > size_t(kSharedOptinBytes)) {
    report(fmt::format("cuFuncSetAttribute({}): {} bytes of dynamic shared memory with {} static "
                       "exceed the device's {}",
                       function.name, value, function.kernel->sharedBytes, kSharedOptinBytes));
    return CUDA_ERROR_INVALID_VALUE;
  }
  function.maxDynamicShared = unsigned(value);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuLaunchKernel(CUfunction handle, unsigned int gridX,
                                            unsigned int gridY, unsigned int gridZ,
                                            unsigned int blockX, unsigned int blockY,
                                            unsigned int blockZ, unsigned int sharedBytes,
                                            CUstream stream, void **params, void **extra) {
  REQUIRE_INIT();
  if (!handle)
    return CUDA_ERROR_INVALID_HANDLE;
  const Function &function = *reinterpret_cast<const Function *>(handle);
  const HostKernel &kernel = *function.kernel;
  std::string what = fmt::format("kernel {} (grid {}x{}x{}, block {}x{}x{})", function.name, gridX,
                                 gridY, gridZ, blockX, blockY, blockZ);
  uint64_t threads = uint64_t(blockX) * blockY * blockZ;
  if (gridX == 0 || gridY == 0 || gridZ == 0 || threads == 0 || gridX > 0x7fffffffu ||
      gridY > 65535 || gridZ > 65535 || blockX > 1024 || blockY > 1024 || blockZ > 64 ||
      threads > 1024) {
    report(what + ": grid or block outside the device's limits");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (threads > function.maxThreads) {
    report(fmt::format("{}: {} threads, the kernel's .maxntid allows {}", what, threads,
                       function.maxThreads));
    return CUDA_ERROR_INVALID_VALUE;
  }
  // As a GPU: static shared memory up to 48 KiB, dynamic up to what the
  // function allows (cuFuncSetAttribute); and as the emulator needs: no more
  // dynamic than the kernel's extern array holds on the host.
  if (kernel.sharedBytes > (48u << 10) || sharedBytes > function.maxDynamicShared) {
    report(fmt::format("{}: {} bytes of static and {} of dynamic shared memory (static at most "
                       "48 KiB, dynamic at most the function's "
                       "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, {})",
                       what, kernel.sharedBytes, sharedBytes, function.maxDynamicShared));
    return CUDA_ERROR_INVALID_VALUE;
  }
  // (A kernel without one cannot address what it is given: nothing to check.)
  if (kernel.dynamicSharedBytes > 0 && sharedBytes > kernel.dynamicSharedBytes) {
    report(fmt::format("{}: {} bytes of dynamic shared memory, but the kernel's extern shared "
                       "array holds {} in the emulator",
                       what, sharedBytes, kernel.dynamicSharedBytes));
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (extra || (!params && !kernel.params.empty()))
    return CUDA_ERROR_INVALID_VALUE;
  // The arguments are copied now, as CUDA does (also when capturing).
  std::vector<uint64_t> slots(kernel.params.size(), 0);
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    size_t size = kernel.params[i] == ParamType::I32 || kernel.params[i] == ParamType::F32 ? 4 : 8;
    std::memcpy(&slots[i], params[i], size);
  }
  LaunchDims dims;
  dims.grid = {gridX, gridY, gridZ};
  dims.block = {blockX, blockY, blockZ};
  if (Stream *target = streamOf(stream); target && !target->capture)
    ++counters.kernelLaunches;
  return enqueue(stream, {what, [&kernel, dims, slots]() { return runKernel(kernel, dims, slots); }});
}
