// cuBLAS through dlopen (Blas.h).
#include "Blas.h"
#include "DynamicLibrary.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

namespace stringrt::cuda::blas {
namespace {

// STRINGRT_CUBLAS, else the library of the toolkit's major version, else
// the unversioned name (a toolkit's development link).
std::vector<std::string> candidates() {
  if (const char *named = std::getenv("STRINGRT_CUBLAS"); named && *named)
    return {named};
  return {fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR), "libcublas.so"};
}

LoadedApi<Api> load() {
  LoadedApi<Api> loaded;
  std::string errors;
  void *library = openFirstLibrary(candidates(), errors);
  if (!library) {
    loaded.why = fmt::format("the cuBLAS library cannot be loaded ({})", errors);
    return loaded;
  }
  SymbolResolver get(library);
  Api &a = loaded.api;
  get(a.create, "cublasCreate_v2");
  get(a.destroy, "cublasDestroy_v2");
  get(a.gemmEx, "cublasGemmEx");
  get(a.gemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
  get(a.gemmBatchedEx, "cublasGemmBatchedEx");
  get(a.saxpy, "cublasSaxpy_v2");
  get(a.setStream, "cublasSetStream_v2");
  get(a.setWorkspace, "cublasSetWorkspace_v2");
  get(a.getStatusString, "cublasGetStatusString");
  if (const char *missing = get.firstMissing()) {
    loaded.why = fmt::format("the cuBLAS library has no {}", missing);
    return loaded;
  }
  loaded.ok = true;
  return loaded;
}

const LoadedApi<Api> &loadedOnce() {
  static const LoadedApi<Api> loaded = load();
  return loaded;
}

} // namespace

const Api *api(std::string *why) { return loadedOnce().get(why); }

const Api &require() { return loadedOnce().require("cuBLAS"); }

} // namespace stringrt::cuda::blas
