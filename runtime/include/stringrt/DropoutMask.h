// The masks of pe.dropout (dropout and drop-path; docs/language.md,
// "Dropout"): which elements of a training step's batch are kept.
//
// A mask is a pure function of its coordinates, never stored: the forward
// and the backward of a step draw the same one, any thread computes any
// element, and a GPU kernel can reproduce it from the same formula. With
// `seed` the run's seed, `step` the training step, `s` a sample's index in
// the step's whole batch (firstSample + its row in the program's batch: a
// micro-batch of gradient accumulation draws what the whole batch would)
// and `stream` the op's (one per dropout of a model), element r of the
// sample's R elements uses Philox4x32-10 (Philox.h) with
//   key     = (uint32 seed, uint32 (seed >> 32))
//   counter = (uint32 (r / 4), uint32 s, uint32 step, 0x80000000 | stream)
// and word r % 4 of the block: it is kept when uniformFloat(word) >= p.
// Drop-path (per_sample) keeps all of sample s or none: the draw of its
// element 0. A kept element becomes x * float(1 / (1 - p)) (the factor
// rounded once from double), a dropped one exactly 0. The top bit of the
// counter's last word keeps these draws apart from augmentation's (Augment.h).
#pragma once

#include "stringrt/Philox.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace stringrt {

// The coordinates of a training step's random masks.
struct StepKey {
  uint64_t seed = 0;
  int64_t step = 0;        // in [0, 2^32)
  int64_t firstSample = 0; // the first row's index in the step's batch
};

// The Philox block of elements [4g, 4g + 4) of sample s.
inline Philox4x32::Counter dropoutBlock(const StepKey &key, int64_t stream, int64_t sample,
                                        int64_t group) {
  return Philox4x32::block(
      {uint32_t(group), uint32_t(sample), uint32_t(key.step), 0x80000000u | uint32_t(stream)},
      {uint32_t(key.seed), uint32_t(key.seed >> 32)});
}

// Whether a draw keeps its element at drop probability p.
inline bool dropoutKeeps(uint32_t word, double p) { return double(uniformFloat(word)) >= p; }

// The same test in integers: uniformFloat(word) = (word >> 8) / 2^24 >= p
// exactly when (word >> 8) >= ceil(p 2^24) (p 2^24 is exact in double), the
// form the fast CPU kernel and the GPU kernel (DropoutKernels.cpp) compare
// with. p in [0, 1) gives a threshold in [0, 2^24].
inline uint32_t dropoutThreshold(double p) { return uint32_t(std::ceil(p * 16777216.0)); }
inline bool dropoutKeepsAbove(uint32_t word, uint32_t threshold) {
  return (word >> 8) >= threshold;
}

// Why p, stream and the key, for `samples` samples of `perSample` elements,
// are outside what the formula takes (p in [0, 1), stream in [0, 2^31), step
// in [0, 2^32), sample indices below 2^32, at most 2^34 elements a sample);
// "" when they are inside. Every dropout kernel checks this.
inline std::string dropoutDomainError(double p, int64_t stream, const StepKey &key,
                                      int64_t samples, int64_t perSample) {
  constexpr int64_t k32 = int64_t(1) << 32;
  if (!(p >= 0.0 && p < 1.0)) // NaN fails too
    return "p must be in [0, 1), found " + std::to_string(p);
  if (stream < 0 || stream >= (int64_t(1) << 31))
    return "stream must be in [0, 2^31), found " + std::to_string(stream);
  if (key.step < 0 || key.step >= k32)
    return "the training step must be in [0, 2^32), found " + std::to_string(key.step);
  if (key.firstSample < 0 || samples > k32 || key.firstSample > k32 - samples)
    return "samples " + std::to_string(key.firstSample) + " .. +" + std::to_string(samples) +
           " pass 2^32";
  if (perSample > 4 * k32)
    return "more than 2^34 elements a sample";
  return "";
}

} // namespace stringrt
