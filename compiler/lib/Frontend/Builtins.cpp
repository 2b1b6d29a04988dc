//===- Builtins.cpp - the built-in table and argument binding -------------===//

#include "Builtins.h"

#include <fmt/format.h>

#include <algorithm>

namespace stringc::sema {

namespace {
const std::vector<Builtin> &table() {
  static const std::vector<Builtin> builtins = [] {
    std::vector<Builtin> all;
    addLayerBuiltins(all);
    addPositionBuiltins(all);
    addRotationBuiltins(all);
    addAttentionBuiltins(all);
    addConstantBuiltins(all);
    return all;
  }();
  return builtins;
}

std::string joinNames(const std::vector<ArgSpec> &specs) {
  std::string out;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i > 0)
      out += i + 1 == specs.size() ? " or " : ", ";
    out += specs[i].name;
  }
  return out;
}

/// Reads mask = none | causal | skip(n) from the syntax.
bool evalMask(Analyzer &a, const ast::Expr &expr, std::string_view function, MaskValue &mask) {
  if (const auto *name = expr.as<ast::NameExpr>()) {
    if (name->name == "none" || name->name == "causal") {
      mask.kind = name->name;
      return true;
    }
  }
  if (const auto *call = expr.as<ast::CallExpr>()) {
    if (call->callee == "skip") {
      if (call->args.size() != 1 || call->args[0].isKeyword()) {
        a.fail(call->range, fmt::format("{}: skip takes one number, the offset of the first head "
                                        "(e.g. mask = skip(layer + 1))",
                                        function));
        return false;
      }
      Value n = a.eval(*call->args[0].value);
      if (n.isPoison())
        return false;
      if (n.kind != Value::Kind::Int) {
        a.fail(call->args[0].value->range,
               fmt::format("{}: skip(n) needs an integer n, found {}", function, describeValue(n)));
        return false;
      }
      if (n.intValue < 0) {
        a.fail(call->args[0].value->range,
               fmt::format("{}: skip(n) needs n >= 0, found {}", function, n.intValue));
        return false;
      }
      mask.kind = "skip";
      mask.skipBase = n.intValue;
      return true;
    }
  }
  a.fail(expr.range, fmt::format("{}: mask must be none, causal or skip(n)", function));
  return false;
}

/// Checks that `value` suits `spec`; reports and returns false otherwise.
bool checkKind(Analyzer &a, const CallArgs &args, size_t i) {
  const ArgSpec &spec = args.specs[i];
  const Value &value = args.values[i];
  SourceRange range = args.exprs[i]->range;
  auto wrong = [&](const char *expected) {
    a.fail(range, fmt::format("{}: argument '{}' must be {}, found {}", args.function, spec.name,
                              expected, describeValue(value)));
    return false;
  };
  switch (spec.kind) {
  case ArgKind::Tensor:
    if (!value.isTensor())
      return wrong("a tensor");
    if (value.type.dtype != DType::F32)
      return wrong("an f32 tensor");
    return true;
  case ArgKind::IntTensor:
    if (!value.isTensor())
      return wrong("a tensor");
    if (value.type.dtype != DType::I32)
      return wrong("an i32 tensor");
    return true;
  case ArgKind::Int:
    return value.kind == Value::Kind::Int ? true : wrong("a compile-time integer");
  case ArgKind::Float:
    return value.isNumber() ? true : wrong("a compile-time number");
  case ArgKind::String:
    return value.kind == Value::Kind::String ? true : wrong("a string");
  case ArgKind::Mask:
    return true;
  }
  return true;
}

/// Edit distance counting a swap of adjacent letters as one edit (optimal
/// string alignment), for suggestions: "gleu" is one edit from "gelu".
size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}
} // namespace

SourceRange CallArgs::range(size_t i) const { return exprs[i] ? ranges[i] : call.calleeRange; }

std::string CallArgs::label(size_t i) const {
  std::string role = specs[i].role ? specs[i].role : specs[i].name;
  if (exprs[i])
    if (const auto *name = exprs[i]->as<ast::NameExpr>())
      return fmt::format("{} '{}'", role, name->name);
  return role;
}

