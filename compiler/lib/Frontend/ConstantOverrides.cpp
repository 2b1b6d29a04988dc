//===- ConstantOverrides.cpp - parsing stringc -D NAME=VALUE --------------===//

#include "stringc/Frontend/ConstantOverrides.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace stringc {

namespace {
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

/// Skips the digits from `at`; returns how many there were.
size_t digits(const std::string &text, size_t &at) {
  size_t start = at;
  while (at < text.size() && isDigit(text[at]))
    ++at;
  return at - start;
}
} // namespace

std::optional<ConstantOverride> parseConstantOverride(const std::string &arg, std::string &error) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos) {
    error = fmt::format("-D needs NAME=VALUE, got '{}'", arg);
    return std::nullopt;
  }
  ConstantOverride result;
  result.name = arg.substr(0, eq);
  result.text = arg.substr(eq + 1);
  bool identifier = !result.name.empty() && isIdentStart(result.name[0]);
  for (char c : result.name)
    identifier = identifier && (isIdentStart(c) || isDigit(c));
  if (!identifier) {
    error = fmt::format("-D {}: '{}' is not a constant's name (letters, digits and _, not "
                        "starting with a digit)",
                        arg, result.name);
    return std::nullopt;
  }
  // The lexer's number syntax (docs/language.md): digits, then optionally
  // '.' and digits, then optionally an exponent; a leading '-' negates.
  const std::string &text = result.text;
  size_t at = text.size() > 0 && text[0] == '-' ? 1 : 0;
  bool ok = digits(text, at) > 0;
  if (ok && at < text.size() && text[at] == '.') {
    ++at;
    result.isFloat = true;
    ok = digits(text, at) > 0;
  }
  if (ok && at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    if (at < text.size() && (text[at] == '+' || text[at] == '-'))
      ++at;
    result.isFloat = true;
    ok = digits(text, at) > 0;
  }
  if (!ok || at != text.size()) {
    error = fmt::format("-D {}: the value must be a number such as 64, -2, 0.02 or 1e-3, got '{}'",
                        arg, text);
    return std::nullopt;
  }
  errno = 0;
  if (result.isFloat) {
    result.floatValue = std::strtod(text.c_str(), nullptr);
    if (errno == ERANGE && std::isinf(result.floatValue)) {
      error = fmt::format("-D {}: the number is out of range", arg);
      return std::nullopt;
    }
  } else {
    result.intValue = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE) {
      error = fmt::format("-D {}: the integer is too large (the largest is {})", arg, INT64_MAX);
      return std::nullopt;
    }
  }
  return result;
}

} // namespace stringc
