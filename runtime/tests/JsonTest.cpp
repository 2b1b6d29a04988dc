// The strict JSON parser used for safetensors headers.
#include "format/Json.h"

#include <gtest/gtest.h>

#include <limits>

namespace stringrt::detail {
namespace {

using Kind = JsonValue::Kind;

std::string parseError(std::string_view text) {
  try {
    parseJson(text);
  } catch (const JsonParseError &error) {
    return error.what();
  }
  return "(parsed)";
}

TEST(JsonTest, ParsesEveryKind) {
  JsonValue value = parseJson(
      R"( {"a": [1, -2.5e3, true, false, null], "b": {"c": "d"}, "e": {}} )");
  ASSERT_EQ(value.kind, Kind::Object);
  ASSERT_EQ(value.members.size(), 3u);
  EXPECT_EQ(value.members[0].key, "a");
  const JsonValue &array = value.members[0].value;
  ASSERT_EQ(array.kind, Kind::Array);
  ASSERT_EQ(array.elements.size(), 5u);
  EXPECT_EQ(array.elements[0].kind, Kind::Number);
  EXPECT_EQ(array.elements[0].text, "1");
  EXPECT_EQ(array.elements[1].text, "-2.5e3");
  EXPECT_EQ(array.elements[2].kind, Kind::Bool);
  EXPECT_TRUE(array.elements[2].boolean);
  EXPECT_FALSE(array.elements[3].boolean);
  EXPECT_EQ(array.elements[4].kind, Kind::Null);
  EXPECT_EQ(value.members[1].value.members[0].value.text, "d");
  EXPECT_TRUE(value.members[2].value.members.empty());
  EXPECT_EQ(array.offset, 7u);
}

TEST(JsonTest, KeepsDuplicateKeysInOrder) {
  JsonValue value = parseJson(R"({"x": 1, "x": 2})");
  ASSERT_EQ(value.members.size(), 2u);
  EXPECT_EQ(value.members[0].value.text, "1");
  EXPECT_EQ(value.members[1].value.text, "2");
}

TEST(JsonTest, IntegersAreExactBeyondDoublePrecision) {
  EXPECT_EQ(parseJson("9007199254740993").asUInt64(), 9007199254740993ull);
  EXPECT_EQ(parseJson("18446744073709551615").asUInt64(),
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(parseJson("-9223372036854775808").asInt64(),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(parseJson("9223372036854775807").asInt64(),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parseJson("-0").asUInt64(), 0u);
}

TEST(JsonTest, IntegerAccessorsRejectNonIntegers) {
  EXPECT_FALSE(parseJson("18446744073709551616").asUInt64());
  EXPECT_FALSE(parseJson("9223372036854775808").asInt64());
  EXPECT_FALSE(parseJson("-9223372036854775809").asInt64());
  EXPECT_FALSE(parseJson("-1").asUInt64());
  EXPECT_FALSE(parseJson("1.0").asInt64());
  EXPECT_FALSE(parseJson("1e3").asUInt64());
  EXPECT_FALSE(parseJson("\"1\"").asInt64());
  EXPECT_FALSE(parseJson("true").asInt64());
}

TEST(JsonTest, DecodesEscapes) {
  EXPECT_EQ(parseJson(R"("a\"b\\c\/d\b\f\n\r\t")").text, "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(parseJson(R"("\u00e9\u4e2d")").text, "\xC3\xA9\xE4\xB8\xAD");
  EXPECT_EQ(parseJson(R"("\ud83d\ude00")").text, "\xF0\x9F\x98\x80"); // U+1F600
  EXPECT_EQ(parseJson(R"("\u0000")").text, std::string(1, '\0'));
  EXPECT_EQ(parseJson("\"caf\xC3\xA9\"").text, "caf\xC3\xA9");
}

TEST(JsonTest, RejectsMalformedStrings) {
  EXPECT_NE(parseError(R"("\q")").find("invalid escape '\\q'"),
            std::string::npos);
  EXPECT_NE(parseError(R"("\ud83d")").find("high surrogate"),
            std::string::npos);
  EXPECT_NE(parseError(R"("\ud83dx")").find("high surrogate"),
            std::string::npos);
  EXPECT_NE(parseError(R"("\ude00")").find("unpaired low surrogate"),
            std::string::npos);
  EXPECT_NE(parseError(R"("\u12G4")").find("not a hex digit"),
            std::string::npos);
  EXPECT_NE(parseError("\"a\nb\"").find("control character 0x0A"),
            std::string::npos);
  EXPECT_NE(parseError("\"abc").find("unexpected end of input in a string"),
            std::string::npos);
}

TEST(JsonTest, RejectsInvalidUtf8) {
  for (const char *text :
       {"\"\xC0\x80\"", "\"\xED\xA0\x80\"", "\"\xF5\x80\x80\x80\"",
        "\"\xE4\xB8\"", "\"\x80\"", "\"\xF4\x90\x80\x80\""})
    EXPECT_NE(parseError(text).find("invalid UTF-8"), std::string::npos)
        << parseError(text);
}

TEST(JsonTest, RejectsMalformedDocuments) {
  struct Case {
    std::string text;
    const char *fragment;
  };
  const Case cases[] = {
      {"", "at byte 0: unexpected end of input"},
      {"   ", "unexpected end of input"},
      {"{", "expected an object key"},
      {"{\"a\" 1}", "expected ':' after an object key"},
      {"{\"a\": 1,}", "expected a string key"},
      {"{\"a\": 1 \"b\": 2}", "expected ',' or '}' in an object"},
      {"[1, 2", "expected ',' or ']' in an array"},
      {"[1,]", "expected a value"},
      {"{a: 1}", "expected a string key, found 'a'"},
      {"01", "leading zeros"},
      {"1.", "expected a digit after '.'"},
      {"1e", "expected a digit in the exponent"},
      {"-", "expected a digit"},
      {"+1", "unexpected '+'"},
      {"NaN", "unexpected 'N'"},
      {"tru", "expected 'true'"},
      {"{} {}", "at byte 3: unexpected '{' after the JSON value"},
      {"\xEF\xBB\xBF{}",
       "unexpected byte 0xEF"}, // A byte-order mark is not whitespace.
      {std::string("{}\0", 3), "unexpected byte 0x00 after the JSON value"},
  };
  for (const Case &c : cases) {
    std::string error = parseError(c.text);
    EXPECT_NE(error.find(c.fragment), std::string::npos)
        << "input: " << c.text << "\nerror: " << error;
  }
}

TEST(JsonTest, ReportsTheOffset) {
  try {
    parseJson("{\"a\": [1, 2,, 3]}");
    FAIL() << "did not throw";
  } catch (const JsonParseError &error) {
    EXPECT_EQ(error.offset(), 12u);
    EXPECT_EQ(error.reason(), "unexpected ',', expected a value");
  }
}

TEST(JsonTest, LimitsNesting) {
  std::string deepest =
      std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_NO_THROW(parseJson(deepest));
  std::string tooDeep =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_NE(parseError(tooDeep).find("nest deeper than 64 levels"),
            std::string::npos);
  // Far deeper input fails the same way instead of overflowing the stack.
  EXPECT_NE(parseError(std::string(1'000'000, '[')).find("nest deeper"),
            std::string::npos);
}

TEST(JsonTest, WrittenStringsParseBack) {
  const std::string samples[] = {"",
                                 "plain",
                                 "quote\" backslash\\ slash/",
                                 "\n\t\r\b\f",
                                 std::string("nul\0x", 5),
                                 "\x01\x1f\x7f",
                                 "caf\xC3\xA9 \xF0\x9F\x98\x80"};
  for (const std::string &sample : samples) {
    std::string json;
    appendJsonString(json, sample);
    EXPECT_EQ(parseJson(json).text, sample) << json;
  }
}

TEST(JsonTest, ValidatesUtf8) {
  EXPECT_TRUE(isValidUtf8(""));
  EXPECT_TRUE(isValidUtf8(
      "ascii \xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(isValidUtf8("\xC3"));
  EXPECT_FALSE(isValidUtf8("\xC1\xBF"));     // Overlong.
  EXPECT_FALSE(isValidUtf8("\xE0\x9F\xBF")); // Overlong.
  EXPECT_FALSE(isValidUtf8("\xED\xBF\xBF")); // Surrogate.
  EXPECT_FALSE(isValidUtf8("\xF4\x90\x80\x80"));
  EXPECT_FALSE(isValidUtf8("\xFF"));
}

TEST(JsonTest, QuotesForMessages) {
  EXPECT_EQ(quoteForMessage("w"), "\"w\"");
  EXPECT_EQ(quoteForMessage("a\nb\"c"), "\"a\\nb\\\"c\"");
  EXPECT_EQ(quoteForMessage("bad\xFFutf8"), "\"bad\\xFFutf8\"");
  std::string shown = quoteForMessage(std::string(1000, 'x'));
  EXPECT_LT(shown.size(), 100u);
  EXPECT_NE(shown.find("...\""), std::string::npos);
}

} // namespace
} // namespace stringrt::detail
