//===- SkipGatherTest.cpp - pe-skip-gather against the graph without it ---===//
//
// A one-key softmax is exactly 1, so the gather gives the same loss, outputs
// and gradients (the gradients of q and k were exact zeros). The skip GPTs'
// frozen W_Q / W_K projections and their RoPE disappear from both programs.
//
//===----------------------------------------------------------------------===//

#include "AlgebraicTestUtil.h"

namespace stringc::test {
namespace {

void expectGathered(const char *example, stringrt::KernelSet kernels) {
  PassCase c;
  c.example = example;
  c.kernels = kernels;
  Comparison r = compareAlgebraic(c, "pe-skip-gather");
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_GT(r.gradientsCompared, 0);
  EXPECT_LE(r.maxError(), kRoundingTolerance) << r.worstGradient;
  // 2 layers: one gather per attention in @forward and in @gradients, one
  // reverse shift per attention in @gradients; no attention left.
  EXPECT_EQ(countOf(r.irWith, "pe.skip_gather "), 4u);
  EXPECT_EQ(countOf(r.irWith, "pe.skip_gather_grad "), 2u);
  EXPECT_EQ(countOf(r.irWith, "pe.attention"), 0u);
  EXPECT_GT(countOf(r.irWithout, "pe.attention "), 0u);
}

TEST(SkipGatherTest, GptRopeSkip) {
  expectGathered("gpt_rope_skip.pe", stringrt::KernelSet::Reference);
  PassCase c;
  c.example = "gpt_rope_skip.pe";
  std::string with = trainIR(c, {});
  // q and k were the only users of RoPE and of the frozen projections.
  EXPECT_EQ(countOf(with, "pe.rope "), 0u);
  for (const char *read : {"pe.get_param @decoder.0.wq ", "pe.get_param @decoder.1.wk "})
    EXPECT_EQ(countOf(with, read), 0u) << read;
  CompileOptions without;
  without.disabledPasses = {"pe-skip-gather"};
  EXPECT_EQ(countOf(trainIR(c, without), "pe.get_param @decoder.0.wq "), 2u);
}

TEST(SkipGatherTest, GptRopeSkipFastKernels) {
  expectGathered("gpt_rope_skip.pe", stringrt::KernelSet::Fast);
}

TEST(SkipGatherTest, GptSinusoidalSkip) {
  expectGathered("gpt_sinusoidal_skip.pe", stringrt::KernelSet::Reference);
}

TEST(SkipGatherTest, CausalIsLeftAlone) {
  PassCase c;
  c.example = "gpt_rope_causal.pe";
  Comparison r = compareAlgebraic(c, "pe-skip-gather");
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(countOf(r.irWith, "pe.skip_gather"), 0u);
  EXPECT_EQ(r.maxError(), 0.0);
}

} // namespace
} // namespace stringc::test
