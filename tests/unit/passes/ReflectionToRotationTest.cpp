//===- ReflectionToRotationTest.cpp - pe-reflection-to-rotation against the graph without it ===//
//
// The rewritten graph runs the RoPE kernels where the original runs the
// Householder ones, so agreement here also checks that pe.rope's sign
// convention is the one of H(a2) H(a1) (a rotation by +2 (a2 - a1)).
//
//===----------------------------------------------------------------------===//

#include "AlgebraicTestUtil.h"

namespace stringc::test {
namespace {

TEST(ReflectionToRotationTest, VitReflection) {
  PassCase c;
  c.example = "vit_reflection.pe";
  Comparison r = compareAlgebraic(c, "pe-reflection-to-rotation");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_GT(r.gradientsCompared, 0);
  EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
  EXPECT_EQ(countOf(r.irWith, "pe.householder"), 0u);
  EXPECT_GT(countOf(r.irWithout, "pe.householder_grad_freqs"), 0u);
  // Q and K share f1 and f2: one sub per layer in each of @forward and
  // @gradients (4 layers).
  EXPECT_EQ(countOf(r.irWith, "= pe.sub "), 8u);
}

TEST(ReflectionToRotationTest, VitReflectionFastKernels) {
  PassCase c;
  c.example = "vit_reflection.pe";
  c.kernels = stringrt::KernelSet::Fast;
  Comparison r = compareAlgebraic(c, "pe-reflection-to-rotation");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
}

TEST(ReflectionToRotationTest, NoReflectionIsLeftAlone) {
  PassCase c;
  c.example = "vit_rope.pe";
  Comparison r = compareAlgebraic(c, "pe-reflection-to-rotation");
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.maxError(), 0.0);
}

} // namespace
} // namespace stringc::test
