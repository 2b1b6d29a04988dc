//===- ClusterCayleyTest.cpp - pe-cluster-cayley against the graph without it
//
// pe-cluster-cayley is a default pass of --target=cuda only, before
// pe-cluster-gemms: the harness compiles both sides with the CUDA target's
// passes (on cpu-reference packages, run on the kernels of each case) and
// switches it off in one. It only reorders side-effect-free ops, so the
// step is the same to the last bit.

#include "PassEquivalence.h"

#include "stringc/Transforms/Pipeline.h"

#include <gtest/gtest.h>

namespace stringc::test {
namespace {

TEST(ClusterCayleyTest, OnlyTheCudaTargetRunsIt) {
  EXPECT_TRUE(llvm::is_contained(defaultPassNames("cuda"), "pe-cluster-cayley"));
  for (const char *target : {"cpu", "cpu-reference", ""})
    EXPECT_FALSE(llvm::is_contained(defaultPassNames(target), "pe-cluster-cayley")) << target;
}

TEST(ClusterCayleyTest, ReorderingChangesNoBit) {
  for (const char *example : {"vit_cayley.pe", "vit_sparse_cayley.pe"})
    for (stringrt::KernelSet kernels :
         {stringrt::KernelSet::Reference, stringrt::KernelSet::Fast}) {
      SCOPED_TRACE(std::string(example) +
                   (kernels == stringrt::KernelSet::Fast ? " fast" : " reference"));
      PassCase c;
      c.example = example;
      c.pass = "pe-cluster-cayley";
      c.kernels = kernels;
      Comparison r = comparePass(c);
      EXPECT_TRUE(r.modulesDiffer); // the layers' Cayley weights moved together
      EXPECT_EQ(r.maxError(), 0.0) << r.worstGradient;
      EXPECT_GT(r.gradientsCompared, 0);
    }
}

} // namespace
} // namespace stringc::test
