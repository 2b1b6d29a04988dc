//===- ConstantOverrides.h - stringc -D NAME=VALUE --------------*- C++ -*-===//
//
// `stringc MODEL.pe -D image=40` replaces the value of the top-level
// `const image = ...` with 40 while the model is analysed: the constants
// computed from it follow, and every check the file's own value would go
// through applies to the new one (an error it causes carries a note at the
// constant's line). A name that is no top-level constant is an error.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_FRONTEND_CONSTANTOVERRIDES_H
#define STRINGC_FRONTEND_CONSTANTOVERRIDES_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stringc {

struct ConstantOverride {
  std::string name;
  std::string text; // the value as given, for messages
  bool isFloat = false;
  int64_t intValue = 0;
  double floatValue = 0;
};

/// Parses "NAME=VALUE": NAME an identifier, VALUE a number as the .pe
/// language writes one (`64`, `0.02`, `1e-3`), optionally negative. An
/// integer is an int constant, a number with `.` or an exponent a float one.
/// nullopt and `error` set when it is malformed.
std::optional<ConstantOverride> parseConstantOverride(const std::string &arg, std::string &error);

} // namespace stringc

#endif // STRINGC_FRONTEND_CONSTANTOVERRIDES_H
