#include "stringrt/DType.h"

#include "stringrt/Error.h"

#include <gtest/gtest.h>

namespace stringrt {
namespace {

TEST(DTypeTest, NamesSizesAndParsingAgree) {
  struct Expected {
    DType dtype;
    const char *name;
    size_t size;
  };
  const Expected all[] = {
      {DType::F64, "F64", 8},   {DType::F32, "F32", 4}, {DType::F16, "F16", 2},
      {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8}, {DType::I32, "I32", 4},
      {DType::I16, "I16", 2},   {DType::I8, "I8", 1},   {DType::U8, "U8", 1},
      {DType::Bool, "BOOL", 1},
  };
  for (const Expected &expected : all) {
    EXPECT_STREQ(dtypeName(expected.dtype), expected.name);
    EXPECT_EQ(dtypeSize(expected.dtype), expected.size);
    ASSERT_TRUE(parseDType(expected.name).has_value()) << expected.name;
    EXPECT_EQ(*parseDType(expected.name), expected.dtype);
  }
}

TEST(DTypeTest, ParsingIsExact) {
  for (const char *name :
       {"f32", "F32 ", "float32", "Bool", "", "U16", "F8_E4M3"})
    EXPECT_FALSE(parseDType(name).has_value()) << name;
}

TEST(DTypeTest, OutOfRangeValueThrows) {
  EXPECT_THROW(dtypeSize(static_cast<DType>(99)), Error);
}

} // namespace
} // namespace stringrt
