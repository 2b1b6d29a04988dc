// The CUDA driver API entries the runtime uses (runtime/src/cuda/Driver.h),
// on the host CPU: one device, "memory" is host memory (device pointers are
// host addresses), modules map the package's kernels to their host builds
// (STRINGRT_EMULATED_KERNELS), operations run at the call in stream order,
// and stream capture records them into graphs that cuGraphLaunch replays.
// Calls CUDA refuses during capture are refused the same way.
//
// The definitions use cuda.h's plain names; its macros give them the
// versioned symbols the runtime looks up (cuMemAlloc -> cuMemAlloc_v2).
#include "Emulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

#define STRINGRT_EMU_EXPORT extern "C" __attribute__((visibility("default")))

namespace stringrt::emulator {

void report(const std::string &message) {
  std::fprintf(stderr, "stringrt CUDA emulator: %s\n", message.c_str());
}

namespace {

constexpr const char *kDeviceName = "stringrt CUDA emulator (host CPU)";
constexpr size_t kPage = 4096;

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

struct Function {
  const HostKernel *kernel;
  std::string name;
  unsigned maxThreads = 1024;
};

struct Module {
  std::set<std::string> entries;
  std::vector<std::unique_ptr<Function>> functions; // handed out; freed on unload
  // From a PTX image: each entry's parameter types (".u64", ".f32", ...)
  // and its .maxntid, when given.
  std::map<std::string, std::vector<std::string>> ptxParams;
  std::map<std::string, unsigned> maxThreads;
};

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

State &state() {
  static State s;
  return s;
}

// What the host asked of the "device", for tests of the runtime's own
// behaviour (stringrt_emulator_counters below).
struct Counters {
  uint64_t kernelLaunches = 0; // cuLaunchKernel on a stream not capturing
  uint64_t graphLaunches = 0;  // cuGraphLaunch
  uint64_t hostWaits = 0;      // cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize,
                               // cuMemcpyHtoD / cuMemcpyDtoH
} counters;

int primaryContextTag; // the primary context's handle points here
Stream legacyStream;   // the NULL stream / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD

size_t totalMemory() {
  if (const char *bytes = std::getenv("STRINGRT_EMULATOR_MEMORY"); bytes && *bytes)
    return std::strtoull(bytes, nullptr, 10);
  long pages = sysconf(_SC_PHYS_PAGES);
  return pages > 0 ? size_t(pages) * kPage : size_t(16) << 30;
}

Stream *streamOf(CUstream handle) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD)
    return &legacyStream;
  auto *stream = reinterpret_cast<Stream *>(handle);
  return state().streams.count(stream) ? stream : nullptr;
}

// Whether a call CUDA refuses while capturing is made now: a capture of
// this thread (thread-local or global mode) or of any thread (global).
// Then every such capture is invalidated (as on hardware) and the call is
// refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
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

