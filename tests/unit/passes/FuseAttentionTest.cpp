//===- FuseAttentionTest.cpp - pe-fuse-attention against the graph without it

#include "FusionModels.h"
#include "PassEquivalence.h"

#include <gtest/gtest.h>

namespace stringc::test {
namespace {

Comparison compareFuse(PassCase c) {
  c.pass = "pe-fuse-attention";
  return comparePass(c);
}

TEST(FuseAttentionTest, VitRopeReferenceAndFastKernels) {
  for (stringrt::KernelSet kernels : {stringrt::KernelSet::Reference, stringrt::KernelSet::Fast}) {
    PassCase c;
    c.example = "vit_rope.pe";
    c.kernels = kernels;
    Comparison r = compareFuse(c);
    EXPECT_TRUE(r.modulesDiffer);
    EXPECT_LE(r.maxError(), kernels == stringrt::KernelSet::Fast ? 1e-4 : 1e-5)
        << r.worstGradient;
    EXPECT_NE(r.irWith.find("pe.rope_attention_grad"), std::string::npos);
    EXPECT_EQ(r.irWith.find("pe.attention "), std::string::npos);
  }
}

TEST(FuseAttentionTest, CausalMask) {
  PassCase c;
  c.example = "gpt_rope_causal.pe";
  c.kernels = stringrt::KernelSet::Fast;
  Comparison r = compareFuse(c);
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.maxError(), 1e-4) << r.worstGradient;
}

TEST(FuseAttentionTest, SkipMasksAreLeftAlone) {
  PassCase c;
  c.example = "gpt_rope_skip.pe";
  Comparison r = compareFuse(c);
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.irWith.find("pe.rope_attention"), std::string::npos);
}

TEST(FuseAttentionTest, LearnedFrequenciesAreLeftAlone) {
  PassCase c;
  c.source = kMixedRopeViT;
  Comparison r = compareFuse(c);
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.maxError(), 0.0);
}

} // namespace
} // namespace stringc::test
