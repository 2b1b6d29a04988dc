//===- CancelOrthogonalTest.cpp - pe-cancel-orthogonal against the graph without it ===//

#include "AlgebraicModels.h"
#include "AlgebraicTestUtil.h"

#include <algorithm>

namespace stringc::test {
namespace {

TEST(CancelOrthogonalTest, OneHeadTransformCancels) {
  PassCase c;
  c.source = kCayleyOneHead;
  Comparison r = compareAlgebraic(c, "pe-cancel-orthogonal");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.lossError, kRoundingTolerance);
  EXPECT_LE(r.outputError, kRoundingTolerance);
  EXPECT_EQ(r.gradientsCompared, 5);
  double largest = 0;
  for (const auto &[name, size] : r.gradientSizes)
    largest = std::max(largest, size);
  for (const auto &[name, error] : r.gradientErrors) {
    if (name == "s") {
      // Exactly 0 with the pass (S no longer reaches the loss); without it,
      // the gradient of a transform that cancels is rounding noise.
      EXPECT_LE(r.gradientSizes.at(name), kRoundingTolerance * largest);
      continue;
    }
    EXPECT_LE(error, kRoundingTolerance) << name;
  }
  EXPECT_EQ(countOf(r.irWith, "pe.cayley"), 0u);
  EXPECT_EQ(countOf(r.irWith, "pe.skew"), 0u);
  EXPECT_GT(countOf(r.irWithout, "pe.cayley"), 0u);
}

TEST(CancelOrthogonalTest, DenseSOverFourHeadsIsLeftAlone) {
  PassCase c;
  c.example = "vit_cayley.pe";
  Comparison r = compareAlgebraic(c, "pe-cancel-orthogonal");
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.maxError(), 0.0);
}

TEST(CancelOrthogonalTest, SparseSAcrossHeadsIsLeftAlone) {
  PassCase c;
  c.example = "vit_sparse_cayley.pe";
  Comparison r = compareAlgebraic(c, "pe-cancel-orthogonal");
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.maxError(), 0.0);
}

} // namespace
} // namespace stringc::test
