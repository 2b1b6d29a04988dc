//===- SpdGateSquareTest.cpp - pe-spd-gate-square against the graph without it ===//

#include "AlgebraicModels.h"
#include "AlgebraicTestUtil.h"

namespace stringc::test {
namespace {

TEST(SpdGateSquareTest, VitPolarOneGatePerAttention) {
  PassCase c;
  c.example = "vit_polar.pe";
  Comparison r = compareAlgebraic(c, "pe-spd-gate-square");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_GT(r.gradientsCompared, 0);
  EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
  // 4 layers: 8 gates in each of @forward and @gradients without the pass,
  // 4 with it (the squared one on Q).
  EXPECT_EQ(countOf(r.irWithout, "pe.spd_gate "), 16u);
  EXPECT_EQ(countOf(r.irWith, "pe.spd_gate "), 8u);
  // scale(gamma, 2) per layer in @forward and in @gradients, and its VJP
  // (the gradient of gamma scaled by 2) in @gradients.
  EXPECT_EQ(countOf(r.irWith, "factor(2.000000e+00)") -
                countOf(r.irWithout, "factor(2.000000e+00)"),
            12u);
}

// vit_polar starts with gamma = 0 (exp(0) = 1 exactly): a model with
// non-zero gates checks the forward values too.
TEST(SpdGateSquareTest, NonZeroGates) {
  for (stringrt::KernelSet kernels : {stringrt::KernelSet::Reference, stringrt::KernelSet::Fast}) {
    PassCase c;
    c.source = kSameGates;
    c.kernels = kernels;
    Comparison r = compareAlgebraic(c, "pe-spd-gate-square");
    EXPECT_TRUE(r.modulesDiffer);
    EXPECT_GT(r.outputError, 0.0) << "the gates are not the identity";
    EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
  }
}

TEST(SpdGateSquareTest, VitPolarFastKernels) {
  PassCase c;
  c.example = "vit_polar.pe";
  c.kernels = stringrt::KernelSet::Fast;
  Comparison r = compareAlgebraic(c, "pe-spd-gate-square");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
}

TEST(SpdGateSquareTest, DifferentGammasAreLeftAlone) {
  PassCase c;
  c.source = kDifferentGates;
  Comparison r = compareAlgebraic(c, "pe-spd-gate-square");
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.maxError(), 0.0);
}

} // namespace
} // namespace stringc::test
