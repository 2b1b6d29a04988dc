// Writing JSON text: the two pieces both the runtime (manifests, checkpoint
// metadata) and the compiler's package writer need, so that a string is
// validated and escaped one way on both sides of the package format.
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
