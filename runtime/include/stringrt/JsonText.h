// Writing JSON text: validating and escaping strings, one way for every
// writer (the package format's, runtime/src/core/format/JsonWriter.h; checkpoint
// metadata) and for the compiler's checks of what a package can hold.
#pragma once

#include <string>
#include <string_view>

namespace stringrt {

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool isValidUtf8(std::string_view text);

// Appends `text` (valid UTF-8) as a JSON string literal, quotes included.
void appendJsonString(std::string &out, std::string_view text);

} // namespace stringrt