std::optional<CallArgs> bindArguments(Analyzer &a, const ast::CallExpr &call, std::string_view function,
                                      const std::vector<ArgSpec> &specs) {
  CallArgs args(call, function, specs);
  bool ok = true;
  size_t nextPositional = 0;
  for (const ast::Argument &arg : call.args) {
    size_t index = specs.size();
    if (arg.isKeyword()) {
      for (size_t i = 0; i < specs.size(); ++i)
        if (arg.name == specs[i].name)
          index = i;
      if (index == specs.size()) {
        a.fail(arg.nameRange, fmt::format("{}: unknown argument '{}' (expected {})", function, arg.name,
                                          joinNames(specs)));
        ok = false;
        continue;
      }
    } else {
      if (nextPositional < specs.size() && !specs[nextPositional].positional) {
        a.fail(arg.value->range, fmt::format("{}: too many positional arguments; '{}' must be given by "
                                             "name ({} = ...)",
                                             function, specs[nextPositional].name,
                                             specs[nextPositional].name));
        ok = false;
        continue;
      }
      if (nextPositional >= specs.size()) {
        a.fail(arg.value->range, fmt::format("{}: too many arguments (it takes {}: {})", function,
                                             specs.size(), joinNames(specs)));
        ok = false;
        continue;
      }
      index = nextPositional++;
    }
    if (args.exprs[index]) {
      a.fail(arg.range(), fmt::format("{}: argument '{}' is given twice", function, specs[index].name));
      ok = false;
      continue;
    }
    args.exprs[index] = arg.value.get();
    args.ranges[index] = arg.range();
  }
  // Evaluate every argument, even after an error, to report all of them.
  bool poisoned = false;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!args.exprs[i])
      continue;
    if (specs[i].kind == ArgKind::Mask) {
      if (!evalMask(a, *args.exprs[i], function, args.mask))
        poisoned = true;
      continue;
    }
    args.values[i] = a.eval(*args.exprs[i]);
    if (args.values[i].isPoison())
      poisoned = true;
    else if (!checkKind(a, args, i))
      ok = false;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!args.exprs[i] && specs[i].required) {
      a.fail(call.range, fmt::format("{}: missing argument '{}'", function, specs[i].name));
      ok = false;
    }
  }
  if (!ok || poisoned)
    return std::nullopt;
  return args;
}

const Builtin *findBuiltin(std::string_view name) {
  for (const Builtin &builtin : table())
    if (name == builtin.name)
      return &builtin;
  return nullptr;
}

std::vector<std::string> builtinNames() {
  std::vector<std::string> names;
  for (const Builtin &builtin : table())
    names.emplace_back(builtin.name);
  return names;
}

bool requireRank(Analyzer &a, const CallArgs &args, size_t i, size_t rank, const char *layout) {
  if (args.type(i).rank() == rank)
    return true;
  a.fail(args.range(i), fmt::format("{}: {} must be {} (rank {}), found {}", args.function, args.label(i),
                                    layout, rank, formatType(args.type(i))));
  return false;
}

bool requireMinRank(Analyzer &a, const CallArgs &args, size_t i, size_t rank, const char *layout) {
  if (args.type(i).rank() >= rank)
    return true;
  a.fail(args.range(i), fmt::format("{}: {} must be {} (rank {} or more), found {}", args.function,
                                    args.label(i), layout, rank, formatType(args.type(i))));
  return false;
}

bool requireStatic(Analyzer &a, const CallArgs &args, size_t i) {
  if (!args.type(i).hasBatch())
    return true;
  a.fail(args.range(i), fmt::format("{}: {} must not have the batch dimension B, found {}", args.function,
                                    args.label(i), formatType(args.type(i))));
  return false;
}

bool requireShape(Analyzer &a, const CallArgs &args, size_t i, const std::vector<int64_t> &dims,
                  const std::string &why) {
  if (args.dims(i) == dims)
    return true;
  a.fail(args.range(i), fmt::format("{}: {} must be {}{}, found {}", args.function, args.label(i),
                                    formatShape(dims), why.empty() ? "" : " (" + why + ")",
                                    formatShape(args.dims(i))));
  return false;
}

bool requirePositive(Analyzer &a, const CallArgs &args, size_t i) {
  if (!args.has(i) || args[i].number() > 0)
    return true;
  a.fail(args.range(i), fmt::format("{}: {} must be positive, found {}", args.function, args.specs[i].name,
                                    formatNumber(args[i])));
  return false;
}

std::string suggestName(const std::string &name, const std::vector<std::string> &candidates) {
  // One-letter names are too short for a typo to be recognizable.
  if (name.size() < 2)
    return "";
  std::string best;
  size_t bestDistance = name.size() <= 4 ? 1 : 2;
  for (const std::string &candidate : candidates) {
    size_t distance = editDistance(name, candidate);
    if (distance <= bestDistance && (best.empty() || distance < bestDistance || candidate < best)) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

} // namespace stringc::sema
