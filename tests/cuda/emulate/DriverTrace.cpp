// The emulator's trace (DriverState.h, traceOperation): with
// STRINGRT_CUDA_EMULATOR_TRACE=PREFIX, every operation issued to a stream or
// recorded into a graph is written, one line each, in the order the host
// issued them, to PREFIX.<pid> (one file per process: the ranks of an
// mpirun each write theirs):
//
//   <stream> <queued|captured> <what>
//
// streams numbered in the order they are first used (0: the legacy stream),
// `what` as in the emulator's messages ("kernel pe_add (grid ...)",
// "cublasSaxpy (n 64)", "ncclAllReduce (4096 floats)" from the NCCL
// stand-in). For tests of the order a runtime issues its work in: a
// captured graph replays its operations in this order
// (tests/distributed/test_gpu_ranks.py: the all-reduce overlapping the
// backward).
#include "DriverState.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace stringrt::emulator {
namespace {

struct Trace {
  std::FILE *file = nullptr;
  std::map<const Stream *, int> numbers;

  Trace() {
    const char *prefix = std::getenv("STRINGRT_CUDA_EMULATOR_TRACE");
    if (!prefix || !*prefix)
      return;
    const std::string path = std::string(prefix) + "." + std::to_string(getpid());
    file = std::fopen(path.c_str(), "w");
    if (!file)
      report("STRINGRT_CUDA_EMULATOR_TRACE: cannot write " + path);
  }
  ~Trace() {
    if (file)
      std::fclose(file);
  }
  int number(const Stream *stream) {
    if (stream == &legacyStream)
      return 0;
    auto [it, added] = numbers.emplace(stream, int(numbers.size()) + 1);
    (void)added;
    return it->second;
  }
};

Trace &trace() {
  static Trace t;
  return t;
}

} // namespace

void traceOperation(const Stream *stream, const Operation &op, bool captured) {
  Trace &t = trace();
  if (!t.file)
    return;
  std::fprintf(t.file, "%d %s %s\n", t.number(stream), captured ? "captured" : "queued",
               op.what.c_str());
  std::fflush(t.file); // a rank may end by MPI_Abort
}

} // namespace stringrt::emulator
