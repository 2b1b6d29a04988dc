// The generated op schema (OpCodes.h, OpSchemaTable.inc from the dialect's
// ODS): rows in OpCode and name order, names found, and what ODS says about a
// few ops the runtime relies on.
#include "stringrt/OpSchema.h"

#include "format/OpAttrs.h"
#include "stringrt/Error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace stringrt {
namespace {

TEST(OpSchema, RowsAreInCodeAndNameOrderAndEveryNameIsFound) {
  for (size_t i = 0; i < kOpCodeCount; ++i) {
    const OpCode code = static_cast<OpCode>(i);
    const OpSchema &schema = opSchema(code);
    EXPECT_EQ(schema.code, code) << schema.name;
    if (i > 0)
      EXPECT_LT(std::strcmp(opSchema(static_cast<OpCode>(i - 1)).name, schema.name), 0)
          << schema.name;
    EXPECT_EQ(findOpCode(schema.name), code) << schema.name;
    EXPECT_LE(schema.minOperands, schema.maxOperands) << schema.name;
    EXPECT_EQ(std::strlen(schema.operandTypes), size_t(schema.maxOperands)) << schema.name;
  }
  EXPECT_EQ(findOpCode("pe.parameter"), std::nullopt); // a module op, not a program op
  EXPECT_EQ(findOpCode("pe.linearr"), std::nullopt);
  EXPECT_EQ(findOpCode(""), std::nullopt);
  EXPECT_EQ(findOpCode("zz"), std::nullopt);
}

TEST(OpSchema, SaysWhatTheDialectSays) {
  const OpSchema &attentionGrad = opSchema(OpCode::AttentionGrad);
  EXPECT_STREQ(attentionGrad.name, "pe.attention_grad");
  EXPECT_EQ(attentionGrad.minOperands, 6); // q, k, v, y, lse, dy
  EXPECT_EQ(attentionGrad.maxOperands, 7); // and rel
  EXPECT_EQ(attentionGrad.resultCount(6), 3); // no rel, no drel
  EXPECT_EQ(attentionGrad.resultCount(7), 4);
  EXPECT_TRUE(attentionGrad.acceptsResults(7, 4));
  EXPECT_FALSE(attentionGrad.acceptsResults(7, 3));
  // pe.attention's log-sum-exp: a saved result, with or without it.
  const OpSchema &attention = opSchema(OpCode::Attention);
  EXPECT_TRUE(attention.savedResult);
  EXPECT_TRUE(attention.acceptsResults(3, 1));
  EXPECT_TRUE(attention.acceptsResults(3, 2));
  EXPECT_TRUE(attention.acceptsResults(4, 2));
  EXPECT_FALSE(attention.acceptsResults(3, 3));
  EXPECT_FALSE(attention.acceptsResults(3, 0));
  const AttrSchema *mask = attentionGrad.findAttr("mask");
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ(mask->kind, AttrKind::Enum);
  ASSERT_EQ(mask->keywords.size(), 3u);
  EXPECT_STREQ(mask->keywords[2], "skip");
  const AttrSchema *skipBase = attentionGrad.findAttr("skip_base");
  ASSERT_NE(skipBase, nullptr);
  EXPECT_FALSE(skipBase->required);
  EXPECT_FALSE(skipBase->defaultValue); // OptionalAttr: absent means "not given"

  const AttrSchema *epsilon = opSchema(OpCode::LayerNorm).findAttr("epsilon");
  ASSERT_NE(epsilon, nullptr);
  EXPECT_FALSE(epsilon->required);
  EXPECT_EQ(epsilon->defaultValue, 1e-5); // DefaultValuedAttr<F64Attr, "1.0e-5">

  const OpSchema &tokenEmbed = opSchema(OpCode::TokenEmbed);
  EXPECT_STREQ(tokenEmbed.operandTypes, "if"); // ids are i32
  const OpSchema &linearGelu = opSchema(OpCode::LinearGelu);
  EXPECT_EQ(linearGelu.minOperands, 2); // the bias is optional
  EXPECT_EQ(linearGelu.resultCount(2), 2);
  EXPECT_EQ(linearGelu.resultCount(3), 2);
  EXPECT_EQ(opSchema(OpCode::GetParam).findAttr("param")->kind, AttrKind::String);
  EXPECT_EQ(opSchema(OpCode::SparseSkew).findAttr("support")->kind, AttrKind::Ints);
}

// STRINGRT_FOR_EACH_OP (OpCodes.h) and the schema rows (OpSchemaTable.inc)
// are generated separately: they must list the same ops in the same order.
TEST(OpSchema, TheXMacroListsTheSchemaRows) {
  size_t count = 0;
#define CHECK_OP(Enum, name)                                                                       \
  EXPECT_STREQ(opName(OpCode::Enum), name);                                                        \
  EXPECT_EQ(static_cast<size_t>(OpCode::Enum), count);                                             \
  ++count;
  STRINGRT_FOR_EACH_OP(CHECK_OP)
#undef CHECK_OP
  EXPECT_EQ(count, kOpCodeCount);
}

// The generated accessors (format/OpAttrs.h): an absent DefaultValuedAttr
// reads as the schema's ODS default, a present one as its value.
TEST(OpSchema, AttributeAccessorsHaveTheOdsDefaults) {
  ProgramOp layerNorm;
  layerNorm.op = "pe.layer_norm";
  EXPECT_EQ(attrs::LayerNorm{layerNorm}.epsilon(),
            *opSchema(OpCode::LayerNorm).findAttr("epsilon")->defaultValue);
  EXPECT_EQ(attrs::LayerNorm::kEpsilonDefault, 1e-5);
  layerNorm.attrs["epsilon"] = 1e-6;
  EXPECT_EQ(attrs::LayerNorm{layerNorm}.epsilon(), 1e-6);

  ProgramOp gelu;
  gelu.op = "pe.gelu";
  EXPECT_FALSE(attrs::Gelu{gelu}.approximate());
  gelu.attrs["approximate"] = true;
  EXPECT_TRUE(attrs::Gelu{gelu}.approximate());

  ProgramOp seq;
  seq.op = "pe.seq_positions";
  seq.attrs["length"] = int64_t{7};
  EXPECT_EQ(attrs::SeqPositions{seq}.length(), 7);
  EXPECT_EQ(attrs::SeqPositions{seq}.special(), 0);
  EXPECT_THROW(attrs::Scale{seq}.factor(), Error); // required, absent: an error

  ProgramOp attention;
  attention.op = "pe.attention";
  EXPECT_EQ(attrs::Attention{attention}.skipBase(), std::nullopt); // OptionalAttr
  attention.attrs["skip_base"] = int64_t{3};
  EXPECT_EQ(attrs::Attention{attention}.skipBase(), 3);
}

} // namespace
} // namespace stringrt
