// Private helpers shared by the fast CPU kernels.
#pragma once

#include "stringrt/reference/Tensor.h"

#include "../reference/LayerKernelUtil.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace stringrt::cpu::util {

using ref::check;
using ref::checkRank;
using ref::checkShape;
using ref::TensorRef;
// Shared with the reference kernels (identical checks and messages).
using ref::layer::checkAttentionGradShapes;
using ref::layer::checkIds;
using ref::layer::rowCount;
using ref::layer::withLast;

// Indices per parallelFor chunk, at least: below these a chunk's work is
// too small to pay for waking a thread (~ a few microseconds).
constexpr int64_t kElementGrain = 16384; // elementwise ops, per element
constexpr int64_t kRowFloats = 8192;     // row ops: rows per chunk >= this / row length

// A row grain for rows of `width` floats: about kRowFloats floats per chunk.
inline int64_t rowGrain(int64_t width) { return width > 0 ? 1 + kRowFloats / width : 1; }

// Throws unless t has at least rank 1 (a last dimension to work on).
template <typename T> void checkHasLastDim(const std::string &what, const TensorRef<T> &t) {
  check(t.rank() >= 1, what.c_str(), "expected rank >= 1, got a scalar");
}

// e^x in float for x <= 88 (softmax arguments, x - max <= 0), within ~2 ulp
// of std::exp; x below -87.3 counts as -87.3 (e^x ~ 1.2e-38 rather than a
// subnormal or 0, nothing next to a softmax row's largest term, 1); NaN
// stays NaN. Unlike a call to expf it is branch-free arithmetic, so a loop
// over it becomes SIMD - a row of softmax exponentials was half of
// attention's time.
// Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2 (ln2 split in two for an
// exact n ln2), e^r by a degree-7 polynomial, 2^n put in the exponent bits.
inline float fastExp(float x) {
  x = std::max(x, -87.3f); // a max, not a branch; keeps NaN (NaN < c is false)
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  // Round-to-nearest by the 1.5 * 2^23 trick: n ends up in t's low mantissa
  // bits, with no float-to-int conversion (undefined for NaN).
  constexpr float kRound = 12582912.0f;
  const float t = x * kLog2e + kRound;
  const float n = t - kRound;
  const float r = x - n * kLn2Hi - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // Unsigned: wraps (defined) rather than overflows for NaN / huge x.
  uint32_t tBits, roundBits;
  std::memcpy(&tBits, &t, sizeof t);
  std::memcpy(&roundBits, &kRound, sizeof kRound);
  const uint32_t scaleBits = (tBits - roundBits + 127u) << 23; // 2^n
  float scale;
  std::memcpy(&scale, &scaleBits, sizeof scale);
  return p * scale;
}

// x[0] + ... + x[n-1] in float with 8 interleaved partial sums: a single
// running sum is one long chain of dependent adds, this one is a SIMD add
// per 8 values (and a little more accurate). The order is fixed by n alone.
inline float sumFloats(const float *x, int64_t n) {
  float lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int64_t k = 0; k < 8; ++k)
      lanes[k] += x[i + k];
  float sum = 0.0f;
  for (; i < n; ++i)
    sum += x[i];
  for (float lane : lanes)
    sum += lane;
  return sum;
}

// out[d] = sum_n x[n, d] for x [N, D] (row stride D): parallel over column
// blocks, each column summed in row order in double, so the result does not
// depend on the thread count.
void columnSums(const float *x, int64_t N, int64_t D, float *out);

} // namespace stringrt::cpu::util