CUresult refuseOnCapturingStream(Stream *stream, const char *call) {
  if (!stream->capture)
    return CUDA_SUCCESS;
  stream->capture->invalidated = true;
  report(fmt::format("{} on a capturing stream: CUDA refuses it "
                     "(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and invalidates the capture",
                     call));
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

// Runs the queued operations of `stream` up to number `seq`, each after
// what it depends on. The first error is returned (reported when it
// happened); later operations still run, as on a GPU they would have been
// launched already.
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

CUresult flushStream(Stream *stream) { return flush(stream, stream->issued); }

CUresult flushAll() {
  CUresult first = flushStream(&legacyStream);
  for (Stream *stream : state().streams)
    if (CUresult result = flushStream(stream); first == CUDA_SUCCESS)
      first = result;
  return first;
}

bool pinned(const void *pointer, size_t bytes) {
  auto &pins = state().hostAllocations;
  auto it = pins.upper_bound(static_cast<const char *>(pointer));
  if (it == pins.begin())
    return false;
  --it;
  const char *p = static_cast<const char *>(pointer);
  return p >= it->first && bytes <= it->second && size_t(p - it->first) <= it->second - bytes;
}

CUresult runGraph(const Graph &graph) {
  for (const Operation &op : graph.operations)
    if (CUresult result = op.run(); result != CUDA_SUCCESS) {
      report(fmt::format("graph replay: {} failed", op.what));
      return result;
    }
  return CUDA_SUCCESS;
}

// ---- Module images ----

// Entry names of a cubin: the ELF's function symbols.
bool cubinEntries(const unsigned char *image, Module &module) {
  const auto *header = reinterpret_cast<const Elf64_Ehdr *>(image);
  if (header->e_ident[EI_CLASS] != ELFCLASS64 || header->e_shentsize != sizeof(Elf64_Shdr))
    return false;
  const auto *sections = reinterpret_cast<const Elf64_Shdr *>(image + header->e_shoff);
  for (unsigned i = 0; i < header->e_shnum; ++i) {
    if (sections[i].sh_type != SHT_SYMTAB || sections[i].sh_link >= header->e_shnum)
      continue;
    const auto *symbols = reinterpret_cast<const Elf64_Sym *>(image + sections[i].sh_offset);
    const char *names = reinterpret_cast<const char *>(image +
                                                       sections[sections[i].sh_link].sh_offset);
    size_t count = sections[i].sh_size / sizeof(Elf64_Sym);
    for (size_t s = 0; s < count; ++s)
      if (ELF64_ST_TYPE(symbols[s].st_info) == STT_FUNC &&
          ELF64_ST_BIND(symbols[s].st_info) == STB_GLOBAL)
        module.entries.insert(names + symbols[s].st_name);
  }
  return true;
}

// Entry names, parameter types and .maxntid of a PTX text.
void ptxEntries(const char *text, Module &module) {
  const std::string ptx(text);
  size_t at = 0;
  while ((at = ptx.find(".entry ", at)) != std::string::npos) {
    at += 7;
    size_t open = ptx.find('(', at);
    if (open == std::string::npos)
      break;
    std::string name = ptx.substr(at, open - at);
    name.erase(std::remove_if(name.begin(), name.end(), ::isspace), name.end());
    module.entries.insert(name);
    size_t close = ptx.find(')', open);
    std::vector<std::string> types;
    std::string params = ptx.substr(open + 1, close - open - 1);
    size_t p = 0;
    while ((p = params.find(".param", p)) != std::string::npos) {
      p += 6;
      size_t dot = params.find('.', p);
      size_t end = params.find_first_of(" \t\n", dot);
      types.push_back(params.substr(dot, end - dot));
    }
    module.ptxParams[name] = types;
    size_t body = ptx.find('{', close);
    std::string between = ptx.substr(close, body - close);
    if (size_t maxntid = between.find(".maxntid"); maxntid != std::string::npos) {
      unsigned x = 1, y = 1, z = 1;
      std::sscanf(between.c_str() + maxntid + 8, " %u , %u , %u", &x, &y, &z);
      module.maxThreads[name] = x * y * z;
    }
  }
}

const char *ptxTypeFor(ParamType type) {
  switch (type) {
  case ParamType::Ptr:
  case ParamType::I64:
    return ".u64";
  case ParamType::I32:
    return ".u32";
  case ParamType::F32:
    return ".f32";
  }
  return "?";
}

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

#define REQUIRE_INIT()                                                                             \
  do {                                                                                             \
    if (!state().initialised)                                                                      \
      return CUDA_ERROR_NOT_INITIALIZED;                                                           \
  } while (0)

} // namespace

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

