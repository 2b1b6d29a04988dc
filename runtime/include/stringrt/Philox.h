// Philox4x32-10, the counter-based generator of Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3" (SC 2011), exactly as Random123
// defines it. A counter-based generator has no state to carry: block(counter,
// key) is a pure function, so any draw can be recomputed from its
// coordinates (seed, step, sample, ...) on any thread, machine or GPU, and
// the same formula in a CUDA kernel gives the same bits.
#pragma once

#include <array>
#include <cstdint>

namespace stringrt {

struct Philox4x32 {
  using Counter = std::array<uint32_t, 4>;
  using Key = std::array<uint32_t, 2>;

  static constexpr uint32_t kM0 = 0xD2511F53u; // round multipliers
  static constexpr uint32_t kM1 = 0xCD9E8D57u;
  static constexpr uint32_t kW0 = 0x9E3779B9u; // key schedule (Weyl) increments
  static constexpr uint32_t kW1 = 0xBB67AE85u;
  static constexpr int kRounds = 10;

  // One S-box/P-box round: two 32 x 32 -> 64-bit products, the high halves
  // mixed with the other counter words and the round key.
  static constexpr Counter round(Counter c, Key k) {
    const uint64_t p0 = uint64_t(kM0) * c[0];
    const uint64_t p1 = uint64_t(kM1) * c[2];
    const auto hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const auto hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }

  // The 10-round block: the key is bumped by (W0, W1) between rounds (nine
  // bumps), as Random123's philox4x32_R.
  static constexpr Counter block(Counter counter, Key key) {
    for (int r = 0; r < kRounds; ++r) {
      if (r > 0) {
        key[0] += kW0;
        key[1] += kW1;
      }
      counter = round(counter, key);
    }
    return counter;
  }
};

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter,
                                          std::array<uint32_t, 2> key) {
  return Philox4x32::block(counter, key);
}

// Uniform in [0, 1) from the top 24 bits: exactly representable as a float
// (24-bit mantissa), so float and double code, CPU and GPU, agree bit for bit
// and the value never rounds up to 1.
constexpr float uniformFloat(uint32_t u) {
  return float(u >> 8) * (1.0f / 16777216.0f);
}

// In [0, n) by the multiply-shift (Lemire) map: no division, and the same
// integer on every platform. Biased by at most n / 2^32, which is negligible
// for the small ranges (crop offsets, positions) it is used for. n = 0 gives 0.
constexpr uint32_t below(uint32_t u, uint32_t n) {
  return uint32_t((uint64_t(u) * n) >> 32);
}

} // namespace stringrt
