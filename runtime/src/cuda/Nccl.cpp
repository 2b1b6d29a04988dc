// NCCL through dlopen (Nccl.h).
#include "Nccl.h"
#include "DynamicLibrary.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

namespace stringrt::cuda::nccl {
namespace {

// STRINGRT_NCCL, else NCCL 2's library, else the unversioned name.
std::vector<std::string> candidates() {
  if (const char *named = std::getenv("STRINGRT_NCCL"); named && *named)
    return {named};
  return {"libnccl.so.2", "libnccl.so"};
}

LoadedApi<Api> load() {
  LoadedApi<Api> loaded;
  std::string errors;
  void *library = openFirstLibrary(candidates(), errors);
  if (!library) {
    loaded.why = fmt::format("the NCCL library cannot be loaded ({}); a data-parallel run on "
                             "GPUs needs NCCL 2 (libnccl2), or STRINGRT_NCCL naming it",
                             errors);
    return loaded;
  }
  SymbolResolver get(library);
  Api &a = loaded.api;
  get(a.getUniqueId, "ncclGetUniqueId");
  get(a.commInitRank, "ncclCommInitRank");
  get(a.allReduce, "ncclAllReduce");
  get(a.reduceScatter, "ncclReduceScatter");
  get(a.allGather, "ncclAllGather");
  get(a.reduce, "ncclReduce");
  get(a.commDestroy, "ncclCommDestroy");
  get(a.commAbort, "ncclCommAbort");
  get(a.commGetAsyncError, "ncclCommGetAsyncError");
  get(a.getErrorString, "ncclGetErrorString");
  get(a.getLastError, "ncclGetLastError");
  if (const char *missing = get.firstMissing()) {
    loaded.why = fmt::format("the NCCL library has no {} (NCCL 2.13 or later is needed)",
                             missing);
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

const Api &require() { return loadedOnce().require("NCCL"); }

std::string describe(Result result, comm_t comm) {
  const Api *a = api();
  std::string text = a ? a->getErrorString(result) : fmt::format("NCCL error {}", int(result));
  if (a && comm)
    if (const char *last = a->getLastError(comm); last && *last)
      text += std::string(": ") + last;
  return text;
}

} // namespace stringrt::cuda::nccl
