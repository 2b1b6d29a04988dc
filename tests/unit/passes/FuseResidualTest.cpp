//===- FuseResidualTest.cpp - pe-fuse-residual against the graph without it
//
// pe-fuse-residual is a default pass of --target=cpu only, after
// pe-autodiff: the harness compiles both sides with the CPU target's passes
// (on cpu-reference packages, run on the kernels of each case) and switches
// it off in one.

#include "FusionModels.h"
#include "PassEquivalence.h"

#include "stringc/Transforms/Pipeline.h"

#include <gtest/gtest.h>

namespace stringc::test {
namespace {

Comparison compareFuse(PassCase c) {
  c.pass = "pe-fuse-residual";
  return comparePass(c);
}

TEST(FuseResidualTest, TheCompiledTargetsRunItAfterTheDefaultPasses) {
  std::vector<llvm::StringRef> cpu = defaultPassNames("cpu");
  std::vector<llvm::StringRef> none = defaultPassNames("");
  ASSERT_EQ(cpu.size(), none.size() + 1);
  EXPECT_EQ(cpu.back(), "pe-fuse-residual");
  std::vector<llvm::StringRef> cuda = cpu;
  cuda.push_back("pe-cluster-cayley"); // the CUDA target's own, after it
  cuda.push_back("pe-cluster-gemms");
  EXPECT_EQ(defaultPassNames("cuda"), cuda);
  EXPECT_EQ(defaultPassNames("cpu-reference"), none);
}

// The fast kernels add the residual (the prior sum of input gradients) as
// the row-tile GEMM stores its tiles (on AVX2 CPUs; elsewhere the product,
// then the add), and layer_norm_grad_acc as it stores each row of dx: the
// bits of the unfused ops, so the step is the same to the last bit. The reference linear_residual sums in double, within
// rounding of the unfused graph.
TEST(FuseResidualTest, VitRopeTheSameBitsWithTheFastKernels) {
  for (stringrt::KernelSet kernels : {stringrt::KernelSet::Reference, stringrt::KernelSet::Fast}) {
    SCOPED_TRACE(kernels == stringrt::KernelSet::Fast ? "fast" : "reference");
    PassCase c;
    c.example = "vit_rope.pe";
    c.kernels = kernels;
    c.batch = 3; // 150 rows: row tiles of 6 and a remainder block
    Comparison r = compareFuse(c);
    EXPECT_TRUE(r.modulesDiffer);
    EXPECT_NE(r.irWith.find("pe.linear_residual"), std::string::npos);
    EXPECT_NE(r.irWith.find("pe.linear_grad_input_acc"), std::string::npos); // dh of q, k, v
    EXPECT_NE(r.irWith.find("pe.layer_norm_grad_acc"), std::string::npos); // the residual stream
    EXPECT_EQ(r.irWith.find("pe.add "), std::string::npos);                 // no add left
    EXPECT_EQ(r.irWith.find("pe.linear_gelu"), std::string::npos); // no gelu fusion
    EXPECT_EQ(r.irWithout.find("pe.linear_residual"), std::string::npos);
    if (kernels == stringrt::KernelSet::Fast)
      EXPECT_EQ(r.maxError(), 0.0) << r.worstGradient;
    else
      EXPECT_LE(r.maxError(), 1e-5) << r.worstGradient;
    EXPECT_GT(r.gradientsCompared, 0);
  }
}

TEST(FuseResidualTest, GptAndMixedRopeTheSameBitsWithTheFastKernels) {
  for (const char *example : {"gpt_rope_causal.pe", ""}) {
    SCOPED_TRACE(*example ? example : "mixed rope");
    PassCase c;
    c.example = example;
    if (c.example.empty())
      c.source = kMixedRopeViT;
    c.kernels = stringrt::KernelSet::Fast;
    Comparison r = compareFuse(c);
    EXPECT_TRUE(r.modulesDiffer);
    EXPECT_EQ(r.maxError(), 0.0) << r.worstGradient;
  }
}

TEST(FuseResidualTest, NothingToFuse) {
  PassCase c;
  c.source = kPlainMLP;
  Comparison r = compareFuse(c);
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.maxError(), 0.0);
}

} // namespace
} // namespace stringc::test
