// The driver API's memory entries: device and pinned allocations, copies
// (synchronous and queued) and memsets; the state they share is
// DriverState.h's.
#include "DriverState.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace stringrt::emulator {
namespace {

constexpr size_t kPage = 4096;

size_t totalMemory() {
  if (const char *bytes = std::getenv("STRINGRT_EMULATOR_MEMORY"); bytes && *bytes)
    return std::strtoull(bytes, nullptr, 10);
  long pages = sysconf(_SC_PHYS_PAGES);
  return pages > 0 ? size_t(pages) * kPage : size_t(16) << 30;
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

} // namespace
} // namespace stringrt::emulator

using namespace stringrt::emulator;

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