namespace {

CUresult enqueueOn(Stream *stream, Operation op) {
  if (Capture *capture = stream->capture) {
    if (capture->invalidated)
      return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
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

} // namespace

CUresult enqueue(CUstream handle, Operation op) {
  Stream *stream = streamOf(handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  return enqueueOn(stream, std::move(op));
}


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

// ---- Memory ----

STRINGRT_EMU_EXPORT CUresult cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  REQUIRE_INIT();
  if (!pointer || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult refused = refuseDuringCapture("cuMemAlloc"); refused != CUDA_SUCCESS)
    return refused;
  State &s = state();
  size_t total = totalMemory();
  if (bytes > total - std::min(total, s.allocated)) {
    report(fmt::format("cuMemAlloc({} bytes): out of memory ({} of {} bytes in use)", bytes,
                       s.allocated, total));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // The allocation ends where a PROT_NONE page begins, so that a kernel
  // running past its end faults instead of reading a neighbour.
  size_t aligned = (bytes + 255) / 256 * 256;
  size_t pages = (aligned + kPage - 1) / kPage * kPage;
  size_t mapped = pages + kPage;
  void *mapping = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) {
    report(fmt::format("cuMemAlloc({} bytes): the host cannot map it", bytes));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  char *base = static_cast<char *>(mapping);
  mprotect(base + pages, kPage, PROT_NONE);
  uint64_t address = uint64_t(base + pages - aligned);
  // Fresh device memory is garbage on hardware, not zeros: NaN (0xFF bytes)
  // makes a kernel that reads what nobody wrote show it.
  std::memset(reinterpret_cast<void *>(address), 0xFF, aligned);
  s.allocations[address] = Allocation{base, mapped, bytes};
  s.allocated += bytes;
  *pointer = CUdeviceptr(address);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuMemFree(CUdeviceptr pointer) {
  REQUIRE_INIT();
  if (CUresult refused = refuseDuringCapture("cuMemFree"); refused != CUDA_SUCCESS)
    return refused;
  State &s = state();
  auto it = s.allocations.find(uint64_t(pointer));
  if (it == s.allocations.end()) {
    report(fmt::format("cuMemFree({:#x}): not an allocation", uint64_t(pointer)));
    return CUDA_ERROR_INVALID_VALUE;
  }
  // cuMemFree synchronises: queued work may still use the memory.
  CUresult pending = flushAll();
  munmap(it->second.mapping, it->second.mapped);
  s.allocated -= it->second.bytes;
  s.allocations.erase(it);
  return pending;
}

STRINGRT_EMU_EXPORT CUresult cuMemGetInfo(size_t *free, size_t *total) {
  REQUIRE_INIT();
  if (!free || !total)
    return CUDA_ERROR_INVALID_VALUE;
  *total = totalMemory();
  *free = *total - std::min(*total, state().allocated);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuMemHostAlloc(void **pointer, size_t bytes, unsigned int flags) {
  REQUIRE_INIT();
  (void)flags;
  if (!pointer)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult refused = refuseDuringCapture("cuMemHostAlloc"); refused != CUDA_SUCCESS)
    return refused;
  size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  void *memory = std::aligned_alloc(256, rounded);
  if (!memory)
    return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(memory, 0xFF, rounded); // garbage, as on hardware (see cuMemAlloc)
  state().hostAllocations[static_cast<const char *>(memory)] = rounded;
  *pointer = memory;
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuMemFreeHost(void *pointer) {
  REQUIRE_INIT();
  if (CUresult refused = refuseDuringCapture("cuMemFreeHost"); refused != CUDA_SUCCESS)
    return refused;
  if (!state().hostAllocations.count(static_cast<const char *>(pointer)))
    return CUDA_ERROR_INVALID_VALUE;
  CUresult pending = flushAll(); // synchronises, like cuMemFree
  state().hostAllocations.erase(static_cast<const char *>(pointer));
  std::free(pointer);
  return pending;
}

namespace {

// The device side of a copy must lie inside one allocation (checked at the
// call, as CUDA checks its pointers).
bool validCopy(const char *what, size_t bytes, uint64_t deviceDst, uint64_t deviceSrc) {
  std::string name = fmt::format("{} of {} bytes", what, bytes);
  return bytes == 0 || ((!deviceDst || insideAllocation(deviceDst, bytes, name)) &&
                        (!deviceSrc || insideAllocation(deviceSrc, bytes, name)));
}

Operation copyOperation(const char *what, void *dst, const void *src, size_t bytes) {
  return {fmt::format("{} of {} bytes", what, bytes), [=]() {
            if (bytes)
              std::memmove(dst, src, bytes);
            return CUDA_SUCCESS;
          }};
}

// A copy that returns once done: queued on `stream`, then run with what
// comes before it.
CUresult copyNow(CUstream handle, Operation op) {
  Stream *stream = streamOf(handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult queued = enqueueOn(stream, std::move(op)); queued != CUDA_SUCCESS)
    return queued;
  return stream->capture ? CUDA_SUCCESS : flushStream(stream);
}

} // namespace

STRINGRT_EMU_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes) {
  REQUIRE_INIT();
  ++counters.hostWaits;
  if (!validCopy("cuMemcpyHtoD", bytes, uint64_t(dst), 0))
    return CUDA_ERROR_INVALID_VALUE;
  return copyNow(nullptr, copyOperation("cuMemcpyHtoD", reinterpret_cast<void *>(dst), src,
                                        bytes));
}

STRINGRT_EMU_EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes) {
  REQUIRE_INIT();
  ++counters.hostWaits;
  if (!validCopy("cuMemcpyDtoH", bytes, 0, uint64_t(src)))
    return CUDA_ERROR_INVALID_VALUE;
  return copyNow(nullptr, copyOperation("cuMemcpyDtoH", dst, reinterpret_cast<void *>(src),
                                        bytes));
}

// From pageable memory CUDA stages the data before returning (the caller
// may reuse its buffer at once); from pinned memory (cuMemHostAlloc) the
// copy reads the buffer when it runs.
STRINGRT_EMU_EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes,
                                               CUstream stream) {
  REQUIRE_INIT();
  if (!validCopy("cuMemcpyHtoDAsync", bytes, uint64_t(dst), 0))
    return CUDA_ERROR_INVALID_VALUE;
  Stream *target = streamOf(stream);
  if (target && !target->capture && !pinned(src, bytes)) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char *>(src),
                                                      static_cast<const char *>(src) + bytes);
    void *out = reinterpret_cast<void *>(dst);
    return enqueue(stream, {fmt::format("cuMemcpyHtoDAsync of {} bytes (staged)", bytes),
                            [=]() {
                              if (bytes)
                                std::memcpy(out, staged->data(), bytes);
                              return CUDA_SUCCESS;
                            }});
  }
  return enqueue(stream, copyOperation("cuMemcpyHtoDAsync", reinterpret_cast<void *>(dst), src,
                                       bytes));
}

