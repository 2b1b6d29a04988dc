// The driver API's stream, capture, graph and event entries: streams'
// queues and their synchronisation, capture into graphs (events forking
// streams into a capture and joining them back), graph replay, events
// ordering streams; the state they share is DriverState.h's.
#include "DriverState.h"

#include <fmt/format.h>

namespace stringrt::emulator {
namespace {

CUresult refuseOnCapturingStream(Stream *stream, const char *call) {
  if (!stream->capture)
    return CUDA_SUCCESS;
  stream->capture->invalidated = true;
  report(fmt::format("{} on a capturing stream: CUDA refuses it "
                     "(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and invalidates the capture",
                     call));
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult runGraph(const Graph &graph) {
  for (const Operation &op : graph.operations)
    if (CUresult result = op.run(); result != CUDA_SUCCESS) {
      report(fmt::format("graph replay: {} failed", op.what));
      return result;
    }
  return CUDA_SUCCESS;
}

} // namespace
} // namespace stringrt::emulator

using namespace stringrt::emulator;

// ---- Streams, capture, graphs ----

STRINGRT_EMU_EXPORT CUresult cuStreamCreate(CUstream *handle, unsigned int flags) {
  REQUIRE_INIT();
  if (!handle || (flags & ~unsigned(CU_STREAM_NON_BLOCKING)))
    return CUDA_ERROR_INVALID_VALUE;
  auto *stream = new Stream{flags, nullptr};
  state().streams.insert(stream);
  *handle = reinterpret_cast<CUstream>(stream);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuStreamDestroy(CUstream handle) {
  REQUIRE_INIT();
  auto *stream = reinterpret_cast<Stream *>(handle);
  if (!state().streams.count(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  if (stream->capture)
    return refuseOnCapturingStream(stream, "cuStreamDestroy");
  // Its queued work still runs (now); the object stays, as queued work of
  // other streams may name it as a dependency.
  CUresult pending = flushStream(stream);
  state().streams.erase(stream);
  state().retiredStreams.push_back(std::unique_ptr<Stream>(stream));
  return pending;
}

STRINGRT_EMU_EXPORT CUresult cuStreamSynchronize(CUstream handle) {
  REQUIRE_INIT();
  ++counters.hostWaits;
  Stream *stream = streamOf(handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  CUresult refused = stream == &legacyStream
                         ? refuseDuringCapture("cuStreamSynchronize(legacy stream)")
                         : refuseOnCapturingStream(stream, "cuStreamSynchronize");
  if (refused != CUDA_SUCCESS)
    return refused;
  return flushStream(stream);
}

STRINGRT_EMU_EXPORT CUresult cuStreamBeginCapture(CUstream handle, CUstreamCaptureMode mode) {
  REQUIRE_INIT();
  Stream *stream = streamOf(handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (stream == &legacyStream) {
    report("cuStreamBeginCapture on the legacy (NULL) stream: CUDA refuses it");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  if (stream->capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  auto *capture = new Capture{mode, std::this_thread::get_id(), stream, new Graph, false, {stream},
                              {}};
  state().captures.insert(capture);
  stream->capture = capture;
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuStreamEndCapture(CUstream handle, CUgraph *graph) {
  REQUIRE_INIT();
  Stream *stream = streamOf(handle);
  if (!stream || !graph)
    return CUDA_ERROR_INVALID_VALUE;
  Capture *capture = stream->capture;
  if (!capture || capture->origin != stream)
    return CUDA_ERROR_ILLEGAL_STATE;
  if (capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
      capture->owner != std::this_thread::get_id())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  for (Stream *member : capture->members)
    member->capture = nullptr;
  state().captures.erase(capture);
  std::unique_ptr<Capture> ended(capture);
  std::unique_ptr<Graph> recorded(capture->graph);
  *graph = nullptr;
  if (capture->invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (!capture->unjoined.empty()) {
    report("cuStreamEndCapture: a stream forked into the capture was not joined back");
    return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  }
  state().graphs.insert(recorded.get());
  *graph = reinterpret_cast<CUgraph>(recorded.release());
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuGraphInstantiate(CUgraphExec *exec, CUgraph handle,
                                                unsigned long long flags) {
  REQUIRE_INIT();
  (void)flags;
  auto *graph = reinterpret_cast<Graph *>(handle);
  if (!exec || !state().graphs.count(graph))
    return CUDA_ERROR_INVALID_VALUE;
  auto *copy = new Graph(*graph);
  state().execs.insert(copy);
  *exec = reinterpret_cast<CUgraphExec>(copy);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuGraphLaunch(CUgraphExec handle, CUstream stream) {
  REQUIRE_INIT();
  ++counters.graphLaunches;
  auto *exec = reinterpret_cast<Graph *>(handle);
  if (!state().execs.count(exec))
    return CUDA_ERROR_INVALID_HANDLE;
  // Into a capturing stream the graph's operations are recorded (a child
  // graph on hardware); else they run now.
  Stream *target = streamOf(stream);
  if (!target)
    return CUDA_ERROR_INVALID_HANDLE;
  if (target->capture) {
    for (const Operation &op : exec->operations)
      if (CUresult result = enqueue(stream, op); result != CUDA_SUCCESS)
        return result;
    return CUDA_SUCCESS;
  }
  const Graph *graph = exec;
  return enqueue(stream, {"cuGraphLaunch", [graph]() { return runGraph(*graph); }});
}

STRINGRT_EMU_EXPORT CUresult cuGraphExecDestroy(CUgraphExec handle) {
  REQUIRE_INIT();
  auto *exec = reinterpret_cast<Graph *>(handle);
  if (!state().execs.erase(exec))
    return CUDA_ERROR_INVALID_HANDLE;
  CUresult pending = flushAll(); // a queued launch of it runs first
  delete exec;
  return pending;
}

STRINGRT_EMU_EXPORT CUresult cuGraphDestroy(CUgraph handle) {
  REQUIRE_INIT();
  auto *graph = reinterpret_cast<Graph *>(handle);
  if (!state().graphs.erase(graph))
    return CUDA_ERROR_INVALID_HANDLE;
  delete graph;
  return CUDA_SUCCESS;
}

// ---- Events ----

STRINGRT_EMU_EXPORT CUresult cuEventCreate(CUevent *handle, unsigned int flags) {
  REQUIRE_INIT();
  (void)flags;
  if (!handle)
    return CUDA_ERROR_INVALID_VALUE;
  auto *event = new Event;
  state().events.insert(event);
  *handle = reinterpret_cast<CUevent>(event);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuEventDestroy(CUevent handle) {
  REQUIRE_INIT();
  auto *event = reinterpret_cast<Event *>(handle);
  if (!state().events.erase(event))
    return CUDA_ERROR_INVALID_HANDLE;
  CUresult pending = CUDA_SUCCESS; // its queued record still runs
  if (event->recorded && !event->capture && event->stream)
    pending = flush(event->stream, event->seq);
  delete event;
  return pending;
}

// Outside capture the event marks the stream's last queued operation; it
// completes (takes its time) when the stream gets there. During capture it
// marks the capturing stream's point,
// which cuStreamWaitEvent uses to fork another stream into the capture or
// join it back.
STRINGRT_EMU_EXPORT CUresult cuEventRecord(CUevent handle, CUstream hStream) {
  REQUIRE_INIT();
  auto *event = reinterpret_cast<Event *>(handle);
  Stream *stream = streamOf(hStream);
  if (!state().events.count(event) || !stream)
    return CUDA_ERROR_INVALID_HANDLE;
  event->stream = stream;
  event->capture = stream->capture;
  if (stream->capture) {
    if (stream->capture->invalidated)
      return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    event->capturedAtRecord = stream->captured;
    event->recorded = true;
    return CUDA_SUCCESS;
  }
  CUresult queued = enqueueOn(stream, {"cuEventRecord", [event]() {
                                         event->when = std::chrono::steady_clock::now();
                                         return CUDA_SUCCESS;
                                       }});
  if (queued != CUDA_SUCCESS)
    return queued;
  event->seq = stream->issued;
  event->recorded = true;
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent handle,
                                               unsigned int flags) {
  REQUIRE_INIT();
  (void)flags;
  auto *event = reinterpret_cast<Event *>(handle);
  Stream *stream = streamOf(hStream);
  if (!state().events.count(event) || !stream)
    return CUDA_ERROR_INVALID_HANDLE;
  Capture *capture = event->capture;
  if (capture && state().captures.count(capture)) {
    if (!stream->capture) { // fork: the stream joins the capture
      stream->capture = capture;
      capture->members.insert(stream);
    } else if (stream->capture == capture && event->stream != stream &&
               event->stream->captured == event->capturedAtRecord) {
      capture->unjoined.erase(event->stream); // join: nothing after the event on its stream
    } else if (stream->capture != capture) {
      report("cuStreamWaitEvent: an event of one capture waited on in another");
      capture->invalidated = stream->capture->invalidated = true;
      return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    return CUDA_SUCCESS;
  }
  // Outside capture: the stream's next operation runs after the event's.
  if (event->recorded && event->stream && !event->capture && !stream->capture)
    stream->waits.push_back({event->stream, event->seq});
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuEventSynchronize(CUevent handle) {
  REQUIRE_INIT();
  ++counters.hostWaits;
  auto *event = reinterpret_cast<Event *>(handle);
  if (!state().events.count(event))
    return CUDA_ERROR_INVALID_HANDLE;
  if (event->capture && state().captures.count(event->capture)) {
    event->capture->invalidated = true;
    report("cuEventSynchronize on an event recorded during a capture: CUDA refuses it");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (CUresult refused = refuseDuringCapture("cuEventSynchronize"); refused != CUDA_SUCCESS)
    return refused;
  return event->recorded && event->stream ? flush(event->stream, event->seq) : CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuEventQuery(CUevent handle) {
  REQUIRE_INIT();
  auto *event = reinterpret_cast<Event *>(handle);
  if (!state().events.count(event))
    return CUDA_ERROR_INVALID_HANDLE;
  // Done once the stream gets there: let it.
  if (event->recorded && !event->capture && event->stream)
    return flush(event->stream, event->seq);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
  REQUIRE_INIT();
  auto *a = reinterpret_cast<Event *>(start), *b = reinterpret_cast<Event *>(end);
  if (!ms || !state().events.count(a) || !state().events.count(b))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!a->recorded || !b->recorded || a->capture || b->capture)
    return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult pending = flush(a->stream, a->seq); pending != CUDA_SUCCESS)
    return pending;
  if (CUresult pending = flush(b->stream, b->seq); pending != CUDA_SUCCESS)
    return pending;
  *ms = std::chrono::duration<float, std::milli>(b->when - a->when).count();
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuStreamQuery(CUstream hStream) {
  REQUIRE_INIT();
  Stream *stream = streamOf(hStream);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult refused = refuseOnCapturingStream(stream, "cuStreamQuery");
      refused != CUDA_SUCCESS)
    return refused;
  return flushStream(stream); // done once it is asked about
}

// ---- Host functions ----

// A host function in stream order (captured into a graph like any
// operation, and called at each replay): what the NCCL stand-in
// (NcclEmulator.cpp) queues its collectives as, so that they run where the
// stream has got to, inside a step's graph too, as NCCL's kernels do.
STRINGRT_EMU_EXPORT CUresult cuLaunchHostFunc(CUstream handle, CUhostFn fn, void *userData) {
  REQUIRE_INIT();
  if (!fn)
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(handle, {"a host function", [=]() {
                            fn(userData);
                            return CUDA_SUCCESS;
                          }});
}

// cuLaunchHostFunc with the name its messages and the trace give it (not
// CUDA's: the NCCL stand-in's "ncclAllReduce (N floats)").
STRINGRT_EMU_EXPORT CUresult stringrt_emulator_launch_host_func(CUstream handle, CUhostFn fn,
                                                                void *userData,
                                                                const char *what) {
  REQUIRE_INIT();
  if (!fn || !what)
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(handle, {what, [=]() {
                            fn(userData);
                            return CUDA_SUCCESS;
                          }});
}
