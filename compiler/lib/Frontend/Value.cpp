//===- Value.cpp ----------------------------------------------------------===//

#include "Value.h"

#include <fmt/format.h>

namespace stringc::sema {

std::string formatNumber(const Value &value) {
  if (value.kind == Value::Kind::Int)
    return std::to_string(value.intValue);
  return fmt::format("{}", value.floatValue);
}

std::string describeValue(const Value &value) {
  switch (value.kind) {
  case Value::Kind::Poison: return "an invalid value";
  case Value::Kind::Int: return fmt::format("the integer {}", value.intValue);
  case Value::Kind::Float: return fmt::format("the number {}", formatNumber(value));
  case Value::Kind::String: return fmt::format("the string \"{}\"", value.text);
  case Value::Kind::Tensor: return fmt::format("a tensor {}", formatType(value.type));
  }
  return "a value";
}

} // namespace stringc::sema
