// Device buffers for the vectorised-kernel tests: values stored in f32 or
// bf16 (the high half of the f32 bits) among sentinel elements, so that a
// kernel writing outside its range, or leaving an element unwritten, shows.
#ifndef STRINGRT_TESTS_CUDA_SENTINELBUFFERS_H
#define STRINGRT_TESTS_CUDA_SENTINELBUFFERS_H

#include <cstdint>
#include <cstring>
#include <vector>

namespace stringrt::cuda {

inline constexpr uint32_t kSentinel = 0x7fa5a5a5u; // a NaN no kernel writes (bf16: 0x7fa5)

// The sentinel as stored in bf16 or f32, widened to f32 bits.
inline uint32_t sentinelBits(bool bf16) { return bf16 ? (kSentinel & 0xffff0000u) : kSentinel; }

// `total` elements of bf16 or f32 storage: `values` (n of them; none when
// empty) from element `first` on, the sentinel elsewhere.
inline std::vector<uint8_t> sentinelPadded(const std::vector<float> &values, int64_t n, bool bf16,
                                           int64_t first, int64_t total) {
  std::vector<uint8_t> raw(size_t(total * (bf16 ? 2 : 4)));
  for (int64_t i = 0; i < total; ++i) {
    uint32_t bits = kSentinel;
    if (!values.empty() && i >= first && i < first + n)
      std::memcpy(&bits, &values[size_t(i - first)], 4);
    if (bf16) {
      uint16_t h = uint16_t(bits >> 16);
      std::memcpy(&raw[size_t(2 * i)], &h, 2);
    } else {
      std::memcpy(&raw[size_t(4 * i)], &bits, 4);
    }
  }
  return raw;
}

// Element i of a downloaded buffer as f32 bits (bf16 in the high half).
inline uint32_t storedBits(const std::vector<uint8_t> &raw, bool bf16, int64_t i) {
  if (bf16) {
    uint16_t h;
    std::memcpy(&h, &raw[size_t(2 * i)], 2);
    return uint32_t(h) << 16;
  }
  uint32_t w;
  std::memcpy(&w, &raw[size_t(4 * i)], 4);
  return w;
}

} // namespace stringrt::cuda

#endif
