// Translation invariance of the positional encodings, on the reference kernels:
// shifting every position by the same offset must leave the attention scores
// q_i . k_j of each head unchanged exactly where the theory says so (RoPE in
// every mode, reflections, STRING, commuting generators), and within the
// commutator bound where it only holds approximately (non-commuting generators).
#include "FiniteDifference.h"
#include "PositionTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

namespace stringrt::ref {
namespace {

using postest::D;

constexpr int64_t kTokens = 9; // a 3 x 3 grid
constexpr int64_t kDim = 16;

D shifted(const D &pos, double dx, double dy) {
  D out = pos;
  for (int64_t t = 0; t < pos.shape[0]; ++t) {
    out.values[t * 2] += dx;
    out.values[t * 2 + 1] += dy;
  }
  return out;
}

// scores[h][i][j] = sum over head h's columns of q[0,i,:] k[0,j,:].
D headScores(const D &q, const D &k, int64_t heads) {
  const int64_t tokens = q.shape[1], dim = q.shape[2], dh = dim / heads;
  D s = D::zeros({heads, tokens, tokens});
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < tokens; ++i)
      for (int64_t j = 0; j < tokens; ++j) {
        double acc = 0;
        for (int64_t c = h * dh; c < (h + 1) * dh; ++c)
          acc += q.values[i * dim + c] * k.values[j * dim + c];
        s.values[(h * tokens + i) * tokens + j] = acc;
      }
  return s;
}

struct QK {
  D q = fd::random({1, kTokens, kDim}, 11);
  D k = fd::random({1, kTokens, kDim}, 12);
  D pos = postest::gridPos<double>(3, 3, 0);
  D moved = shifted(pos, 2.0, -5.0);
};

// The largest change of any score when every position moves, for an encoding
// `encode(x, pos)` applied to both q and k.
template <class Encode> double scoreShift(const QK &in, int64_t heads, Encode encode) {
  D before = headScores(encode(in.q, in.pos), encode(in.k, in.pos), heads);
  D after = headScores(encode(in.q, in.moved), encode(in.k, in.moved), heads);
  return postest::maxAbsDiff(before, after);
}

TEST(TranslationInvariance, AxialRope) {
  QK in;
  D freqs = postest::freqTable<double>(FreqsKind::Axial, kDim, 2, 100.0);
  EXPECT_LT(scoreShift(in, 2, [&](const D &x, const D &p) { return postest::ropeOf(x, p, freqs); }),
            1e-12);
}

TEST(TranslationInvariance, MixedRopeWithLearnedFrequencies) {
  QK in;
  D freqs = fd::random({kDim / 2, 2}, 13);
  EXPECT_LT(scoreShift(in, 4, [&](const D &x, const D &p) { return postest::ropeOf(x, p, freqs); }),
            1e-12);
}

TEST(TranslationInvariance, HouseholderReflections) {
  QK in;
  D f1 = fd::random({kDim / 2, 2}, 14), f2 = fd::random({kDim / 2, 2}, 15);
  EXPECT_LT(scoreShift(in, 2,
                       [&](const D &x, const D &p) { return postest::householderOf(x, p, f1, f2); }),
            1e-12);
}

// STRING order (transform, then RoPE): U acts before the position-dependent
// rotation, so per head (R_i U q)_h . (R_j U k)_h depends on j - i only.
TEST(TranslationInvariance, CayleyThenRopeForEveryHead) {
  QK in;
  D freqs = fd::random({kDim / 2, 2}, 16);
  D s = postest::skewOf(fd::random({kDim * (kDim - 1) / 2}, 17, -0.3, 0.3), kDim);
  auto encode = [&](const D &x, const D &p) {
    return postest::ropeOf(postest::cayleyOf(x, s), p, freqs);
  };
  EXPECT_LT(scoreShift(in, 4, encode), 1e-12);
}

// The seeds' order (RoPE, then U over the whole width): U^T U = I cancels in
// the full-width product, so a single head is invariant; with several heads U
// mixes them and the per-head scores are not. This is why the cancellation
// pass (issue 4) treats the two orders differently.
TEST(TranslationInvariance, RopeThenCayleyOnlyForOneHead) {
  QK in;
  D freqs = fd::random({kDim / 2, 2}, 18);
  D s = postest::skewOf(fd::random({kDim * (kDim - 1) / 2}, 19, -0.3, 0.3), kDim);
  auto encode = [&](const D &x, const D &p) {
    return postest::cayleyOf(postest::ropeOf(x, p, freqs), s);
  };
  EXPECT_LT(scoreShift(in, 1, encode), 1e-12);
  EXPECT_GT(scoreShift(in, 4, encode), 1e-3);
}

// Generators with the same 2x2 block structure commute: R(r) = exp(sum_k r_k
// L_k) is then a product of planar rotations and R(r_i)^T R(r_j) = R(r_j - r_i).
TEST(TranslationInvariance, CommutingGenerators) {
  QK in;
  const int64_t heads = 2, dh = kDim / heads;
  D gens = D::zeros({2, dh, dh});
  D coeff = fd::random({2, dh / 2}, 20);
  for (int64_t k = 0; k < 2; ++k)
    for (int64_t b = 0; b < dh / 2; ++b) {
      const double w = coeff.values[k * (dh / 2) + b];
      gens.values[(k * dh + 2 * b) * dh + 2 * b + 1] = -w;
      gens.values[(k * dh + 2 * b + 1) * dh + 2 * b] = w;
    }
  ASSERT_LT(postest::commutatorNormOf(gens).values[0], 1e-15);
  auto encode = [&](const D &x, const D &p) {
    return postest::applyRotationOf(x, postest::generatorExpOf(p, gens), heads);
  };
  EXPECT_LT(scoreShift(in, heads, encode), 1e-11);
}

// For generators that do not commute, exp(-A) exp(B) = exp(B - A - [A, B]/2 +
// ...), so each absolute-rotation score differs from the relative one by about
// eps/2 |r_i|_1 |r_j|_1 |q| |k| (eps = max ||[L_a, L_b]||_F, seed 003's T6.2).
// The shift compares two such scores: the change stays within the sum of their
// bounds (a factor 2 of slack covers the higher-order terms), and is not zero.
TEST(TranslationInvariance, NonCommutingGeneratorsWithinTheCommutatorBound) {
  QK in;
  const int64_t heads = 2, dh = kDim / heads;
  D gens = postest::skewOf(fd::random({2, dh * (dh - 1) / 2}, 21, -0.02, 0.02), dh);
  const double eps = postest::commutatorNormOf(gens).values[0];
  ASSERT_GT(eps, 0.0);

  auto rotations = [&](const D &p) { return postest::generatorExpOf(p, gens); };
  D before = headScores(postest::applyRotationOf(in.q, rotations(in.pos), heads),
                        postest::applyRotationOf(in.k, rotations(in.pos), heads), heads);
  D after = headScores(postest::applyRotationOf(in.q, rotations(in.moved), heads),
                       postest::applyRotationOf(in.k, rotations(in.moved), heads), heads);

  auto l1 = [](const D &p, int64_t t) { return std::fabs(p.values[t * 2]) + std::fabs(p.values[t * 2 + 1]); };
  auto headNorm = [&](const D &x, int64_t t, int64_t h) {
    double s = 0;
    for (int64_t c = h * dh; c < (h + 1) * dh; ++c)
      s += x.values[t * kDim + c] * x.values[t * kDim + c];
    return std::sqrt(s);
  };
  double largestChange = 0;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < kTokens; ++i)
      for (int64_t j = 0; j < kTokens; ++j) {
        const int64_t e = (h * kTokens + i) * kTokens + j;
        const double change = std::fabs(after.values[e] - before.values[e]);
        const double bound = eps * (l1(in.pos, i) * l1(in.pos, j) + l1(in.moved, i) * l1(in.moved, j)) *
                             headNorm(in.q, i, h) * headNorm(in.k, j, h);
        EXPECT_LE(change, bound) << "head " << h << " query " << i << " key " << j;
        largestChange = std::max(largestChange, change);
      }
  EXPECT_GT(largestChange, 1e-9);
}

} // namespace
} // namespace stringrt::ref
