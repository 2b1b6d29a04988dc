// cuBLAS through dlopen (Blas.h).
#include "Blas.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <cstdlib>
#include <dlfcn.h>
#include <type_traits>
#include <vector>

namespace stringrt::cuda::blas {
namespace {

struct Loaded {
  Api api{};
  bool ok = false;
  std::string why;
};

// STRINGRT_CUBLAS, else the library of the toolkit's major version, else
// the unversioned name (a toolkit's development link).
std::vector<std::string> candidates() {
  if (const char *named = std::getenv("STRINGRT_CUBLAS"); named && *named)
    return {named};
  return {fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR), "libcublas.so"};
}

Loaded load() {
  Loaded loaded;
  void *library = nullptr;
  std::string errors;
  for (const std::string &name : candidates()) {
    library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library)
      break;
    const char *error = dlerror(); // names the library
    errors += fmt::format("{}{}", errors.empty() ? "" : "; ",
                          error ? error : name + ": unknown reason");
  }
  if (!library) {
    loaded.why = fmt::format("the cuBLAS library cannot be loaded ({})", errors);
    return loaded;
  }
  bool missing = false;
  auto get = [&](auto &slot, const char *symbol) {
    void *address = dlsym(library, symbol);
    if (!address && !missing) {
      missing = true;
      loaded.why = fmt::format("the cuBLAS library has no {}", symbol);
    }
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(address);
  };
  Api &a = loaded.api;
  get(a.create, "cublasCreate_v2");
  get(a.destroy, "cublasDestroy_v2");
  get(a.gemmEx, "cublasGemmEx");
  get(a.gemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
  get(a.setStream, "cublasSetStream_v2");
  get(a.setWorkspace, "cublasSetWorkspace_v2");
  get(a.getStatusString, "cublasGetStatusString");
  loaded.ok = !missing;
  return loaded;
}

const Loaded &loadedOnce() {
  static const Loaded loaded = load();
  return loaded;
}

} // namespace

const Api *api(std::string *why) {
  const Loaded &loaded = loadedOnce();
  if (!loaded.ok) {
    if (why)
      *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

const Api &require() {
  std::string why;
  const Api *a = api(&why);
  if (!a)
    throw Error("cuBLAS is not available: " + why);
  return *a;
}

} // namespace stringrt::cuda::blas