// Into pageable memory CUDA returns once the copy is done; into pinned
// memory it returns at once, the data arriving when the stream gets there.
STRINGRT_EMU_EXPORT CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes,
                                               CUstream stream) {
  REQUIRE_INIT();
  if (!validCopy("cuMemcpyDtoHAsync", bytes, 0, uint64_t(src)))
    return CUDA_ERROR_INVALID_VALUE;
  Operation op = copyOperation("cuMemcpyDtoHAsync", dst, reinterpret_cast<void *>(src), bytes);
  if (pinned(dst, bytes))
    return enqueue(stream, std::move(op));
  return copyNow(stream, std::move(op));
}

STRINGRT_EMU_EXPORT CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                               CUstream stream) {
  REQUIRE_INIT();
  if (!validCopy("cuMemcpyDtoDAsync", bytes, uint64_t(dst), uint64_t(src)))
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(stream, copyOperation("cuMemcpyDtoDAsync", reinterpret_cast<void *>(dst),
                                       reinterpret_cast<void *>(src), bytes));
}

STRINGRT_EMU_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                                              CUstream stream) {
  REQUIRE_INIT();
  if (uint64_t(dst) % 4)
    return CUDA_ERROR_INVALID_VALUE;
  std::string name = fmt::format("cuMemsetD32Async of {} words", count);
  if (count && !insideAllocation(uint64_t(dst), count * 4, name))
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(stream, {name, [=]() {
                            auto *words = reinterpret_cast<uint32_t *>(dst);
                            std::fill(words, words + count, uint32_t(value));
                            return CUDA_SUCCESS;
                          }});
}

// ---- Modules and launches ----

STRINGRT_EMU_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                                unsigned int numOptions, CUjit_option *options,
                                                void **optionValues) {
  REQUIRE_INIT();
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  auto loaded = std::make_unique<Module>();
  const auto *bytes = static_cast<const unsigned char *>(image);
  bool ok = true;
  if (std::memcmp(bytes, ELFMAG, SELFMAG) == 0)
    ok = cubinEntries(bytes, *loaded);
  else
    ptxEntries(static_cast<const char *>(image), *loaded);
  if (!ok || loaded->entries.empty()) {
    const char *why = "stringrt CUDA emulator: the image is neither a 64-bit cubin nor PTX with "
                      "an .entry";
    report(why);
    for (unsigned i = 0; i + 1 < numOptions; ++i)
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER && options[i + 1] ==
                                                       CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
        size_t size = size_t(reinterpret_cast<uintptr_t>(optionValues[i + 1]));
        if (size)
          std::snprintf(static_cast<char *>(optionValues[i]), size, "%s", why);
      }
    return CUDA_ERROR_INVALID_IMAGE;
  }
  Module *raw = loaded.release();
  state().modules.insert(raw);
  *module = reinterpret_cast<CUmodule>(raw);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuModuleUnload(CUmodule handle) {
  REQUIRE_INIT();
  auto *module = reinterpret_cast<Module *>(handle);
  if (!state().modules.erase(module))
    return CUDA_ERROR_INVALID_HANDLE;
  delete module; // and its functions (a graph keeps the host kernel, not them)
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuModuleGetFunction(CUfunction *function, CUmodule handle,
                                                 const char *name) {
  REQUIRE_INIT();
  auto *module = reinterpret_cast<Module *>(handle);
  if (!function || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!state().modules.count(module))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!module->entries.count(name)) {
    report(fmt::format("cuModuleGetFunction({}): the module's image has no such entry", name));
    return CUDA_ERROR_NOT_FOUND;
  }
  Kernels &k = kernels();
  auto it = k.byName.find(name);
  if (it == k.byName.end()) {
    report(fmt::format("cuModuleGetFunction({}): no host build of this kernel in "
                       "STRINGRT_EMULATED_KERNELS ({})",
                       name, k.libraries.empty() ? "not set" : k.libraries));
    return CUDA_ERROR_NOT_FOUND;
  }
  const HostKernel &kernel = it->second;
  if (auto params = module->ptxParams.find(name); params != module->ptxParams.end()) {
    bool same = params->second.size() == kernel.params.size();
    for (size_t i = 0; same && i < kernel.params.size(); ++i) {
      std::string want = ptxTypeFor(kernel.params[i]), have = params->second[i];
      same = have == want || (want == ".u64" && have == ".b64") ||
             (want == ".u32" && (have == ".b32" || have == ".s32"));
    }
    if (!same) {
      report(fmt::format("cuModuleGetFunction({}): the PTX's parameters differ from the host "
                         "build's (a stale STRINGRT_EMULATED_KERNELS library?)",
                         name));
      return CUDA_ERROR_INVALID_IMAGE;
    }
  }
  module->functions.push_back(std::make_unique<Function>(Function{&kernel, name, 1024}));
  Function *made = module->functions.back().get();
  if (auto limit = module->maxThreads.find(name); limit != module->maxThreads.end())
    made->maxThreads = limit->second;
  *function = reinterpret_cast<CUfunction>(made);
  return CUDA_SUCCESS;
}

