// A kernel session for the vectorised-kernel tests: buffers placed among
// sentinel elements (SentinelBuffers.h) at a chosen misalignment, and read
// back after checking that the kernel wrote nothing outside them.
#ifndef STRINGRT_TESTS_CUDA_SENTINELSESSION_H
#define STRINGRT_TESTS_CUDA_SENTINELSESSION_H

#include "GpuKernelSession.h"
#include "SentinelBuffers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt::cuda {

struct SentinelSession : GpuKernelSession {
  static constexpr int64_t kPad = 8; // sentinel elements on either side

  // `values` (sentinels when empty, n of them) in bf16 or f32 storage, kPad
  // sentinels before and after, element 0 `shift` elements past that (a
  // 256-byte boundary + kPad elements: 16-byte aligned when shift is 0).
  // Returns element 0's device address; `offset` is the buffer's in the arena.
  uint64_t place(const std::vector<float> &values, int64_t n, bool bf16, int64_t shift,
                 size_t &offset) {
    std::vector<uint8_t> raw = sentinelPadded(values, n, bf16, kPad + shift, n + 2 * kPad + shift);
    uint64_t base = putBytes(raw);
    offset = offsets.at(base);
    return base + uint64_t((kPad + shift) * (bf16 ? 2 : 4));
  }

  // The `n` elements (f32 bits; bf16 in the high half) of the buffer placed
  // at arena `offset` with `shift`, after the device is done and the
  // sentinels around them are checked.
  std::vector<uint32_t> readBack(size_t offset, int64_t n, bool bf16, int64_t shift,
                                 const std::string &what) {
    device->synchronize("test");
    const int64_t bytes = bf16 ? 2 : 4, first = kPad + shift;
    std::vector<uint8_t> raw =
        arena->downloadVector<uint8_t>(offset, size_t((n + 2 * kPad + shift) * bytes));
    for (int64_t i = 0; i < first; ++i)
      EXPECT_EQ(storedBits(raw, bf16, i), sentinelBits(bf16)) << what << ": written before";
    for (int64_t i = first + n; i < first + n + kPad; ++i)
      EXPECT_EQ(storedBits(raw, bf16, i), sentinelBits(bf16)) << what << ": written after";
    std::vector<uint32_t> out;
    for (int64_t i = first; i < first + n; ++i)
      out.push_back(storedBits(raw, bf16, i));
    return out;
  }
};

} // namespace stringrt::cuda

#endif
