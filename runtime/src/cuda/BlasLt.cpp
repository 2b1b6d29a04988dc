// cuBLASLt through dlopen (BlasLt.h).
#include "BlasLt.h"

#include <fmt/format.h>

#include <cstdlib>
#include <dlfcn.h>
#include <type_traits>
#include <vector>

namespace stringrt::cuda::blaslt {
namespace {

struct Loaded {
  Api api{};
  bool ok = false;
  std::string why;
};

// STRINGRT_CUBLASLT, else the library of the toolkit's major version, else
// the unversioned name.
std::vector<std::string> candidates() {
  if (const char *named = std::getenv("STRINGRT_CUBLASLT"); named && *named)
    return {named};
  return {fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR), "libcublasLt.so"};
}

Loaded load() {
  Loaded loaded;
  void *library = nullptr;
  std::string errors;
  for (const std::string &name : candidates()) {
    library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library)
      break;
    const char *error = dlerror();
    errors += fmt::format("{}{}", errors.empty() ? "" : "; ",
                          error ? error : name + ": unknown reason");
  }
  if (!library) {
    loaded.why = fmt::format("the cuBLASLt library cannot be loaded ({})", errors);
    return loaded;
  }
  bool missing = false;
  auto get = [&](auto &slot, const char *symbol) {
    void *address = dlsym(library, symbol);
    if (!address && !missing) {
      missing = true;
      loaded.why = fmt::format("the cuBLASLt library has no {}", symbol);
    }
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(address);
  };
  Api &a = loaded.api;
  get(a.create, "cublasLtCreate");
  get(a.destroy, "cublasLtDestroy");
  get(a.matmulDescCreate, "cublasLtMatmulDescCreate");
  get(a.matmulDescDestroy, "cublasLtMatmulDescDestroy");
  get(a.matmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
  get(a.matrixLayoutCreate, "cublasLtMatrixLayoutCreate");
  get(a.matrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
  get(a.preferenceCreate, "cublasLtMatmulPreferenceCreate");
  get(a.preferenceDestroy, "cublasLtMatmulPreferenceDestroy");
  get(a.preferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  get(a.algoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  get(a.matmul, "cublasLtMatmul");
  get(a.getStatusString, "cublasLtGetStatusString");
  loaded.ok = !missing;
  return loaded;
}

} // namespace

const Api *api(std::string *why) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    if (why)
      *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

} // namespace stringrt::cuda::blaslt
