// The register-tiled attention with relative rotations (RelativeAttention.cpp,
// RelativeAttentionTiles.h): every instruction set's tiles the CPU has
// against the reference, at the tiled head dims 8, 16 and 32 with batches
// filling several tiles, a tail tile overlapping the one before and a
// block of fewer rows than a tile; and a row's results do not depend on
// the tiles it went through (one row alone against the same row among
// many: the same bits).
#include "stringrt/cpu/FastKernels.h"

#include "CpuTestUtil.h"
#include "RelativeAttention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace stringrt;
using namespace stringrt::cpu::testing;
using ref::AttentionMask;
using stringrt::cpu::util::SimdLevel;

struct Case {
  int64_t B, T, D, heads;
};

// Dh 8 (tiles of 12 batches on AVX2: one full, one overlapping), Dh 16
// (blocks of 24 batches, then a block of 2 rows), Dh 32 (tiles of 3: an
// overlapping last one), Dh 16 with one batch.
const Case kCases[] = {{13, 6, 16, 2}, {26, 7, 48, 3}, {7, 5, 96, 3}, {1, 9, 32, 2}};

std::vector<SimdLevel> levelsTheCpuHas() {
  std::vector<SimdLevel> levels = {SimdLevel::Sse2};
  if (cpu::util::widestSimdLevel() != SimdLevel::Sse2)
    levels.push_back(SimdLevel::Avx2); // every AVX-512 CPU has AVX2 and FMA
  if (cpu::util::widestSimdLevel() == SimdLevel::Avx512)
    levels.push_back(SimdLevel::Avx512);
  return levels;
}

struct Inputs {
  TF q, k, v, dy, rel;
};

Inputs randomInputs(const Case &c, uint32_t seed) {
  const std::vector<int64_t> shape{c.B, c.T, c.D};
  const int64_t Dh = c.D / c.heads;
  return {randomTensor(shape, seed), randomTensor(shape, seed + 1), randomTensor(shape, seed + 2),
          randomTensor(shape, seed + 3), randomTensor({c.T, c.T, Dh, Dh}, seed + 4, -0.5f, 0.5f)};
}

// y, then dq, dk, dv, drel: the fast kernels (fast) or the reference's.
std::vector<TF> forwardAndGrad(const Inputs &in, int64_t heads, AttentionMask mask, bool fast) {
  const double scale = 1.0 / std::sqrt(double(in.rel.shape[2]));
  TF y = TF::zeros(in.q.shape), dq = y, dk = y, dv = y, drel = TF::zeros(in.rel.shape);
  if (fast) {
    cpu::attention(in.q.cref(), in.k.cref(), in.v.cref(), in.rel.cref(), heads, scale, mask, 0,
                   y.ref());
    cpu::attentionGrad(in.q.cref(), in.k.cref(), in.v.cref(), in.dy.cref(), in.rel.cref(), heads,
                       scale, mask, 0, dq.ref(), dk.ref(), dv.ref(), drel.ref());
  } else {
    ref::attention<float>(in.q.cref(), in.k.cref(), in.v.cref(), in.rel.cref(), heads, scale,
                          mask, 0, y.ref());
    ref::attentionGrad<float>(in.q.cref(), in.k.cref(), in.v.cref(), in.dy.cref(), in.rel.cref(),
                              heads, scale, mask, 0, dq.ref(), dk.ref(), dv.ref(), drel.ref());
  }
  return {y, dq, dk, dv, drel};
}

// Batch 0 of a [B, T, D] tensor.
TF firstBatch(const TF &x) {
  const int64_t n = x.shape[1] * x.shape[2];
  return TF({1, x.shape[1], x.shape[2]}, std::vector<float>(x.values.begin(), x.values.begin() + n));
}

class ForcedLevel {
public:
  explicit ForcedLevel(SimdLevel level) { cpu::util::forceRelAttentionSimdLevel(level); }
  ~ForcedLevel() { cpu::util::forceRelAttentionSimdLevel(std::nullopt); }
  ForcedLevel(const ForcedLevel &) = delete;
  ForcedLevel &operator=(const ForcedLevel &) = delete;
};

TEST(RelativeAttentionTiles, EverySimdLevelMatchesReference) {
  uint32_t seed = 700;
  for (SimdLevel level : levelsTheCpuHas())
    for (const Case &c : kCases)
      for (AttentionMask mask : {AttentionMask::None, AttentionMask::Causal}) {
        const Inputs in = randomInputs(c, seed);
        seed += 5;
        const std::string name = "level " + std::to_string(static_cast<int>(level)) + " B" +
                                 std::to_string(c.B) + " T" + std::to_string(c.T) + " D" +
                                 std::to_string(c.D) + " heads" + std::to_string(c.heads) +
                                 (mask == AttentionMask::Causal ? " causal" : " none");
        ForcedLevel forced(level);
        expectFastMatchesReference(
            name, [&](bool fast) { return forwardAndGrad(in, c.heads, mask, fast); });
      }
}

// Batch 0's y, dq, dk and dv have the same bits whether batch 0 runs
// alone (a block of one row) or among many (in full tiles): each element's
// sums keep their order in a tile of any height. (drel sums over the
// batches, so it differs.)
TEST(RelativeAttentionTiles, RowResultsDoNotDependOnTheTiles) {
  for (SimdLevel level : levelsTheCpuHas())
    for (const Case &c : kCases) {
      if (c.B == 1)
        continue;
      const Inputs many = randomInputs(c, 900);
      const Inputs one{firstBatch(many.q), firstBatch(many.k), firstBatch(many.v),
                       firstBatch(many.dy), many.rel};
      ForcedLevel forced(level);
      for (AttentionMask mask : {AttentionMask::None, AttentionMask::Causal}) {
        const std::vector<TF> all = forwardAndGrad(many, c.heads, mask, true);
        const std::vector<TF> alone = forwardAndGrad(one, c.heads, mask, true);
        for (size_t o = 0; o < 4; ++o)
          EXPECT_TRUE(sameBits("level " + std::to_string(static_cast<int>(level)) + " B" +
                                   std::to_string(c.B) + " D" + std::to_string(c.D) +
                                   " output " + std::to_string(o),
                               firstBatch(all[o]), alone[o]));
      }
    }
}

} // namespace
