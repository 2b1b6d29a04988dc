//===- HoistTest.cpp - pe-hoist against the graph without it --------------===//

#include "FusionModels.h"
#include "PassEquivalence.h"

#include <gtest/gtest.h>

namespace stringc::test {
namespace {

Comparison compareHoist(PassCase c) {
  c.pass = "pe-hoist";
  return comparePass(c);
}

TEST(HoistTest, VitRopeSharesOneTable) {
  PassCase c;
  c.example = "vit_rope.pe";
  Comparison r = compareHoist(c);
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.maxError(), 1e-5) << r.worstGradient;
  EXPECT_GT(r.gradientsCompared, 0);
  // One cos/sin table for the 8 rotations, no pe.rope left.
  EXPECT_EQ(r.irWith.find("pe.rope "), std::string::npos);
  size_t tables = 0;
  for (size_t at = r.irWith.find("pe.rope_table "); at != std::string::npos;
       at = r.irWith.find("pe.rope_table ", at + 1))
    ++tables;
  EXPECT_EQ(tables, 2u) << "one in @forward, one in @gradients";
}

TEST(HoistTest, VitCayleyFastKernels) {
  PassCase c;
  c.example = "vit_cayley.pe";
  c.kernels = stringrt::KernelSet::Fast;
  Comparison r = compareHoist(c);
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.maxError(), 1e-4) << r.worstGradient;
  EXPECT_NE(r.irWith.find("pe.cayley_weight_grad"), std::string::npos);
  EXPECT_EQ(r.irWith.find("pe.cayley_grad"), std::string::npos);
}

TEST(HoistTest, LearnedFrequenciesKeepTheirGradient) {
  PassCase c;
  c.source = kMixedRopeViT;
  Comparison r = compareHoist(c);
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.maxError(), 1e-5) << r.worstGradient;
  EXPECT_NE(r.irWith.find("pe.rope_table_grad"), std::string::npos);
}

TEST(HoistTest, CausalGpt) {
  PassCase c;
  c.example = "gpt_rope_causal.pe";
  Comparison r = compareHoist(c);
  EXPECT_TRUE(r.modulesDiffer);
  EXPECT_LE(r.maxError(), 1e-5) << r.worstGradient;
}

TEST(HoistTest, NothingToHoist) {
  PassCase c;
  c.source = kPlainMLP;
  Comparison r = compareHoist(c);
  EXPECT_FALSE(r.modulesDiffer);
  EXPECT_EQ(r.maxError(), 0.0);
}

} // namespace
} // namespace stringc::test
