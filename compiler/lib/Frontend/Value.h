//===- Value.h - compile-time values of the analyzer ------------*- C++ -*-===//
//
// Every expression evaluates to one of these: a compile-time number, a
// string (only meaningful as a file or tensor name), a tensor (a graph value
// id and its type), or poison — the result of an expression that already
// failed, which every consumer passes on without a further error.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_LIB_FRONTEND_VALUE_H
#define STRINGC_LIB_FRONTEND_VALUE_H

#include "stringc/Frontend/Graph.h"

#include <cstdint>
#include <string>

namespace stringc::sema {

struct Value {
  enum class Kind { Poison, Int, Float, String, Tensor };

  Kind kind = Kind::Poison;
  int64_t intValue = 0;
  double floatValue = 0;
  std::string text;
  int id = -1; // graph value id of a tensor
  TensorType type;

  static Value poison() { return Value(); }
  static Value integer(int64_t v) {
    Value value;
    value.kind = Kind::Int;
    value.intValue = v;
    return value;
  }
  static Value real(double v) {
    Value value;
    value.kind = Kind::Float;
    value.floatValue = v;
    return value;
  }
  static Value string(std::string v) {
    Value value;
    value.kind = Kind::String;
    value.text = std::move(v);
    return value;
  }
  static Value tensor(int id, TensorType type) {
    Value value;
    value.kind = Kind::Tensor;
    value.id = id;
    value.type = std::move(type);
    return value;
  }

  bool isPoison() const { return kind == Kind::Poison; }
  bool isNumber() const { return kind == Kind::Int || kind == Kind::Float; }
  bool isTensor() const { return kind == Kind::Tensor; }
  double number() const { return kind == Kind::Int ? static_cast<double>(intValue) : floatValue; }
};

/// "the integer 3", "the number 0.5", "the string \"w.bin\"", "a tensor
/// f32[B, 64]": how a value reads in "expected ..., found ...".
std::string describeValue(const Value &value);

/// A compile-time number as the user would write it: 3, 0.5, 1e-08.
std::string formatNumber(const Value &value);

} // namespace stringc::sema

#endif // STRINGC_LIB_FRONTEND_VALUE_H
