//===- Builtins.h - signatures and argument binding of built-ins -*- C++ -*-===//
//
// A built-in is a name, a signature (ArgSpec list) and a function that checks
// shapes and emits the op. bindArguments matches a call's positional and
// keyword arguments to the signature, evaluates them and checks their kinds,
// so a built-in's function only deals with shapes and values.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_LIB_FRONTEND_BUILTINS_H
#define STRINGC_LIB_FRONTEND_BUILTINS_H

#include "AnalyzerState.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stringc::sema {

enum class ArgKind {
  Tensor,    // an f32 tensor
  IntTensor, // an i32 tensor (token ids, labels)
  Int,       // a compile-time integer
  Float,     // a compile-time number (integers are accepted)
  String,
  Mask,      // none | causal | skip(n), read from the syntax
};

struct ArgSpec {
  const char *name;
  ArgKind kind;
  bool required = true;
  /// Tensors may be passed by position; numbers are keyword-only unless this
  /// says otherwise (constant(0.5), load("f", "t"), pairs(n)).
  bool positional = true;
  /// What the argument is, for messages: "weight" in "weight 'w1'".
  const char *role = nullptr;
};

inline ArgSpec tensorArg(const char *name, const char *role, bool required = true) {
  return ArgSpec{name, ArgKind::Tensor, required, true, role};
}
inline ArgSpec intTensorArg(const char *name, const char *role) {
  return ArgSpec{name, ArgKind::IntTensor, true, true, role};
}
inline ArgSpec intArg(const char *name, bool required = false) {
  return ArgSpec{name, ArgKind::Int, required, false, name};
}
inline ArgSpec floatArg(const char *name, bool required = false) {
  return ArgSpec{name, ArgKind::Float, required, false, name};
}

/// The ODS default of an op's DefaultValuedAttr (from the generated op
/// schema), for a built-in argument the call leaves out: the language and
/// the dialect share one default. `attr` must have one.
inline double odsDefault(OpCode code, std::string_view attr) {
  return *stringrt::opSchema(code).findAttr(attr)->defaultValue;
}

/// mask = none | causal | skip(n)
struct MaskValue {
  std::string kind = "none";
  int64_t skipBase = 0;
};

/// The arguments of one call, in signature order.
class CallArgs {
public:
  CallArgs(const ast::CallExpr &call, std::string_view function, const std::vector<ArgSpec> &specs)
      : call(call), function(function), specs(specs), values(specs.size()), exprs(specs.size()) {}

  bool has(size_t i) const { return exprs[i] != nullptr; }
  const Value &operator[](size_t i) const { return values[i]; }
  const TensorType &type(size_t i) const { return values[i].type; }
  const std::vector<int64_t> &dims(size_t i) const { return values[i].type.dims; }
  int id(size_t i) const { return values[i].id; }
  int64_t intOr(size_t i, int64_t fallback) const { return has(i) ? values[i].intValue : fallback; }
  double floatOr(size_t i, double fallback) const { return has(i) ? values[i].number() : fallback; }
  /// The argument's source (name = value for keywords), or the callee's
  /// name when the argument was not given.
  SourceRange range(size_t i) const;
  /// "weight 'w1'" when the argument is a plain name, else "weight".
  std::string label(size_t i) const;

  const ast::CallExpr &call;
  std::string_view function;
  const std::vector<ArgSpec> &specs;
  std::vector<Value> values;
  std::vector<const ast::Expr *> exprs;
  std::vector<SourceRange> ranges = std::vector<SourceRange>(specs.size());
  MaskValue mask;
};

/// Binds and evaluates the arguments of `call` against `specs`. Returns
/// nullopt after reporting an error, or silently when an argument is poison.
std::optional<CallArgs> bindArguments(Analyzer &analyzer, const ast::CallExpr &call,
                                      std::string_view function, const std::vector<ArgSpec> &specs);

using BuiltinFn = Value (*)(Analyzer &, CallArgs &);

struct Builtin {
  const char *name;
  std::vector<ArgSpec> args;
  BuiltinFn fn;
};

/// The built-in function `name`, or nullptr.
const Builtin *findBuiltin(std::string_view name);
std::vector<std::string> builtinNames();

// Each family adds its built-ins to the table.
void addLayerBuiltins(std::vector<Builtin> &table);      // BuiltinsLayers.cpp
void addPositionBuiltins(std::vector<Builtin> &table);   // BuiltinsPositions.cpp
void addRotationBuiltins(std::vector<Builtin> &table);   // BuiltinsRotations.cpp
void addAttentionBuiltins(std::vector<Builtin> &table);  // BuiltinsAttention.cpp
void addConstantBuiltins(std::vector<Builtin> &table);   // BuiltinsConstants.cpp

//===--- shape checks shared by the built-ins -----------------------------===//

/// Checks that argument `i` has rank `rank`; `layout` names the expected
/// shape in the message ("[B, T, D]").
bool requireRank(Analyzer &a, const CallArgs &args, size_t i, size_t rank, const char *layout);
/// Checks that argument `i` has rank >= `rank`.
bool requireMinRank(Analyzer &a, const CallArgs &args, size_t i, size_t rank, const char *layout);
/// Checks that argument `i` has no batch dimension (weights, positions, ...).
bool requireStatic(Analyzer &a, const CallArgs &args, size_t i);
/// Checks that argument `i` has exactly the shape `dims`.
bool requireShape(Analyzer &a, const CallArgs &args, size_t i, const std::vector<int64_t> &dims,
                  const std::string &why);
/// Checks that number argument `i`, when given, is > 0.
bool requirePositive(Analyzer &a, const CallArgs &args, size_t i);

/// The names of similar candidates, for "did you mean 'x'?" (empty if none).
std::string suggestName(const std::string &name, const std::vector<std::string> &candidates);

} // namespace stringc::sema

#endif // STRINGC_LIB_FRONTEND_BUILTINS_H
