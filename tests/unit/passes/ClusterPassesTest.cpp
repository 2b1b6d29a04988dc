//===- ClusterPassesTest.cpp - the clustering passes against the graph without
//
// pe-cluster-cayley and pe-cluster-gemms are default passes of --target=cuda
// only (pe-cluster-cayley before pe-cluster-gemms, which comes last): the
// harness compiles both sides with the CUDA target's passes (on
// cpu-reference packages, run on the kernels of each case) and switches the
// pass off in one. Both only reorder side-effect-free ops, so the step is
// the same to the last bit.

#include "PassEquivalence.h"

#include "stringc/Transforms/Pipeline.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace stringc::test {
namespace {

// Each example with and without `pass`, on the reference and the fast
// kernels: the modules differ (the pass moved something) and every
// gradient has the same bits.
void expectReorderingChangesNoBit(const char *pass, std::initializer_list<const char *> examples) {
  for (const char *example : examples)
    for (stringrt::KernelSet kernels :
         {stringrt::KernelSet::Reference, stringrt::KernelSet::Fast}) {
      SCOPED_TRACE(std::string(pass) + " on " + example +
                   (kernels == stringrt::KernelSet::Fast ? " fast" : " reference"));
      PassCase c;
      c.example = example;
      c.pass = pass;
      c.kernels = kernels;
      Comparison r = comparePass(c);
      EXPECT_TRUE(r.modulesDiffer);
      EXPECT_EQ(r.maxError(), 0.0) << r.worstGradient;
      EXPECT_GT(r.gradientsCompared, 0);
    }
}

TEST(ClusterPassesTest, OnlyTheCudaTargetRunsThem) {
  EXPECT_TRUE(llvm::is_contained(defaultPassNames("cuda"), "pe-cluster-cayley"));
  EXPECT_EQ(defaultPassNames("cuda").back(), "pe-cluster-gemms");
  for (const char *target : {"cpu", "cpu-reference", ""})
    for (const char *pass : {"pe-cluster-cayley", "pe-cluster-gemms"})
      EXPECT_FALSE(llvm::is_contained(defaultPassNames(target), pass)) << target << " " << pass;
}

// The layers' Cayley weights, skew builders and skew gradients move
// together; in vit_string also the folded weights W U and their gradients.
TEST(ClusterPassesTest, ClusteringTheCayleyOpsChangesNoBit) {
  expectReorderingChangesNoBit("pe-cluster-cayley",
                               {"vit_cayley.pe", "vit_sparse_cayley.pe", "vit_string.pe"});
}

// The weight gradients of Q, K, V move together.
TEST(ClusterPassesTest, ClusteringTheGemmsChangesNoBit) {
  expectReorderingChangesNoBit("pe-cluster-gemms", {"vit_rope.pe", "vit_cayley.pe"});
}

} // namespace
} // namespace stringc::test
