//===- DistinctOffsetsTest.cpp - pe-distinct-offsets against the graph without it ===//
//
// The same matrix exponentials of the same offsets, copied to every pair:
// the forward is unchanged, and the gradient of the generators sums the same
// terms grouped by offset (float32 rounding only).
//
//===----------------------------------------------------------------------===//

#include "AlgebraicTestUtil.h"
#include "GatherModels.h"

namespace stringc::test {
namespace {

TEST(DistinctOffsetsTest, VitGenerators) {
  PassCase c;
  c.example = "vit_generators.pe";
  Comparison r = compareAlgebraic(c, "pe-distinct-offsets");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_GT(r.gradientsCompared, 0);
  EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
  // A 7x7 grid + CLS: 169 distinct offsets instead of 2500 pairs.
  EXPECT_NE(r.irWith.find("pe.offset_table"), std::string::npos);
  EXPECT_NE(r.irWith.find(": tensor<169x2xf32>"), std::string::npos);
  EXPECT_NE(r.irWith.find("-> tensor<169x16x16xf32>"), std::string::npos);
  EXPECT_EQ(countOf(r.irWith, "pe.pair_gather_grad "), 1u);
  EXPECT_EQ(countOf(r.irWith, "pe.relative_positions"), 0u);
}

TEST(DistinctOffsetsTest, VitGeneratorsFastKernels) {
  PassCase c;
  c.example = "vit_generators.pe";
  c.kernels = stringrt::KernelSet::Fast;
  Comparison r = compareAlgebraic(c, "pe-distinct-offsets");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
}

TEST(DistinctOffsetsTest, NothingToDoAfterFactoring) {
  // With one generator pe-factor-generators (earlier in the pipeline)
  // removes the relative table, so there is nothing left to rewrite.
  PassCase c;
  c.source = kOneGenerator;
  Comparison r = compareAlgebraic(c, "pe-distinct-offsets");
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.maxError(), 0.0);
}

TEST(DistinctOffsetsTest, SequenceOffsetsWithoutFactoring) {
  // 1D positions with CLS (9 tokens): offsets -7..7, 15 of 81.
  PassCase c;
  c.source = kOneGenerator;
  c.base.disabledPasses = {"pe-factor-generators"};
  Comparison r = compareAlgebraic(c, "pe-distinct-offsets");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
  EXPECT_NE(r.irWith.find(": tensor<15x1xf32>"), std::string::npos);
}

} // namespace
} // namespace stringc::test
