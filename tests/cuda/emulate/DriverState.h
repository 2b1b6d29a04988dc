// The CUDA driver API entries the runtime uses (runtime/src/cuda/DriverApi.h),
// on the host CPU: one device, "memory" is host memory (device pointers are
// host addresses), modules map the package's kernels to their host builds
// (STRINGRT_EMULATED_KERNELS), operations run at the call in stream order,
// and stream capture records them into graphs that cuGraphLaunch replays.
// Calls CUDA refuses during capture are refused the same way.
//
// This private header is the driver state those entries share: the
// allocations, streams, events, captures and graphs, the call counters, and
// the queueing and flushing of operations (DriverState.cpp). The entries:
// DriverDevice.cpp (initialisation, device, context, errors, counters),
// DriverMemory.cpp (allocations, copies, memsets), DriverLaunch.cpp
// (modules, launches), DriverStreams.cpp (streams, capture, graphs, events),
// DriverTrace.cpp (the order of the operations, for tests).
//
// The definitions use cuda.h's plain names; its macros give them the
// versioned symbols the runtime looks up (cuMemAlloc -> cuMemAlloc_v2).
#pragma once

#include "Emulator.h"

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#define STRINGRT_EMU_EXPORT extern "C" __attribute__((visibility("default")))

namespace stringrt::emulator {

// ---- State ----

struct Allocation {
  char *mapping;
  size_t mapped; // bytes, the guard page included
  size_t bytes;  // asked for
};

struct Capture;

struct Stream;
// A point in a stream: its operations up to number `seq`.
struct StreamPoint {
  Stream *stream;
  uint64_t seq;
};

struct Queued {
  uint64_t seq;
  Operation op;
  std::vector<StreamPoint> after; // what must have run first (events, legacy stream)
};

struct Stream {
  unsigned flags = 0;
  Capture *capture = nullptr;
  uint64_t captured = 0; // operations recorded, for fork/join tracking
  std::deque<Queued> queue; // issued, not yet run
  uint64_t issued = 0;      // number of the last operation issued
  std::vector<StreamPoint> waits; // cuStreamWaitEvent: for the next operation
};

struct Graph {
  std::vector<Operation> operations;
};

struct Capture {
  CUstreamCaptureMode mode;
  std::thread::id owner;
  Stream *origin;
  Graph *graph;
  bool invalidated = false;
  std::set<Stream *> members; // the origin and streams forked into the capture
  std::set<Stream *> unjoined;
};

struct Event {
  std::chrono::steady_clock::time_point when{};
  bool recorded = false;
  Capture *capture = nullptr; // recorded during this capture
  Stream *stream = nullptr;
  uint64_t capturedAtRecord = 0;
  uint64_t seq = 0; // outside capture: the stream's operation it follows
};

struct Module; // a loaded image (DriverLaunch.cpp)

// The emulator's state. The runtime calls the API from one thread; so do
// the tests (no locking).
struct State {
  bool initialised = false;
  std::map<uint64_t, Allocation> allocations; // by the address handed out
  size_t allocated = 0;
  std::map<const char *, size_t> hostAllocations; // pinned memory: address, bytes
  std::set<Stream *> streams;
  std::vector<std::unique_ptr<Stream>> retiredStreams;
  std::set<Capture *> captures;
  std::set<Graph *> graphs;
  std::set<Graph *> execs;
  std::set<Module *> modules;
  std::set<Event *> events;
  int contextRefs = 0;
};

State &state();

// What the host asked of the "device", for tests of the runtime's own
// behaviour (stringrt_emulator_counters, DriverDevice.cpp).
struct Counters {
  uint64_t kernelLaunches = 0; // cuLaunchKernel on a stream not capturing
  uint64_t graphLaunches = 0;  // cuGraphLaunch
  uint64_t hostWaits = 0;      // cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize,
                               // cuMemcpyHtoD / cuMemcpyDtoH
};
extern Counters counters;

extern Stream legacyStream; // the NULL stream / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD

#define REQUIRE_INIT()                                                                             \
  do {                                                                                             \
    if (!state().initialised)                                                                      \
      return CUDA_ERROR_NOT_INITIALIZED;                                                           \
  } while (0)

// ---- Streams and capture (DriverState.cpp) ----

// The stream of a handle (the legacy stream for NULL, CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD), or null when it names none.
Stream *streamOf(CUstream handle);

// Whether a call CUDA refuses while capturing is made now: a capture of
// this thread (thread-local or global mode) or of any thread (global).
// Then every such capture is invalidated (as on hardware) and the call is
// refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
CUresult refuseDuringCapture(const char *call);

// Runs the queued operations of `stream` up to number `seq`, each after
// what it depends on. The first error is returned (reported when it
// happened); later operations still run, as on a GPU they would have been
// launched already.
CUresult flush(Stream *stream, uint64_t seq);
CUresult flushStream(Stream *stream); // everything issued on it, and the events it waits for
CUresult flushAll();                  // every stream's

// enqueue (Emulator.h) on a stream already looked up.
CUresult enqueueOn(Stream *stream, Operation op);

// ---- The trace (DriverTrace.cpp) ----

// Writes `op`, issued to `stream` (recorded into a graph when `captured`),
// to the trace STRINGRT_CUDA_EMULATOR_TRACE names; nothing without one.
void traceOperation(const Stream *stream, const Operation &op, bool captured);

} // namespace stringrt::emulator
