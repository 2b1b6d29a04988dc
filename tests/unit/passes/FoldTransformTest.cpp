//===- FoldTransformTest.cpp - pe-fold-transform against the graph without it ===//

#include "AlgebraicModels.h"
#include "AlgebraicTestUtil.h"

namespace stringc::test {
namespace {

TEST(FoldTransformTest, VitString) {
  PassCase c;
  c.example = "vit_string.pe";
  Comparison r = compareAlgebraic(c, "pe-fold-transform");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_GT(r.gradientsCompared, 0);
  EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
  // U is applied to the weights: a transform of a 64x64 W_Q / W_K per layer.
  EXPECT_GT(countOf(r.irWith, ": tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>"), 0u);
}

TEST(FoldTransformTest, VitStringFastKernels) {
  PassCase c;
  c.example = "vit_string.pe";
  c.kernels = stringrt::KernelSet::Fast;
  Comparison r = compareAlgebraic(c, "pe-fold-transform");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
}

TEST(FoldTransformTest, BiasFoldsToo) {
  for (stringrt::KernelSet kernels : {stringrt::KernelSet::Reference, stringrt::KernelSet::Fast}) {
    PassCase c;
    c.source = kStringWithBias;
    c.kernels = kernels;
    Comparison r = compareAlgebraic(c, "pe-fold-transform");
    EXPECT_TRUE(r.modulesDiffer);
    EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
    EXPECT_GT(countOf(r.irWith, ": tensor<8xf32>, tensor<8x8xf32> -> tensor<8xf32>"), 0u)
        << "the bias is transformed";
  }
}

TEST(FoldTransformTest, RopeFirstIsLeftAlone) {
  PassCase c;
  c.example = "vit_cayley.pe";
  Comparison r = compareAlgebraic(c, "pe-fold-transform");
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.maxError(), 0.0);
}

} // namespace
} // namespace stringc::test
