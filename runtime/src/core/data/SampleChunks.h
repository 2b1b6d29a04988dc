// How a batch's samples are split over the CPU pool (cpu::parallelFor) by
// the host's batch work: gathering images (Data.cpp) and augmenting them
// (Augment.cpp). Each sample is written by one chunk, so the bits do not
// depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>

namespace stringrt::detail {

// At least this many values per chunk: below it, handing a chunk to a
// worker costs more than the chunk (a 28 x 28 batch of 128 runs on one
// thread; a 3 x 224 x 224 one splits per sample).
constexpr int64_t kValuesPerChunk = 64 * 1024;

inline int64_t samplesPerChunk(int64_t valuesPerSample) {
  return std::max<int64_t>(1, kValuesPerChunk / std::max<int64_t>(1, valuesPerSample));
}

} // namespace stringrt::detail
