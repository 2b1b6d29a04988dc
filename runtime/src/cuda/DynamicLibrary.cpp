// dlopen and dlsym for the CUDA libraries (DynamicLibrary.h).
#include "DynamicLibrary.h"

#include <fmt/format.h>

#include <dlfcn.h>

namespace stringrt::cuda {

void *openFirstLibrary(const std::vector<std::string> &names, std::string &errors) {
  for (const std::string &name : names) {
    if (void *library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))
      return library;
    const char *error = dlerror(); // names the library
    errors += fmt::format("{}{}", errors.empty() ? "" : "; ",
                          error ? error : name + ": unknown reason");
  }
  return nullptr;
}

void *SymbolResolver::find(const char *symbol) {
  void *address = dlsym(library_, symbol);
  if (!address && !firstMissing_)
    firstMissing_ = symbol;
  return address;
}

} // namespace stringrt::cuda
