// The driver API's initialisation, device and context entries, the error
// names and texts, and the emulator's call counters (not CUDA); the state
// they share is DriverState.h's.
#include "DriverState.h"

#include <fmt/format.h>

#include <cstdio>

namespace stringrt::emulator {
namespace {

constexpr const char *kDeviceName = "stringrt CUDA emulator (host CPU)";

int primaryContextTag; // the primary context's handle points here

struct ErrorText {
  CUresult code;
  const char *name;
  const char *text;
};
const ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
     "shared object initialization failed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
     "capture sequence contains a fork that was not joined to the primary stream"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not permitted"},
};

} // namespace
} // namespace stringrt::emulator

using namespace stringrt::emulator;

// ---- Initialisation, device, context ----

STRINGRT_EMU_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  Kernels &k = kernels();
  if (k.status != CUDA_SUCCESS)
    return k.status;
  state().initialised = true;
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuDeviceGetCount(int *count) {
  REQUIRE_INIT();
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  REQUIRE_INIT();
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
  REQUIRE_INIT();
  if (device != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!name || length <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, size_t(length), "%s", kDeviceName);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                                                  CUdevice device) {
  REQUIRE_INIT();
  if (device != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = 64; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = 0x7fffffff; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = 65535; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 48 << 10; break;
  // An H100's: a function may opt in to 227 KiB (cuFuncSetAttribute).
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = kSharedOptinBytes; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 1; break;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
  default:
    report(fmt::format("cuDeviceGetAttribute: attribute {} is not emulated", int(attribute)));
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  REQUIRE_INIT();
  if (device != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!context)
    return CUDA_ERROR_INVALID_VALUE;
  ++state().contextRefs;
  *context = reinterpret_cast<CUcontext>(&primaryContextTag);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  REQUIRE_INIT();
  if (device != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  if (state().contextRefs == 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  --state().contextRefs;
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuCtxSetCurrent(CUcontext context) {
  REQUIRE_INIT();
  if (context && context != reinterpret_cast<CUcontext>(&primaryContextTag))
    return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuCtxSynchronize() {
  REQUIRE_INIT();
  ++counters.hostWaits;
  // Everything has run already; a capture in progress is what CUDA refuses.
  if (CUresult refused = refuseDuringCapture("cuCtxSynchronize"); refused != CUDA_SUCCESS)
    return refused;
  return flushAll();
}

// ---- Errors ----

STRINGRT_EMU_EXPORT CUresult cuGetErrorName(CUresult error, const char **name) {
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  for (const ErrorText &e : kErrors)
    if (e.code == error) {
      *name = e.name;
      return CUDA_SUCCESS;
    }
  *name = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

STRINGRT_EMU_EXPORT CUresult cuGetErrorString(CUresult error, const char **text) {
  if (!text)
    return CUDA_ERROR_INVALID_VALUE;
  for (const ErrorText &e : kErrors)
    if (e.code == error) {
      *text = e.text;
      return CUDA_SUCCESS;
    }
  *text = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

// Not CUDA: the counts of Counters, into out[0..2] (kernel launches outside
// capture, graph launches, host waits), for tests that check what the
// runtime asks of the device (runtime/tests/cuda/EmulatorCounters.h). Found with dlsym.
STRINGRT_EMU_EXPORT void stringrt_emulator_counters(uint64_t *out) {
  out[0] = counters.kernelLaunches;
  out[1] = counters.graphLaunches;
  out[2] = counters.hostWaits;
}
