// The op library's registry (runtime/src/ops/OpLibrary.h) and its place in
// the executor's tables: each op file's ops with their adapters, in every
// kernel set, and the registrations it refuses.
#include "../src/ops/Compositions.h"
#include "../src/ops/OpLibrary.h"
#include "ErrorOf.h"

#include "stringrt/Error.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

using namespace stringrt;
using stringrt::test::errorOf;

namespace {

void first(const detail::OpContext &) {}
void second(const detail::OpContext &) {}

} // namespace

TEST(OpLibrary, TheExecutorsTablesTakeTheLibrarysAdapters) {
  // Each op of the library, and whether it registers its shape contract as
  // `check` (stringc generates kernels for it, or its reference kernel is
  // its composition, which runs the check first).
  const std::pair<OpCode, bool> library[] = {
      {OpCode::LayerNorm, true},     {OpCode::LayerNormGrad, true},
      {OpCode::LayerNormGradAcc, true}, {OpCode::Gelu, true},
      {OpCode::GeluGrad, true},      {OpCode::CrossEntropy, false},
      {OpCode::CrossEntropyGrad, true}, {OpCode::Add, true},
      {OpCode::Sub, true}, {OpCode::Mul, true},
      {OpCode::Scale, true}, {OpCode::SumTo, true},
      {OpCode::Dropout, false},
      {OpCode::PatchEmbed, false},  {OpCode::PatchEmbedGrad, false},
      {OpCode::TokenEmbed, true},   {OpCode::TokenEmbedGrad, true},
      {OpCode::Linear, false},      {OpCode::LinearGradInput, false},
      {OpCode::LinearGradWeight, false}, {OpCode::LinearGradInputAcc, true},
      {OpCode::LinearResidual, false}, {OpCode::LinearGelu, true},
      {OpCode::Rope, false},        {OpCode::SpdGate, false},
      {OpCode::SpdGateGrad, false}, {OpCode::Attention, true},
      {OpCode::AttentionGrad, true}, {OpCode::Cayley, false},
      {OpCode::CayleyGrad, false}, {OpCode::CayleyWeight, false},
      {OpCode::CayleyWeightGrad, false}, {OpCode::GeneratorExp, false},
      {OpCode::GeneratorExpGrad, false}, {OpCode::ApplyRotation, false},
      {OpCode::ApplyRotationGrad, false}, {OpCode::RopeApply, true},
      {OpCode::RopeApplyGradTable, true}, {OpCode::RopeAttention, true},
      {OpCode::RopeAttentionGrad, true}};
  for (const auto &[code, generated] : library) {
    SCOPED_TRACE(opName(code));
    const ops::OpKernels *op = ops::opLibrary().find(code);
    ASSERT_NE(op, nullptr);
    ASSERT_NE(op->reference, nullptr);
    EXPECT_EQ(op->check != nullptr, generated);
    ASSERT_NE(op->fast, nullptr);
    const detail::OpSpec *reference = detail::opTable(KernelSet::Reference).find(code);
    ASSERT_NE(reference, nullptr);
    EXPECT_EQ(reference->run, op->reference);
    EXPECT_EQ(reference->check, op->check);
    // Fast, and Compiled's fallback (the same table).
    const detail::OpSpec *fast = detail::opTable(KernelSet::Fast).find(code);
    ASSERT_NE(fast, nullptr);
    EXPECT_EQ(fast->run, op->fast);
    EXPECT_EQ(fast->check, op->check);
    EXPECT_EQ(detail::opTable(KernelSet::Compiled).find(code)->run, op->fast);
  }
}

