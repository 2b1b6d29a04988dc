#include "stringrt/Error.h"

#include <gtest/gtest.h>

namespace stringrt {
namespace {

TEST(ErrorTest, MessageNamesTheFile) {
  Error error("/data/model.safetensors", "header is not valid JSON");
  EXPECT_STREQ(error.what(),
               "/data/model.safetensors: header is not valid JSON");
  EXPECT_EQ(error.path(), "/data/model.safetensors");
}

TEST(ErrorTest, MessageWithoutFile) {
  Error error("testFraction must be in [0, 1)");
  EXPECT_STREQ(error.what(), "testFraction must be in [0, 1)");
  EXPECT_TRUE(error.path().empty());
}

TEST(ErrorTest, IsARuntimeError) {
  try {
    throw Error("a.bin", "broken");
  } catch (const std::runtime_error &error) {
    EXPECT_STREQ(error.what(), "a.bin: broken");
  }
}

} // namespace
} // namespace stringrt
