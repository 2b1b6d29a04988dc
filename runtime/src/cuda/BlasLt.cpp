// cuBLASLt through dlopen (BlasLt.h).
#include "BlasLt.h"
#include "DynamicLibrary.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

namespace stringrt::cuda::blaslt {
namespace {

// STRINGRT_CUBLASLT, else the library of the toolkit's major version, else
// the unversioned name.
std::vector<std::string> candidates() {
  if (const char *named = std::getenv("STRINGRT_CUBLASLT"); named && *named)
    return {named};
  return {fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR), "libcublasLt.so"};
}

LoadedApi<Api> load() {
  LoadedApi<Api> loaded;
  std::string errors;
  void *library = openFirstLibrary(candidates(), errors);
  if (!library) {
    loaded.why = fmt::format("the cuBLASLt library cannot be loaded ({})", errors);
    return loaded;
  }
  SymbolResolver get(library);
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
  get(a.algoConfigGetAttribute, "cublasLtMatmulAlgoConfigGetAttribute");
  get(a.getStatusString, "cublasLtGetStatusString");
  if (const char *missing = get.firstMissing()) {
    loaded.why = fmt::format("the cuBLASLt library has no {}", missing);
    return loaded;
  }
  loaded.ok = true;
  return loaded;
}

} // namespace

const Api *api(std::string *why) {
  static const LoadedApi<Api> loaded = load();
  return loaded.get(why);
}

} // namespace stringrt::cuda::blaslt