TEST(OpLibrary, AnOpWithoutAFastKernelRunsItsReferenceOneInEverySet) {
  // Each such op, and whether stringc generates kernels for it.
  const std::pair<OpCode, bool> library[] = {{OpCode::Relu, true},
                                             {OpCode::ReluGrad, true},
                                             {OpCode::BroadcastTo, false},
                                             {OpCode::ExpandAxis, false},
                                             {OpCode::Mean, false},
                                             {OpCode::MeanGrad, false},
                                             {OpCode::ClassToken, true},
                                             {OpCode::ClassTokenGrad, true},
                                             {OpCode::SelectToken, true},
                                             {OpCode::SelectTokenGrad, true},
                                             {OpCode::SkipGather, false},
                                             {OpCode::SkipGatherGrad, false},
                                             {OpCode::OffsetTable, false},
                                             {OpCode::PairGather, false},
                                             {OpCode::PairGatherGrad, false},
                                             {OpCode::SeqPositions, false},
                                             {OpCode::GridPositions, false},
                                             {OpCode::RopeFreqs, false},
                                             {OpCode::Sinusoidal, false},
                                             {OpCode::RelativePositions, false},
                                             {OpCode::RopeGradFreqs, false},
                                             {OpCode::Householder, false},
                                             {OpCode::HouseholderGradFreqs, false},
                                             {OpCode::Skew, false},
                                             {OpCode::SkewGrad, false},
                                             {OpCode::SparseSkew, false},
                                             {OpCode::SparseSkewGrad, false},
                                             {OpCode::CommutatorNorm, false},
                                             {OpCode::CommutatorNormGrad, false},
                                             {OpCode::RopeTable, false},
                                             {OpCode::RopeTableGrad, false}};
  for (const auto &[code, generated] : library) {
    SCOPED_TRACE(opName(code));
    const ops::OpKernels *op = ops::opLibrary().find(code);
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(op->fast, nullptr);
    EXPECT_EQ(op->check != nullptr, generated);
    for (KernelSet set : {KernelSet::Reference, KernelSet::Fast, KernelSet::Compiled}) {
      const detail::OpSpec *spec = detail::opTable(set).find(code);
      ASSERT_NE(spec, nullptr);
      EXPECT_EQ(spec->run, op->reference);
      EXPECT_EQ(spec->check, op->check);
    }
  }
}

TEST(OpLibrary, AnOpRegisteredTwiceOrWithoutAReferenceKernelIsRefused) {
  ops::OpRegistry registry;
  registry.add(OpCode::Gelu, {first});
  EXPECT_EQ(registry.find(OpCode::Gelu)->reference, first);
  EXPECT_EQ(errorOf([&] { registry.add(OpCode::Gelu, {second}); }),
            "op library: 'pe.gelu' is registered twice");
  EXPECT_EQ(registry.find(OpCode::Gelu)->reference, first);
  EXPECT_EQ(errorOf([&] { registry.add(OpCode::Relu, {nullptr, first, second}); }),
            "op library: 'pe.relu' has neither a reference kernel nor a composition");
  EXPECT_EQ(registry.find(OpCode::Relu), nullptr);
}

// A fused op with a composition (ops/Compositions.cpp) registers no
// reference kernel and gets the generic one; one with both is refused, but
// an op whose composition says it keeps its own kernel (linear_residual)
// must register it.
TEST(OpLibrary, AComposedOpGetsTheGenericReferenceKernel) {
  ops::OpRegistry registry;
  registry.add(OpCode::LinearGelu, {nullptr, first, second});
  EXPECT_EQ(registry.find(OpCode::LinearGelu)->reference, ops::runComposition);
  EXPECT_EQ(registry.find(OpCode::LinearGelu)->check, first);
  EXPECT_EQ(registry.find(OpCode::LinearGelu)->fast, second);
  EXPECT_EQ(errorOf([&] { registry.add(OpCode::RopeAttention, {first}); }),
            "op library: 'pe.rope_attention' has both a reference kernel and a composition "
            "(ops/Compositions.cpp)");
  EXPECT_EQ(errorOf([&] { registry.add(OpCode::LinearResidual, {nullptr, nullptr, second}); }),
            "op library: 'pe.linear_residual' has no reference kernel, which its composition "
            "says it keeps");
  registry.add(OpCode::LinearResidual, {first});
  EXPECT_EQ(registry.find(OpCode::LinearResidual)->reference, first);
}

TEST(OpLibrary, AnOpInTheLibraryAndInAFamilysTableIsRefused) {
  detail::OpTable table;
  table[OpCode::LayerNormGrad] = {first};
  EXPECT_EQ(errorOf([&] { detail::addLibraryOps(table, KernelSet::Reference); }),
            "executor: 'pe.layer_norm_grad' is both in the op library and in a family's table");
}
