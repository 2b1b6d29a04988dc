// Every backward positional-encoding kernel against central finite
// differences of its forward kernel (double, step 1e-6, relative tolerance
// 1e-6): the loss is <v, forward(...)>, so each gradient must be the VJP
// with cotangent v. Also the x-gradients of rope and householder, which are
// forward calls with negated / swapped frequencies (docs/autodiff.md).
#include "FiniteDifference.h"
#include "PositionTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace stringrt::ref {
namespace {

using namespace postest;
using fd::checkVJP;
using fd::random;

// ---------------------------------------------------------------- rope --

// dfreqs from rope_grad_freqs, and dx = rope(v, pos, -freqs).
void checkRope(const char *mode, D x, const D &pos, D freqs) {
  const D v = random(x.shape, 101);
  auto forward = [&] { return ropeOf(x, pos, freqs); };
  EXPECT_TRUE(checkVJP(std::string(mode) + " dfreqs", forward, freqs, v,
                       ropeGradFreqsOf(x, pos, freqs, v)));
  EXPECT_TRUE(checkVJP(std::string(mode) + " dx", forward, x, v,
                       ropeOf(v, pos, lincomb(-1.0, freqs, 0.0, freqs))));
}

TEST(PositionGrad, RopeSeq) {
  checkRope("seq", random({2, 6, 8}, 1), seqPos(5, 1), freqTable(FreqsKind::Seq, 8, 2, 10.0));
}

TEST(PositionGrad, RopeAxial) {
  checkRope("axial", random({2, 7, 8}, 2), gridPos(2, 3, 1),
            freqTable(FreqsKind::Axial, 8, 1, 10.0));
}

TEST(PositionGrad, RopeMixed) {
  checkRope("mixed", random({2, 7, 8}, 3), gridPos(3, 2, 1), random({4, 2}, 4));
}

TEST(PositionGrad, RopeLeadingDims) {
  // x [2, 3, T, D]: every leading index shares the positions.
  checkRope("4d", random({2, 3, 4, 6}, 5), random({4, 2}, 6, -2, 2), random({3, 2}, 7));
}

// --------------------------------------------------------- householder --

void checkHouseholder(const char *name, D x, const D &pos, D f1, D f2) {
  const D v = random(x.shape, 102);
  auto forward = [&] { return householderOf(x, pos, f1, f2); };
  auto [df1, df2] = householderGradFreqsOf(x, pos, f1, f2, v);
  EXPECT_TRUE(checkVJP(std::string(name) + " df1", forward, f1, v, df1));
  EXPECT_TRUE(checkVJP(std::string(name) + " df2", forward, f2, v, df2));
  EXPECT_TRUE(checkVJP(std::string(name) + " dx", forward, x, v, householderOf(v, pos, f2, f1)));
}

TEST(PositionGrad, HouseholderSeq) {
  checkHouseholder("seq", random({2, 5, 6}, 11), seqPos(4, 1), random({3, 1}, 12),
                   random({3, 1}, 13));
}

TEST(PositionGrad, HouseholderGrid) {
  checkHouseholder("grid", random({2, 5, 8}, 14), gridPos(2, 2, 1), random({4, 2}, 15),
                   random({4, 2}, 16));
}

// ---------------------------------------------------------------- skew --

TEST(PositionGrad, SkewBatched) {
  const int64_t dim = 5;
  D p = random({2, 3, 10}, 21);
  const D v = random({2, 3, dim, dim}, 22);
  EXPECT_TRUE(checkVJP("skew", [&] { return skewOf(p, dim); }, p, v, skewGradOf(v, dim)));
}

TEST(PositionGrad, SkewUnbatched) {
  D p = random({3}, 23);
  const D v = random({3, 3}, 24);
  EXPECT_TRUE(checkVJP("skew", [&] { return skewOf(p, 3); }, p, v, skewGradOf(v, 3)));
}

TEST(PositionGrad, SparseSkew) {
  for (const auto &[dim, support] : std::vector<std::pair<int64_t, std::vector<int64_t>>>{
           {4, {0, 2, 5}}, {5, {1, 4, 7, 9}}, {2, {0}}}) {
    D p = random({static_cast<int64_t>(support.size())}, 25);
    const D v = random({dim, dim}, 26);
    EXPECT_TRUE(checkVJP("sparse_skew dim " + std::to_string(dim),
                         [&, dim = dim, &support = support] { return sparseSkewOf(p, dim, support); },
                         p, v, sparseSkewGradOf(v, dim, support)));
  }
}

// -------------------------------------------------------------- cayley --

void checkCayley(const char *name, D x, D s) {
  const D v = random(x.shape, 103);
  auto forward = [&] { return cayleyOf(x, s); };
  auto [dx, ds] = cayleyGradOf(x, s, v);
  EXPECT_TRUE(checkVJP(std::string(name) + " dx", forward, x, v, dx));
  EXPECT_TRUE(checkVJP(std::string(name) + " ds", forward, s, v, ds));
}

TEST(PositionGrad, CayleySkew) {
  checkCayley("skew S", random({2, 3, 5}, 31), skewOf(random({10}, 32, -1.5, 1.5), 5));
}

TEST(PositionGrad, CayleyNonSkew) {
  // A general S: the formulas hold without skew symmetry.
  D s = lincomb(1.0, skewOf(random({6}, 33), 4), 0.4, random({4, 4}, 34));
  checkCayley("general S", random({3, 4}, 35), s);
}

TEST(PositionGrad, CayleyOfSkewChain) {
  // params -> skew -> cayley: the chain through cayley_grad's ds and skew_grad.
  D p = random({6}, 36);
  const D x = random({5, 4}, 37), v = random({5, 4}, 38);
  auto [dx, ds] = cayleyGradOf(x, skewOf(p, 4), v);
  EXPECT_TRUE(checkVJP("cayley(skew(p))", [&] { return cayleyOf(x, skewOf(p, 4)); }, p, v,
                       skewGradOf(ds, 4)));
}

// ------------------------------------------------------- generator_exp --

void checkGeneratorExp(const char *name, const D &r, D gens) {
  std::vector<int64_t> shape(r.shape.begin(), r.shape.end() - 1);
  shape.push_back(gens.shape[1]);
  shape.push_back(gens.shape[2]);
  const D v = random(shape, 104);
  EXPECT_TRUE(checkVJP(name, [&] { return generatorExpOf(r, gens); }, gens, v,
                       generatorExpGradOf(r, gens, v)));
}

TEST(PositionGrad, GeneratorExpNonCommuting) {
  // General (neither skew nor commuting) generators over relative 2D positions.
  checkGeneratorExp("general", relPos(random({3, 2}, 41, -1.5, 1.5)), random({2, 3, 3}, 42));
}

TEST(PositionGrad, GeneratorExpSkew) {
  D gens = D::zeros({2, 4, 4});
  D g0 = skewOf(random({6}, 43), 4), g1 = skewOf(random({6}, 44), 4);
  std::copy(g0.values.begin(), g0.values.end(), gens.values.begin());
  std::copy(g1.values.begin(), g1.values.end(), gens.values.begin() + 16);
  checkGeneratorExp("skew", relPos(gridPos(2, 2, 0)), gens);
}

TEST(PositionGrad, GeneratorExpLargeArgument) {
  // ||A||_1 above theta13 = 5.37: the scaled-and-squared exponential of the
  // block matrix.
  checkGeneratorExp("large", random({2, 2}, 45, 2, 3), random({2, 3, 3}, 46, -1.5, 1.5));
}

TEST(PositionGrad, GeneratorExpBatchedCoefficients) {
  checkGeneratorExp("batched", random({2, 2, 3}, 47), random({3, 2, 2}, 48));
}

// ------------------------------------------------------ apply_rotation --

TEST(PositionGrad, ApplyRotation) {
  const int64_t heads = 2;
  D x = random({2, 3, 6}, 51), rot = random({3, 3, 3}, 52);
  const D v = random({2, 3, 6}, 53);
  auto forward = [&] { return applyRotationOf(x, rot, heads); };
  auto [dx, drot] = applyRotationGradOf(x, rot, v, heads);
  EXPECT_TRUE(checkVJP("apply_rotation dx", forward, x, v, dx));
  EXPECT_TRUE(checkVJP("apply_rotation drotations", forward, rot, v, drot));
}

// ----------------------------------------------------- commutator_norm --

TEST(PositionGrad, CommutatorNorm) {
  D gens = random({4, 3, 3}, 61);
  const D v({}, {1.7});
  EXPECT_TRUE(checkVJP("commutator_norm", [&] { return commutatorNormOf(gens); }, gens, v,
                       commutatorNormGradOf(gens, 1.7)));
}

TEST(PositionGrad, CommutatorNormTiesGoToTheFirstPair) {
  // L_2 = L_1: pairs (0, 1) and (0, 2) tie, (1, 2) commutes. The gradient
  // flows through (0, 1) alone, so L_2 gets none.
  D gens = random({3, 3, 3}, 62);
  std::copy(gens.values.begin() + 9, gens.values.begin() + 18, gens.values.begin() + 18);
  D g = commutatorNormGradOf(gens, 1.0);
  for (int i = 0; i < 9; ++i)
    EXPECT_EQ(g.values[18 + i], 0.0) << i;
  EXPECT_GT(maxAbs(g), 0.0);
  // It equals the gradient of the two-generator norm of (L_0, L_1).
  D pair = D::zeros({2, 3, 3});
  std::copy(gens.values.begin(), gens.values.begin() + 18, pair.values.begin());
  D gp = commutatorNormGradOf(pair, 1.0);
  for (int i = 0; i < 18; ++i)
    EXPECT_EQ(g.values[i], gp.values[i]) << i;
}

TEST(PositionGrad, CommutatorNormZeroWhenCommuting) {
  D gens = blockGenerators({{1.0, 2.0}, {-0.5, 3.0}, {0.25, 0.0}});
  D g = commutatorNormGradOf(gens, 1.0);
  EXPECT_EQ(maxAbs(g), 0.0);
}

// ------------------------------------------------------------ spd_gate --

TEST(PositionGrad, SpdGate) {
  for (const std::vector<int64_t> &gshape : {std::vector<int64_t>{4}, std::vector<int64_t>{3, 4}}) {
    D x = random({2, 3, 4}, 71), gamma = random(gshape, 72);
    const D v = random({2, 3, 4}, 73);
    auto forward = [&] { return spdGateOf(x, gamma); };
    auto [dx, dg] = spdGateGradOf(x, gamma, v);
    EXPECT_TRUE(checkVJP("spd_gate dx", forward, x, v, dx));
    EXPECT_TRUE(checkVJP("spd_gate dgamma " + shapeToString(gshape), forward, gamma, v, dg));
  }
}

} // namespace
} // namespace stringrt::ref
