// The host CUDA emulator's internals (libstringrt_cuda_emulator.so,
// docs/cuda.md "Emulator"): what its driver API (Driver*.cpp, their own
// state in DriverState.h), cuBLAS (CublasApi.cpp), kernel libraries
// (KernelLibraries.cpp) and kernel runner (BlockRunner.cpp) share.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace stringrt::emulator {

// Prints "stringrt CUDA emulator: MESSAGE" on stderr (why a call failed).
void report(const std::string &message);

// ---- Kernels (BlockRunner.cpp) ----

enum class ParamType { Ptr, I64, I32, F32 };

// The shared memory a function may opt in to (an H100's 227 KiB).
inline constexpr int kSharedOptinBytes = 227 << 10;

// A kernel of a host kernel library (host_kernels.py): NAME_packed reads its
// arguments from 8-byte slots.
struct HostKernel {
  std::string name;
  void (*packed)(const uint64_t *slots) = nullptr;
  std::vector<ParamType> params;
  size_t sharedBytes = 0;
  // The bytes of its `extern .shared` array (pe_dynamic_shared), 0 for a
  // kernel without one: the most dynamic shared memory it may be launched
  // with (host_kernels.py's "dynamic" field).
  size_t dynamicSharedBytes = 0;
  // The kernel's shared-memory globals (NAME_shared_regions), poisoned
  // before each block.
  struct Region {
    void *address;
    uint64_t bytes;
  };
  std::vector<Region> sharedRegions;
  // Whether a thread may wait for others (bar.sync, a warp collective):
  // host_kernels.py's "waits" field, true where a library has none. A
  // kernel that never waits runs its threads one after another on one fiber.
  bool waits = true;
  std::string hash;     // of the normalised NVVM
  std::string library;  // where it was found
};

// ---- Host kernel libraries (KernelLibraries.cpp) ----

struct Kernels {
  bool loaded = false;
  CUresult status = CUDA_SUCCESS;
  std::map<std::string, HostKernel> byName;
  std::string libraries; // for messages
};

// Loads STRINGRT_EMULATED_KERNELS (colon-separated libraries) at the first
// call; a library that fails is reported and sets `status`.
Kernels &kernels();

struct LaunchDims {
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
};

// Runs every block of a launch, one after another; the threads of a block
// are fibers. Returns CUDA_SUCCESS, or CUDA_ERROR_LAUNCH_FAILED after
// reporting why (a barrier some threads exited without reaching, a
// deadlock, a divergent barrier or warp collective, a bad shuffle).
CUresult runKernel(const HostKernel &kernel, const LaunchDims &dims,
                   const std::vector<uint64_t> &slots);

// ---- Streams and capture (DriverState.cpp) ----

// One operation of a stream: run now, or recorded into a graph while the
// stream is capturing (its inputs copied, as CUDA copies kernel parameters).
struct Operation {
  std::string what; // for error messages: "kernel pe_add", "memcpy HtoD" ...
  std::function<CUresult()> run;
};

// Queues `op` on `stream`, or records it when the stream is capturing.
// Queued work runs when something waits for it (a synchronisation, an
// event, a synchronous copy), in stream order and after the work it
// depends on (events, the legacy stream): as late as CUDA allows, so that
// a missing synchronisation shows as stale data. Errors of a refused call
// are reported.
CUresult enqueue(CUstream stream, Operation op);

// Whether [address, address + bytes) lies inside one device allocation; else
// reports it (naming `what`) and returns false.
bool insideAllocation(uint64_t address, uint64_t bytes, const std::string &what);

} // namespace stringrt::emulator
