// A fixed pool of worker threads for the fast CPU kernels (FastKernels.h).
//
// The pool has numThreads() threads in all: the calling thread plus
// numThreads() - 1 workers. Its size comes from the STRINGRT_THREADS
// environment variable when set (a positive integer), otherwise from
// std::thread::hardware_concurrency(); setNumThreads(n) changes it at any
// time between kernel calls. OpenBLAS (when the runtime is built with it) is
// kept at the same thread count, so a BLAS call and a pool loop never ask for
// more threads than the pool size between them.
//
// parallelFor splits [begin, end) into at most numThreads() contiguous chunks
// of at least `grain` indices (a static split: chunk boundaries depend only
// on the range, the grain and the thread count) and calls fn(chunkBegin,
// chunkEnd) on each, the caller running one chunk itself. It returns when
// every chunk is done. An exception thrown by fn is rethrown on the calling
// thread (the first one, if several chunks throw). A parallelFor issued from
// inside a chunk runs serially on that thread: nesting never deadlocks and
// never oversubscribes. Calls from different user threads are serialised.
//
// Kernels built on parallelFor must not let a result depend on the chunking
// (each output written by one chunk, reductions combined in a fixed order),
// so that every thread count gives the same numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace stringrt::cpu {

// The most threads a pool may have (and the reference kernels' evaluation
// replicas): 4 per hardware thread, at least 16 and at most 1024. More
// only oversubscribe the machine, and thousands exhaust its thread limit.
int maxThreads();

// "100000 threads asked for; this machine has 2 hardware threads and
// allows at most 16 (4 per hardware thread, at least 16, at most 1024)":
// the message of a request beyond maxThreads().
std::string tooManyThreads(int64_t asked);

// The current pool size (>= 1). Starts the pool on first use; throws
// stringrt::Error when STRINGRT_THREADS is set but not an integer in
// [1, maxThreads()].
int numThreads();

// Resizes the pool to n threads, 1 <= n <= maxThreads() (OpenBLAS stays at
// one: GEMMs split their rows over this pool, Gemm.h); throws
// stringrt::Error for another n, or when the system cannot start that many
// threads (the pool is then left with one). Must not be called from inside
// parallelFor.
void setNumThreads(int n);

// Runs fn over [begin, end) in parallel chunks of at least max(grain, 1)
// indices; nothing happens when end <= begin.
void parallelFor(int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &fn);

// memcpy of `bytes` bytes in parallel chunks of at least 1 MiB (a batch of
// large images into the pinned staging buffer of a device).
void parallelCopy(void *to, const void *from, size_t bytes);

} // namespace stringrt::cpu
