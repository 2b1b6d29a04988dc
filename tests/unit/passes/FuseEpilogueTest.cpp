//===- FuseEpilogueTest.cpp - pe-fuse-epilogue against the graph without it

#include "FusionModels.h"
#include "PassEquivalence.h"

#include <gtest/gtest.h>

namespace stringc::test {
namespace {

Comparison compareFuse(PassCase c) {
  c.pass = "pe-fuse-epilogue";
  return comparePass(c);
}

TEST(FuseEpilogueTest, VitRopeReferenceAndFastKernels) {
  for (stringrt::KernelSet kernels : {stringrt::KernelSet::Reference, stringrt::KernelSet::Fast}) {
    PassCase c;
    c.example = "vit_rope.pe";
    c.kernels = kernels;
    Comparison r = compareFuse(c);
    EXPECT_TRUE(r.modulesDiffer);
    EXPECT_LE(r.maxError(), kernels == stringrt::KernelSet::Fast ? 1e-4 : 1e-5)
        << r.worstGradient;
    EXPECT_NE(r.irWith.find("pe.linear_gelu"), std::string::npos);
    EXPECT_NE(r.irWith.find("pe.linear_residual"), std::string::npos);
    EXPECT_EQ(r.irWith.find("pe.gelu "), std::string::npos);
  }
}

TEST(FuseEpilogueTest, GptAndMixedRope) {
  for (const char *example : {"gpt_rope_causal.pe", ""}) {
    PassCase c;
    c.example = example;
    if (c.example.empty())
      c.source = kMixedRopeViT;
    Comparison r = compareFuse(c);
    EXPECT_TRUE(r.modulesDiffer);
    EXPECT_LE(r.maxError(), 1e-5) << r.worstGradient;
  }
}

TEST(FuseEpilogueTest, NothingToFuse) {
  PassCase c;
  c.source = kPlainMLP;
  Comparison r = compareFuse(c);
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.maxError(), 0.0);
}

} // namespace
} // namespace stringc::test
