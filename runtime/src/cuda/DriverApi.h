// The CUDA driver API, opened with dlopen (private to runtime/src/cuda).
// Linking libcuda would make every program that links the runtime fail to
// start on a machine without the driver; opening it on first use lets them
// run there and report "no CUDA driver" instead.
#pragma once

#include <cuda.h>

#include <string>

namespace stringrt::cuda::driver {

// The entry points used, with cuda.h's prototypes. A name here is the
// versioned symbol cuda.h maps the plain name to (cuMemAlloc -> _v2).
struct Api {
  decltype(&::cuInit) init;
  decltype(&::cuDeviceGetCount) deviceGetCount;
  decltype(&::cuDeviceGet) deviceGet;
  decltype(&::cuDeviceGetName) deviceGetName;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute;
  decltype(&::cuDevicePrimaryCtxRetain) primaryCtxRetain;
  decltype(&::cuDevicePrimaryCtxRelease) primaryCtxRelease;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent;
  decltype(&::cuCtxSynchronize) ctxSynchronize;
  decltype(&::cuMemAlloc) memAlloc;
  decltype(&::cuMemFree) memFree;
  decltype(&::cuMemGetInfo) memGetInfo;
  decltype(&::cuMemcpyHtoD) memcpyHtoD;
  decltype(&::cuMemcpyDtoH) memcpyDtoH;
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx;
  decltype(&::cuModuleUnload) moduleUnload;
  decltype(&::cuModuleGetFunction) moduleGetFunction;
  decltype(&::cuLaunchKernel) launchKernel;
  // A kernel's dynamic shared memory over 48 KiB (CudaKernel::dynamicShared).
  decltype(&::cuFuncSetAttribute) funcSetAttribute;
  decltype(&::cuStreamCreate) streamCreate;
  decltype(&::cuStreamDestroy) streamDestroy;
  decltype(&::cuStreamSynchronize) streamSynchronize;
  decltype(&::cuMemcpyHtoDAsync) memcpyHtoDAsync;
  decltype(&::cuMemcpyDtoHAsync) memcpyDtoHAsync;
  decltype(&::cuMemcpyDtoDAsync) memcpyDtoDAsync;
  decltype(&::cuMemsetD32Async) memsetD32Async;
  decltype(&::cuMemHostAlloc) memHostAlloc;
  decltype(&::cuMemFreeHost) memFreeHost;
  decltype(&::cuStreamBeginCapture) streamBeginCapture;
  decltype(&::cuStreamEndCapture) streamEndCapture;
  decltype(&::cuGraphInstantiate) graphInstantiate;
  decltype(&::cuGraphLaunch) graphLaunch;
  decltype(&::cuGraphExecDestroy) graphExecDestroy;
  decltype(&::cuGraphDestroy) graphDestroy;
  // Events: the batch upload on a second stream (DeviceExecutor's staging).
  decltype(&::cuEventCreate) eventCreate;
  decltype(&::cuEventRecord) eventRecord;
  decltype(&::cuStreamWaitEvent) streamWaitEvent;
  decltype(&::cuEventSynchronize) eventSynchronize;
  // Polling a step that waits on other ranks (DeviceRankStep.cpp).
  decltype(&::cuEventQuery) eventQuery;
  decltype(&::cuEventDestroy) eventDestroy;
  // The time between two events (DeviceOptions::profile).
  decltype(&::cuEventElapsedTime) eventElapsedTime;
  decltype(&::cuGetErrorName) getErrorName;
  decltype(&::cuGetErrorString) getErrorString;
};

// The API, or nullptr with `why` set (library or symbol missing, cuInit
// failing). Loaded once per process.
const Api *api(std::string *why = nullptr);
// The API; throws Error("CUDA is not available: <why>") when missing.
const Api &require();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string describe(CUresult result);
// Throws Error("CUDA error in <step>: <call> failed: <describe>") unless
// `result` is CUDA_SUCCESS.
void check(CUresult result, const std::string &step, const std::string &call);

} // namespace stringrt::cuda::driver
