// The compiled-kernel ABI (stringrt/abi/CompiledKernels.h): kind names, the
// symbol's form and the rules the code generator and the runtime share.
#include "stringrt/abi/CompiledKernels.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace stringrt::abi {
namespace {

TEST(CompiledKernelAbi, EveryKindHasOneNameThatFindsIt) {
  std::set<std::string> names;
  size_t count = 0;
#define CHECK_KIND(Enum, name)                                                                     \
  EXPECT_STREQ(kernelKindName(KernelKind::Enum), name);                                            \
  EXPECT_EQ(findKernelKind(name), KernelKind::Enum);                                               \
  names.insert(name);                                                                              \
  ++count;
  STRINGRT_COMPILED_KERNEL_KINDS(CHECK_KIND)
#undef CHECK_KIND
  EXPECT_EQ(names.size(), count);
  EXPECT_EQ(findKernelKind("layer_norm_grad"), std::nullopt); // runs _dx and _dparams
  EXPECT_EQ(findKernelKind(""), std::nullopt);
}

TEST(CompiledKernelAbi, SymbolsRoundTrip) {
  const std::string digest = "0123456789abcdef";
  const std::string symbol = kernelSymbol(12, digest, KernelKind::LayerNormGradAccDx);
  EXPECT_EQ(symbol, "stringc_k12_0123456789abcdef_layer_norm_grad_acc_dx");
  std::optional<KernelSymbolParts> parts = parseKernelSymbol(symbol);
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->digest, digest);
  EXPECT_EQ(parts->kind, "layer_norm_grad_acc_dx");
  EXPECT_FALSE(parseKernelSymbol("stringc_k_0123456789abcdef_add"));  // no index
  EXPECT_FALSE(parseKernelSymbol("stringc_k1_0123456789ABCDEF_add")); // upper-case hex
  EXPECT_FALSE(parseKernelSymbol("stringc_k1_0123_add"));             // short digest
  EXPECT_FALSE(parseKernelSymbol("my_kernel"));
}

TEST(CompiledKernelAbi, RulesFollowTheShapes) {
  const Shape x = {-1, 50, 64}, vec = {64};
  auto rules = compiledKernelRules(OpCode::LayerNormGradAcc, {x, x, vec, x}, {x, vec, vec});
  ASSERT_TRUE(rules);
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ((*rules)[0].kind, KernelKind::LayerNormGradAccDx);
  EXPECT_EQ((*rules)[0].range, -1); // the batch
  EXPECT_EQ((*rules)[1].kind, KernelKind::LayerNormGradAccDparams);
  EXPECT_EQ((*rules)[1].range, 64); // the columns

  rules = compiledKernelRules(OpCode::TokenEmbedGrad, {{-1, 64}, {-1, 64, 32}}, {{100, 32}});
  ASSERT_TRUE(rules);
  ASSERT_EQ(rules->size(), 1u);
  EXPECT_EQ((*rules)[0].range, (100 + kTokenEmbedGradBlock - 1) / kTokenEmbedGradBlock);

  rules = compiledKernelRules(OpCode::Add, {{}, {}}, {{}}); // scalars: one row
  ASSERT_TRUE(rules);
  EXPECT_EQ((*rules)[0].range, 1);
  rules = compiledKernelRules(OpCode::Gelu, {{-1}}, {{-1}}); // a batch vector
  ASSERT_TRUE(rules);
  EXPECT_EQ((*rules)[0].range, -1);

  EXPECT_FALSE(generatesKernels(OpCode::Linear));
  rules = compiledKernelRules(OpCode::Linear, {x, {64, 64}}, {x});
  ASSERT_TRUE(rules);
  EXPECT_TRUE(rules->empty()); // the runtime's kernels run it
  EXPECT_FALSE(compiledKernelRules(OpCode::Attention, {{-1, 64}, {-1, 64}, {-1, 64}},
                                   {{-1, 64}})); // a rank the kernels cannot take
}

} // namespace
} // namespace stringrt::abi
