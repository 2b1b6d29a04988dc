// A small strict JSON (RFC 8259) parser and string writer for file headers the
// runtime reads and writes (safetensors). Private to the runtime.
#pragma once

#include "stringrt/JsonText.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace stringrt::detail {

struct JsonMember;

// A parsed JSON value. Numbers keep their source text so that integers beyond
// 2^53 (byte offsets in large files) stay exact.
struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text;                // String: decoded UTF-8. Number: as written.
  std::vector<JsonValue> elements; // Array.
  std::vector<JsonMember> members; // Object, in source order, duplicates kept.
  size_t offset = 0;               // Where the value starts in the source.

  // The exact value of a Number written as an integer (no fraction or
  // exponent) that fits the type; nullopt for anything else.
  std::optional<int64_t> asInt64() const;
  std::optional<uint64_t> asUInt64() const;
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

// "null", "boolean", "number", "string", "array", "object".
const char *jsonKindName(JsonValue::Kind kind);

class JsonParseError : public std::runtime_error {
public:
  JsonParseError(size_t offset, const std::string &reason);
  size_t offset() const { return offset_; }
  const std::string &reason() const { return reason_; }

private:
  size_t offset_;
  std::string reason_;
};

// Objects and arrays may nest this deep; deeper input is rejected rather than
// risking the stack.
constexpr int kMaxJsonDepth = 64;

// Parses exactly one JSON value surrounded by optional whitespace. Strings must
// be valid UTF-8 (lone surrogate escapes are rejected too). Throws
// JsonParseError, whose message says at which byte and what is wrong.
JsonValue parseJson(std::string_view text);

using stringrt::appendJsonString;
using stringrt::isValidUtf8;

// `text` as a JSON string literal for an error message: escaped so control
// characters cannot garble the message, and shortened if very long.
std::string quoteForMessage(std::string_view text);

} // namespace stringrt::detail
