// The driver state the entries share (DriverState.h): streams' queues, run
// as late as CUDA allows, capture's refusals and recording, allocations.
#include "DriverState.h"

#include <fmt/format.h>

#include <cstdio>

namespace stringrt::emulator {

void report(const std::string &message) {
  std::fprintf(stderr, "stringrt CUDA emulator: %s\n", message.c_str());
}

State &state() {
  static State s;
  return s;
}

Counters counters;
Stream legacyStream;

Stream *streamOf(CUstream handle) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD)
    return &legacyStream;
  auto *stream = reinterpret_cast<Stream *>(handle);
  return state().streams.count(stream) ? stream : nullptr;
}

CUresult refuseDuringCapture(const char *call) {
  bool refused = false;
  for (Capture *capture : state().captures) {
    bool applies = capture->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
                   (capture->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                    capture->owner == std::this_thread::get_id());
    if (applies) {
      capture->invalidated = true;
      refused = true;
    }
  }
  if (!refused)
    return CUDA_SUCCESS;
  report(fmt::format("{} during stream capture: CUDA refuses it "
                     "(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and invalidates the capture",
                     call));
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult flush(Stream *stream, uint64_t seq) {
  CUresult first = CUDA_SUCCESS;
  while (!stream->queue.empty() && stream->queue.front().seq <= seq) {
    Queued item = std::move(stream->queue.front());
    stream->queue.pop_front();
    for (const StreamPoint &point : item.after)
      if (CUresult result = flush(point.stream, point.seq); first == CUDA_SUCCESS)
        first = result;
    CUresult result = item.op.run();
    if (result != CUDA_SUCCESS)
      report(fmt::format("{} failed", item.op.what));
    if (first == CUDA_SUCCESS)
      first = result;
  }
  return first;
}

CUresult flushStream(Stream *stream) {
  CUresult first = flush(stream, stream->issued);
  // Waits for events not yet followed by work are the stream's too: work
  // after them, and a synchronisation with the stream, wait for the events.
  for (const StreamPoint &point : stream->waits)
    if (CUresult result = flush(point.stream, point.seq); first == CUDA_SUCCESS)
      first = result;
  return first;
}

CUresult flushAll() {
  CUresult first = flushStream(&legacyStream);
  for (Stream *stream : state().streams)
    if (CUresult result = flushStream(stream); first == CUDA_SUCCESS)
      first = result;
  return first;
}

bool insideAllocation(uint64_t address, uint64_t bytes, const std::string &what) {
  auto &allocations = state().allocations;
  auto it = allocations.upper_bound(address);
  if (it != allocations.begin()) {
    --it;
    if (address >= it->first && bytes <= it->second.bytes &&
        address - it->first <= it->second.bytes - bytes)
      return true;
  }
  report(fmt::format("{}: device bytes [{:#x}, {:#x}) are not inside one allocation", what,
                     address, address + bytes));
  return false;
}

CUresult enqueueOn(Stream *stream, Operation op) {
  if (Capture *capture = stream->capture) {
    if (capture->invalidated)
      return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    traceOperation(stream, op, true);
    capture->graph->operations.push_back(std::move(op));
    ++stream->captured;
    if (stream != capture->origin)
      capture->unjoined.insert(stream);
    return CUDA_SUCCESS;
  }
  // Legacy-stream work while a capture would see it (an implicit
  // synchronisation with the capturing stream) is refused.
  if (stream == &legacyStream)
    if (CUresult refused = refuseDuringCapture(op.what.c_str()); refused != CUDA_SUCCESS)
      return refused;
  traceOperation(stream, op, false);
  Queued item{++stream->issued, std::move(op), std::move(stream->waits)};
  stream->waits.clear();
  // The legacy stream waits for the blocking streams' earlier work, and
  // they for its (non-blocking streams do not).
  if (stream == &legacyStream) {
    for (Stream *other : state().streams)
      if (!(other->flags & CU_STREAM_NON_BLOCKING))
        item.after.push_back({other, other->issued});
  } else if (!(stream->flags & CU_STREAM_NON_BLOCKING)) {
    item.after.push_back({&legacyStream, legacyStream.issued});
  }
  stream->queue.push_back(std::move(item));
  return CUDA_SUCCESS;
}

CUresult enqueue(CUstream handle, Operation op) {
  Stream *stream = streamOf(handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  return enqueueOn(stream, std::move(op));
}

} // namespace stringrt::emulator
