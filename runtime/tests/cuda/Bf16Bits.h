// bf16 as the CUDA kernels store it, for the tests that fill and read bf16
// buffers: the nearest bf16 of a float (ties to even, NaN -> 0x7fc0, as
// KernelBuilder::bf16Bits rounds) and a bf16 widened back to f32.
#ifndef STRINGRT_TESTS_CUDA_BF16BITS_H
#define STRINGRT_TESTS_CUDA_BF16BITS_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace stringrt::cuda {

inline uint16_t toBf16(float x) {
  if (std::isnan(x))
    return 0x7fc0;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

inline float fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

} // namespace stringrt::cuda

#endif
