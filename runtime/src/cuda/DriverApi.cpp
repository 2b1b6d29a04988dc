// The CUDA driver API through dlopen (DriverApi.h).
#include "DriverApi.h"
#include "DynamicLibrary.h"

#include "stringrt/Error.h"

#include <fmt/format.h>

#include <cstdlib>

namespace stringrt::cuda::driver {
namespace {

LoadedApi<Api> load() {
  LoadedApi<Api> loaded;
  // STRINGRT_CUDA_DRIVER: another library with the driver API (the host
  // emulator of tests/cuda/emulate, docs/cuda.md "Emulator").
  const char *named = std::getenv("STRINGRT_CUDA_DRIVER");
  const std::string path = named && *named ? named : "libcuda.so.1";
  std::string error;
  void *library = openFirstLibrary({path}, error);
  if (!library) {
    loaded.why = fmt::format("the CUDA driver library {} cannot be loaded ({})", path, error);
    return loaded;
  }
  SymbolResolver get(library);
  Api &a = loaded.api;
  get(a.init, "cuInit");
  get(a.deviceGetCount, "cuDeviceGetCount");
  get(a.deviceGet, "cuDeviceGet");
  get(a.deviceGetName, "cuDeviceGetName");
  get(a.deviceGetAttribute, "cuDeviceGetAttribute");
  get(a.primaryCtxRetain, "cuDevicePrimaryCtxRetain");
  get(a.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  get(a.ctxSetCurrent, "cuCtxSetCurrent");
  get(a.ctxSynchronize, "cuCtxSynchronize");
  get(a.memAlloc, "cuMemAlloc_v2");
  get(a.memFree, "cuMemFree_v2");
  get(a.memGetInfo, "cuMemGetInfo_v2");
  get(a.memcpyHtoD, "cuMemcpyHtoD_v2");
  get(a.memcpyDtoH, "cuMemcpyDtoH_v2");
  get(a.moduleLoadDataEx, "cuModuleLoadDataEx");
  get(a.moduleUnload, "cuModuleUnload");
  get(a.moduleGetFunction, "cuModuleGetFunction");
  get(a.launchKernel, "cuLaunchKernel");
  get(a.funcSetAttribute, "cuFuncSetAttribute");
  // The versioned symbols cuda.h maps these names to (no per-thread
  // default stream: __CUDA_API_PTSZ is the plain name).
  get(a.streamCreate, "cuStreamCreate");
  get(a.streamDestroy, "cuStreamDestroy_v2");
  get(a.streamSynchronize, "cuStreamSynchronize");
  get(a.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  get(a.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  get(a.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  get(a.memsetD32Async, "cuMemsetD32Async");
  get(a.memHostAlloc, "cuMemHostAlloc");
  get(a.memFreeHost, "cuMemFreeHost");
  get(a.streamBeginCapture, "cuStreamBeginCapture_v2");
  get(a.streamEndCapture, "cuStreamEndCapture");
  get(a.graphInstantiate, "cuGraphInstantiateWithFlags");
  get(a.graphLaunch, "cuGraphLaunch");
  get(a.graphExecDestroy, "cuGraphExecDestroy");
  get(a.graphDestroy, "cuGraphDestroy");
  get(a.eventCreate, "cuEventCreate");
  get(a.eventRecord, "cuEventRecord");
  get(a.streamWaitEvent, "cuStreamWaitEvent");
  get(a.eventSynchronize, "cuEventSynchronize");
  get(a.eventQuery, "cuEventQuery");
  get(a.eventDestroy, "cuEventDestroy_v2");
  get(a.eventElapsedTime, "cuEventElapsedTime_v2");
  get(a.getErrorName, "cuGetErrorName");
  get(a.getErrorString, "cuGetErrorString");
  if (const char *missing = get.firstMissing()) {
    loaded.why = fmt::format("the CUDA driver has no {} (driver too old?)", missing);
    return loaded;
  }
  CUresult result = a.init(0);
  if (result != CUDA_SUCCESS) {
    const char *name = nullptr;
    a.getErrorName(result, &name);
    loaded.why = fmt::format("cuInit failed: {}", name ? name : std::to_string(int(result)));
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

const Api &require() { return loadedOnce().require("CUDA"); }

std::string describe(CUresult result) {
  const Api *a = api();
  const char *name = nullptr, *text = nullptr;
  if (a) {
    a->getErrorName(result, &name);
    a->getErrorString(result, &text);
  }
  return fmt::format("{} ({})", name ? name : fmt::format("CUresult {}", int(result)),
                     text ? text : "no description");
}

void check(CUresult result, const std::string &step, const std::string &call) {
  if (result != CUDA_SUCCESS)
    throw Error(fmt::format("CUDA error in {}: {} failed: {}", step, call, describe(result)));
}

} // namespace stringrt::cuda::driver