STRINGRT_EMU_EXPORT CUresult cuLaunchKernel(CUfunction handle, unsigned int gridX,
                                            unsigned int gridY, unsigned int gridZ,
                                            unsigned int blockX, unsigned int blockY,
                                            unsigned int blockZ, unsigned int sharedBytes,
                                            CUstream stream, void **params, void **extra) {
  REQUIRE_INIT();
  if (!handle)
    return CUDA_ERROR_INVALID_HANDLE;
  const Function &function = *reinterpret_cast<const Function *>(handle);
  const HostKernel &kernel = *function.kernel;
  std::string what = fmt::format("kernel {} (grid {}x{}x{}, block {}x{}x{})", function.name, gridX,
                                 gridY, gridZ, blockX, blockY, blockZ);
  uint64_t threads = uint64_t(blockX) * blockY * blockZ;
  if (gridX == 0 || gridY == 0 || gridZ == 0 || threads == 0 || gridX > 0x7fffffffu ||
      gridY > 65535 || gridZ > 65535 || blockX > 1024 || blockY > 1024 || blockZ > 64 ||
      threads > 1024) {
    report(what + ": grid or block outside the device's limits");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (threads > function.maxThreads) {
    report(fmt::format("{}: {} threads, the kernel's .maxntid allows {}", what, threads,
                       function.maxThreads));
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (sharedBytes != 0 || kernel.sharedBytes > (48u << 10)) {
    report(fmt::format("{}: {} bytes of static and {} of dynamic shared memory (the emulator "
                       "runs static shared memory up to 48 KiB only)",
                       what, kernel.sharedBytes, sharedBytes));
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (extra || (!params && !kernel.params.empty()))
    return CUDA_ERROR_INVALID_VALUE;
  // The arguments are copied now, as CUDA does (also when capturing).
  std::vector<uint64_t> slots(kernel.params.size(), 0);
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    size_t size = kernel.params[i] == ParamType::I32 || kernel.params[i] == ParamType::F32 ? 4 : 8;
    std::memcpy(&slots[i], params[i], size);
  }
  LaunchDims dims;
  dims.grid = {gridX, gridY, gridZ};
  dims.block = {blockX, blockY, blockZ};
  if (Stream *target = streamOf(stream); target && !target->capture)
    ++counters.kernelLaunches;
  return enqueue(stream, {what, [&kernel, dims, slots]() { return runKernel(kernel, dims, slots); }});
}

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
// runtime asks of the device (DeviceOptimizerTest.cpp). Found with dlsym.
STRINGRT_EMU_EXPORT void stringrt_emulator_counters(uint64_t *out) {
  out[0] = counters.kernelLaunches;
  out[1] = counters.graphLaunches;
  out[2] = counters.hostWaits;
}
