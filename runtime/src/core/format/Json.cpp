#include "format/Json.h"

#include <fmt/format.h>

#include <limits>

namespace stringrt::detail {

namespace {

// Length of the well-formed UTF-8 sequence starting at s[0] (1..4), or 0 if it
// is malformed: truncated, overlong, a surrogate or above U+10FFFF.
size_t utf8SequenceLength(const unsigned char *s, size_t available) {
  unsigned char c = s[0];
  if (c < 0x80)
    return 1;
  size_t length;
  unsigned char low = 0x80, high = 0xBF; // Allowed range of the second byte.
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    if (c == 0xE0)
      low = 0xA0; // Overlong.
    else if (c == 0xED)
      high = 0x9F; // Surrogates U+D800..U+DFFF.
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    if (c == 0xF0)
      low = 0x90; // Overlong.
    else if (c == 0xF4)
      high = 0x8F; // Above U+10FFFF.
  } else {
    return 0;
  }
  if (available < length || s[1] < low || s[1] > high)
    return 0;
  for (size_t i = 2; i < length; ++i)
    if (s[i] < 0x80 || s[i] > 0xBF)
      return 0;
  return length;
}

void appendUtf8(std::string &out, uint32_t codePoint) {
  if (codePoint < 0x80) {
    out += static_cast<char>(codePoint);
  } else if (codePoint < 0x800) {
    out += static_cast<char>(0xC0 | (codePoint >> 6));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  } else if (codePoint < 0x10000) {
    out += static_cast<char>(0xE0 | (codePoint >> 12));
    out += static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (codePoint >> 18));
    out += static_cast<char>(0x80 | ((codePoint >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  }
}

std::string describeByte(unsigned char c) {
  if (c >= 0x21 && c <= 0x7E)
    return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02X}", c);
}

class Parser {
public:
  explicit Parser(std::string_view text) : text_(text) {}

  JsonValue parseDocument() {
    skipWhitespace();
    JsonValue value = parseValue(0);
    skipWhitespace();
    if (pos_ != text_.size())
      fail(fmt::format("unexpected {} after the JSON value",
                       describeByte(peek())));
    return value;
  }

private:
  [[noreturn]] void fail(const std::string &reason) const {
    throw JsonParseError(pos_, reason);
  }

  bool atEnd() const { return pos_ >= text_.size(); }
  unsigned char peek() const { return static_cast<unsigned char>(text_[pos_]); }

  void skipWhitespace() {
    while (!atEnd() && (peek() == ' ' || peek() == '\t' || peek() == '\n' ||
                        peek() == '\r'))
      ++pos_;
  }

  void expect(char c, const char *context) {
    if (atEnd())
      fail(
          fmt::format("unexpected end of input, expected '{}' {}", c, context));
    if (peek() != static_cast<unsigned char>(c))
      fail(fmt::format("expected '{}' {}, found {}", c, context,
                       describeByte(peek())));
    ++pos_;
  }

  JsonValue parseValue(int depth) {
    if (atEnd())
      fail("unexpected end of input, expected a value");
    JsonValue value;
    value.offset = pos_;
    switch (peek()) {
    case '{':
      parseObject(value, depth + 1);
      break;
    case '[':
      parseArray(value, depth + 1);
      break;
    case '"':
      value.kind = JsonValue::Kind::String;
      value.text = parseString();
      break;
    case 't':
      parseLiteral("true");
      value.kind = JsonValue::Kind::Bool;
      value.boolean = true;
      break;
    case 'f':
      parseLiteral("false");
      value.kind = JsonValue::Kind::Bool;
      break;
    case 'n':
      parseLiteral("null");
      break;
    default:
      if (peek() == '-' || (peek() >= '0' && peek() <= '9')) {
        value.kind = JsonValue::Kind::Number;
        value.text = parseNumber();
        break;
      }
      fail(
          fmt::format("unexpected {}, expected a value", describeByte(peek())));
    }
    return value;
  }

  void checkDepth(int depth) const {
    if (depth > kMaxJsonDepth)
      fail(fmt::format("objects and arrays nest deeper than {} levels",
                       kMaxJsonDepth));
  }

  void parseObject(JsonValue &value, int depth) {
    checkDepth(depth);
    value.kind = JsonValue::Kind::Object;
    ++pos_; // '{'
    skipWhitespace();
    if (!atEnd() && peek() == '}') {
      ++pos_;
      return;
    }
    while (true) {
      skipWhitespace();
      if (atEnd())
        fail("unexpected end of input, expected an object key");
      if (peek() != '"')
        fail(fmt::format("expected a string key, found {}",
                         describeByte(peek())));
      JsonMember member;
      member.key = parseString();
      skipWhitespace();
      expect(':', "after an object key");
      skipWhitespace();
      member.value = parseValue(depth);
      value.members.push_back(std::move(member));
      skipWhitespace();
      if (atEnd())
        fail("unexpected end of input, expected ',' or '}' in an object");
      if (peek() == '}') {
        ++pos_;
        return;
      }
      expect(',', "or '}' in an object");
    }
  }

  void parseArray(JsonValue &value, int depth) {
    checkDepth(depth);
    value.kind = JsonValue::Kind::Array;
    ++pos_; // '['
    skipWhitespace();
    if (!atEnd() && peek() == ']') {
      ++pos_;
      return;
    }
    while (true) {
      skipWhitespace();
      value.elements.push_back(parseValue(depth));
      skipWhitespace();
      if (atEnd())
        fail("unexpected end of input, expected ',' or ']' in an array");
      if (peek() == ']') {
        ++pos_;
        return;
      }
      expect(',', "or ']' in an array");
    }
  }

  void parseLiteral(std::string_view literal) {
    if (text_.substr(pos_, literal.size()) != literal)
      fail(fmt::format("invalid literal, expected '{}'", literal));
    pos_ += literal.size();
  }

  size_t skipDigits() {
    size_t start = pos_;
    while (!atEnd() && peek() >= '0' && peek() <= '9')
      ++pos_;
    return pos_ - start;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  std::string parseNumber() {
    size_t start = pos_;
    if (peek() == '-')
      ++pos_;
    if (atEnd() || peek() < '0' || peek() > '9')
      fail("invalid number: expected a digit");
    if (peek() == '0') {
      ++pos_;
      if (!atEnd() && peek() >= '0' && peek() <= '9')
        fail("invalid number: leading zeros are not allowed");
    } else {
      skipDigits();
    }
    if (!atEnd() && peek() == '.') {
      ++pos_;
      if (skipDigits() == 0)
        fail("invalid number: expected a digit after '.'");
    }
    if (!atEnd() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      if (!atEnd() && (peek() == '+' || peek() == '-'))
        ++pos_;
      if (skipDigits() == 0)
        fail("invalid number: expected a digit in the exponent");
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t parseHex4() {
    uint32_t result = 0;
    for (int i = 0; i < 4; ++i) {
      if (atEnd())
        fail("unexpected end of input in a \\u escape");
      unsigned char c = peek();
      uint32_t digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      else
        fail(fmt::format("invalid \\u escape: {} is not a hex digit",
                         describeByte(c)));
      result = result * 16 + digit;
      ++pos_;
    }
    return result;
  }

  void parseUnicodeEscape(std::string &out) {
    size_t escapeStart = pos_ - 2; // At the backslash.
    uint32_t unit = parseHex4();
    if (unit >= 0xDC00 && unit <= 0xDFFF) {
      pos_ = escapeStart;
      fail("invalid \\u escape: unpaired low surrogate");
    }
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u") {
        pos_ = escapeStart;
        fail("invalid \\u escape: high surrogate not followed by a low "
             "surrogate");
      }
      pos_ += 2;
      uint32_t low = parseHex4();
      if (low < 0xDC00 || low > 0xDFFF) {
        pos_ = escapeStart;
        fail("invalid \\u escape: high surrogate not followed by a low "
             "surrogate");
      }
      unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
    }
    appendUtf8(out, unit);
  }

  std::string parseString() {
    ++pos_; // Opening quote.
    std::string out;
    while (true) {
      if (atEnd())
        fail("unexpected end of input in a string");
      unsigned char c = peek();
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20)
        fail(fmt::format(
            "control character 0x{:02X} in a string must be escaped", c));
      if (c == '\\') {
        ++pos_;
        if (atEnd())
          fail("unexpected end of input in a string escape");
        unsigned char e = peek();
        ++pos_;
        switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          parseUnicodeEscape(out);
          break;
        default:
          --pos_;
          fail(fmt::format("invalid escape '\\{}'", static_cast<char>(e)));
        }
        continue;
      }
      // A run of plain ASCII at once (manifests are megabytes of it).
      size_t run = pos_;
      while (run < text_.size()) {
        const unsigned char r = static_cast<unsigned char>(text_[run]);
        if (r < 0x20 || r >= 0x80 || r == '"' || r == '\\')
          break;
        ++run;
      }
      if (run > pos_) {
        out.append(text_.data() + pos_, run - pos_);
        pos_ = run;
        continue;
      }
      size_t length = utf8SequenceLength(
          reinterpret_cast<const unsigned char *>(text_.data()) + pos_,
          text_.size() - pos_);
      if (length == 0)
        fail("invalid UTF-8 in a string");
      out.append(text_.data() + pos_, length);
      pos_ += length;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// Splits an integer literal into sign and digits; false for fractions,
// exponents and non-numbers.
bool integerDigits(const JsonValue &value, bool &negative,
                   std::string_view &digits) {
  if (value.kind != JsonValue::Kind::Number)
    return false;
  std::string_view text = value.text;
  negative = !text.empty() && text[0] == '-';
  digits = negative ? text.substr(1) : text;
  for (char c : digits)
    if (c < '0' || c > '9')
      return false;
  return !digits.empty();
}

// Magnitude of a digit string, nullopt if it exceeds `limit`.
std::optional<uint64_t> magnitude(std::string_view digits, uint64_t limit) {
  uint64_t result = 0;
  for (char c : digits) {
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (result > (limit - digit) / 10)
      return std::nullopt;
    result = result * 10 + digit;
  }
  return result;
}

} // namespace

JsonParseError::JsonParseError(size_t offset, const std::string &reason)
    : std::runtime_error(fmt::format("at byte {}: {}", offset, reason)),
      offset_(offset), reason_(reason) {}

std::optional<int64_t> JsonValue::asInt64() const {
  bool negative;
  std::string_view digits;
  if (!integerDigits(*this, negative, digits))
    return std::nullopt;
  uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) +
                   (negative ? 1 : 0);
  std::optional<uint64_t> value = magnitude(digits, limit);
  if (!value)
    return std::nullopt;
  // Negating in unsigned arithmetic avoids overflow for INT64_MIN.
  return negative ? static_cast<int64_t>(0 - *value)
                  : static_cast<int64_t>(*value);
}

std::optional<uint64_t> JsonValue::asUInt64() const {
  bool negative;
  std::string_view digits;
  if (!integerDigits(*this, negative, digits))
    return std::nullopt;
  std::optional<uint64_t> value =
      magnitude(digits, std::numeric_limits<uint64_t>::max());
  if (!value || (negative && *value != 0))
    return std::nullopt;
  return value;
}

const char *jsonKindName(JsonValue::Kind kind) {
  switch (kind) {
  case JsonValue::Kind::Null:
    return "null";
  case JsonValue::Kind::Bool:
    return "boolean";
  case JsonValue::Kind::Number:
    return "number";
  case JsonValue::Kind::String:
    return "string";
  case JsonValue::Kind::Array:
    return "array";
  case JsonValue::Kind::Object:
    return "object";
  }
  return "unknown";
}

JsonValue parseJson(std::string_view text) {
  return Parser(text).parseDocument();
}

} // namespace stringrt::detail

namespace stringrt {

bool isValidUtf8(std::string_view text) {
  const auto *bytes = reinterpret_cast<const unsigned char *>(text.data());
  for (size_t i = 0; i < text.size();) {
    size_t length = detail::utf8SequenceLength(bytes + i, text.size() - i);
    if (length == 0)
      return false;
    i += length;
  }
  return true;
}

void appendJsonString(std::string &out, std::string_view text) {
  out += '"';
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20)
        out += fmt::format("\\u{:04x}", c);
      else
        out += ch;
    }
  }
  out += '"';
}

} // namespace stringrt

namespace stringrt::detail {

std::string quoteForMessage(std::string_view text) {
  constexpr size_t kMaxShown = 80;
  const auto *bytes = reinterpret_cast<const unsigned char *>(text.data());
  // Valid UTF-8 runs are kept (and JSON-escaped); stray bytes are shown as
  // \xNN.
  std::string body;
  size_t i = 0;
  while (i < text.size() && i < kMaxShown) {
    size_t length = utf8SequenceLength(bytes + i, text.size() - i);
    if (length == 0) {
      body += fmt::format("\\x{:02X}", bytes[i]);
      ++i;
      continue;
    }
    std::string escaped;
    appendJsonString(escaped, text.substr(i, length));
    body += escaped.substr(1, escaped.size() - 2);
    i += length;
  }
  if (i < text.size())
    body += "...";
  return "\"" + body + "\"";
}

} // namespace stringrt::detail
