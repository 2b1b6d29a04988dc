// The generated op schema (OpCodes.h, OpSchemaTable.inc from the dialect's
// ODS): rows in OpCode and name order, names found, and what ODS says about a
// few ops the runtime relies on.
#include "stringrt/OpSchema.h"

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
  EXPECT_EQ(attentionGrad.minOperands, 4);
  EXPECT_EQ(attentionGrad.maxOperands, 5);
  EXPECT_EQ(attentionGrad.resultCount(4), 3); // no rel, no drel
  EXPECT_EQ(attentionGrad.resultCount(5), 4);
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

} // namespace
} // namespace stringrt
