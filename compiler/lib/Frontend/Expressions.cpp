//===- Expressions.cpp - evaluating expressions and instantiating blocks --===//

#include "AnalyzerState.h"
#include "Builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace stringc::sema {

using namespace ast;

namespace {
/// Names that mean something only in one statement, for a better message
/// than "unknown function".
const char *contextOnlyName(const std::string &name) {
  for (const char *init : {"normal", "uniform", "zeros", "ones", "constant", "load"})
    if (name == init)
      return "an initializer; it is only allowed after '=' in a 'param' declaration";
  for (const char *opt : {"adamw", "sgd"})
    if (name == opt)
      return "an optimizer; it is only allowed in an 'optimizer' statement";
  for (const char *sched : {"warmup_cosine"})
    if (name == sched)
      return "a schedule; it is only allowed in a 'schedule' statement";
  for (const char *data : {"idx", "text"})
    if (name == data)
      return "a data source; it is only allowed in a 'data' statement";
  if (name == "skip")
    return "an attention mask; it is only allowed as attention(..., mask = skip(n))";
  return nullptr;
}

const char *verbFor(char op) {
  switch (op) {
  case '+': return "add";
  case '-': return "subtract";
  case '*': return "multiply";
  default: return "divide";
  }
}

bool isSuffix(const std::vector<int64_t> &shorter, const std::vector<int64_t> &longer) {
  if (shorter.size() > longer.size())
    return false;
  return std::equal(shorter.begin(), shorter.end(), longer.end() - shorter.size());
}
} // namespace

Value Analyzer::eval(const Expr &expr) {
  switch (expr.kind) {
  case Expr::Kind::Number: {
    const auto &number = *expr.as<NumberExpr>();
    return number.isInteger ? Value::integer(number.intValue) : Value::real(number.floatValue);
  }
  case Expr::Kind::String: return Value::string(expr.as<StringExpr>()->value);
  case Expr::Kind::Name: return evalName(*expr.as<NameExpr>());
  case Expr::Kind::Call: return evalCall(*expr.as<CallExpr>());
  case Expr::Kind::Unary: return evalUnary(*expr.as<UnaryExpr>());
  case Expr::Kind::Binary: return evalBinary(*expr.as<BinaryExpr>());
  }
  return Value::poison();
}

Value Analyzer::evalName(const NameExpr &expr) {
  const Binding *hidden = nullptr;
  if (const Binding *binding = lookup(expr.name, &hidden)) {
    if (binding->kind == Binding::Kind::Block)
      return fail(expr.range, fmt::format("'{}' is a block; call it as {}(...)", expr.name, expr.name));
    return binding->value;
  }
  if (expr.name == "B")
    return fail(expr.range, "'B' (the batch dimension) may only appear as the first dimension of an "
                            "input's type");
  if (hidden)
    return fail(expr.range, fmt::format("'{}' is {} of the top level, which blocks cannot see (blocks see "
                                        "constants, parameters and inputs); pass it as an argument",
                                        expr.name, bindingKindName(hidden->kind)));
  if (findBuiltin(expr.name))
    return fail(expr.range, fmt::format("'{}' is a built-in function; call it as {}(...)", expr.name,
                                        expr.name));
  std::string message = fmt::format("unknown name '{}'", expr.name);
  std::string suggestion = suggestName(expr.name, visibleNames());
  if (!suggestion.empty())
    message += fmt::format("; did you mean '{}'?", suggestion);
  return fail(expr.range, message);
}

Value Analyzer::evalUnary(const UnaryExpr &expr) {
  Value operand = eval(*expr.operand);
  switch (operand.kind) {
  case Value::Kind::Poison: return operand;
  case Value::Kind::Int:
    if (operand.intValue == INT64_MIN)
      return fail(expr.range, "integer overflow in '-'");
    return Value::integer(-operand.intValue);
  case Value::Kind::Float: return Value::real(-operand.floatValue);
  case Value::Kind::String: return fail(expr.opRange, "cannot negate a string");
  case Value::Kind::Tensor:
    if (operand.type.dtype != DType::F32)
      return fail(expr.opRange, fmt::format("cannot negate an {} tensor", dtypeName(operand.type.dtype)));
    return emit(OpCode::Scale, {operand.id}, {{"factor", -1.0}, {"bias", 0.0}}, operand.type, expr.range);
  }
  return Value::poison();
}

Value Analyzer::evalBinary(const BinaryExpr &expr) {
  Value lhs = eval(*expr.lhs);
  Value rhs = eval(*expr.rhs);
  if (lhs.isPoison() || rhs.isPoison())
    return Value::poison();
  if (lhs.kind == Value::Kind::String || rhs.kind == Value::Kind::String)
    return fail(expr.opRange, fmt::format("cannot apply '{}' to a string", expr.op));
  if (lhs.isNumber() && rhs.isNumber())
    return evalNumbers(expr, lhs, rhs);
  return evalTensors(expr, lhs, rhs);
}

Value Analyzer::evalNumbers(const BinaryExpr &expr, const Value &lhs, const Value &rhs) {
  if (lhs.kind == Value::Kind::Int && rhs.kind == Value::Kind::Int) {
    int64_t a = lhs.intValue, b = rhs.intValue, result = 0;
    bool overflow = false;
    switch (expr.op) {
    case '+': overflow = __builtin_add_overflow(a, b, &result); break;
    case '-': overflow = __builtin_sub_overflow(a, b, &result); break;
    case '*': overflow = __builtin_mul_overflow(a, b, &result); break;
    case '/':
      if (b == 0)
        return fail(expr.rhs->range, "division by zero");
      if (a == INT64_MIN && b == -1)
        overflow = true;
      // Floor division, as Python's //: -7 / 2 is -4.
      result = a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
      break;
    }
    if (overflow)
      return fail(expr.opRange, fmt::format("integer overflow in {} {} {}", a, expr.op, b));
    return Value::integer(result);
  }
  double a = lhs.number(), b = rhs.number(), result = 0;
  switch (expr.op) {
  case '+': result = a + b; break;
  case '-': result = a - b; break;
  case '*': result = a * b; break;
  case '/':
    if (b == 0)
      return fail(expr.rhs->range, "division by zero");
    result = a / b;
    break;
  }
  if (!std::isfinite(result))
    return fail(expr.opRange, fmt::format("the result of {} {} {} is out of range", formatNumber(lhs),
                                          expr.op, formatNumber(rhs)));
  return Value::real(result);
}

Value Analyzer::evalTensors(const BinaryExpr &expr, const Value &lhs, const Value &rhs) {
  for (const Value *side : {&lhs, &rhs})
    if (side->isTensor() && side->type.dtype != DType::F32)
      return fail(side == &lhs ? expr.lhs->range : expr.rhs->range,
                  fmt::format("cannot {} {} tensors: arithmetic needs f32 (token ids and labels are "
                              "only for token_embed and cross_entropy)",
                              verbFor(expr.op), dtypeName(side->type.dtype)));
  if (lhs.isTensor() && rhs.isTensor()) {
    if (expr.op == '/')
      return fail(expr.opRange, "cannot divide a tensor by a tensor (only by a number)");
    const TensorType *larger = nullptr;
    if (isSuffix(rhs.type.dims, lhs.type.dims))
      larger = &lhs.type;
    else if (isSuffix(lhs.type.dims, rhs.type.dims))
      larger = &rhs.type;
    if (!larger)
      return fail(expr.opRange, fmt::format("cannot {} {} and {}: one shape must be a trailing part of "
                                            "the other",
                                            verbFor(expr.op), formatType(lhs.type), formatType(rhs.type)));
    OpCode code = expr.op == '+' ? OpCode::Add : expr.op == '-' ? OpCode::Sub : OpCode::Mul;
    return emit(code, {lhs.id, rhs.id}, {}, *larger, expr.range);
  }
  // One tensor and one number: an affine pe.scale (factor * x + bias).
  const Value &tensor = lhs.isTensor() ? lhs : rhs;
  double number = lhs.isTensor() ? rhs.number() : lhs.number();
  bool tensorFirst = lhs.isTensor();
  double factor = 1.0, bias = 0.0;
  switch (expr.op) {
  case '+': bias = number; break;
  case '-':
    if (tensorFirst) {
      bias = -number;
    } else {
      factor = -1.0;
      bias = number;
    }
    break;
  case '*': factor = number; break;
  case '/':
    if (!tensorFirst)
      return fail(expr.opRange, "cannot divide a number by a tensor");
    if (number == 0)
      return fail(expr.rhs->range, "division by zero");
    factor = 1.0 / number;
    break;
  }
  // `x * 1` and `x / 1` are x, bit for bit: no op, so that a constant that
  // defaults to 1 (an example's position_scale) leaves the package as it was.
  if ((expr.op == '*' || expr.op == '/') && factor == 1.0)
    return tensor;
  return emit(OpCode::Scale, {tensor.id}, {{"factor", factor}, {"bias", bias}}, tensor.type, expr.range);
}

Value Analyzer::evalCall(const CallExpr &expr) {
  if (const Binding *binding = lookup(expr.callee); binding && binding->kind == Binding::Kind::Block) {
    if (!binding->block) {
      // The block's definition was invalid (already reported); still
      // evaluate the arguments for their own errors.
      for (const Argument &arg : expr.args)
        eval(*arg.value);
      return Value::poison();
    }
    return instantiate(*binding->block, expr);
  }
  if (const Builtin *builtin = findBuiltin(expr.callee)) {
    std::optional<CallArgs> args = bindArguments(*this, expr, builtin->name, builtin->args);
    if (!args)
      return Value::poison();
    return builtin->fn(*this, *args);
  }
  if (const char *what = contextOnlyName(expr.callee))
    return fail(expr.calleeRange, fmt::format("'{}' is {}", expr.callee, what));
  std::vector<std::string> candidates = builtinNames();
  for (const auto &[name, binding] : global().names)
    if (binding.kind == Binding::Kind::Block)
      candidates.push_back(name);
  std::string message = fmt::format("unknown function '{}'", expr.callee);
  std::string suggestion = suggestName(expr.callee, candidates);
  if (!suggestion.empty())
    message += fmt::format("; did you mean '{}'?", suggestion);
  return fail(expr.calleeRange, message);
}

Value Analyzer::instantiate(const BlockStmt &block, const CallExpr &call) {
  const std::string &name = block.name.name;
  if (instantiating_.size() >= kMaxBlockDepth)
    return fail(call.calleeRange, fmt::format("blocks are used {} deep here (block '{}' used by '{}', "
                                              "used by ...); at most {} levels of blocks using blocks",
                                              instantiating_.size() + 1, name,
                                              instantiating_.back()->name.name, kMaxBlockDepth));
  for (size_t i = 0; i < instantiating_.size(); ++i) {
    if (instantiating_[i] != &block)
      continue;
    std::string cycle;
    for (size_t j = i; j < instantiating_.size(); ++j)
      cycle += instantiating_[j]->name.name + " -> ";
    return fail(call.calleeRange, fmt::format("block '{}' is used recursively ({}{}); blocks cannot call "
                                              "themselves",
                                              name, cycle, name));
  }
  // Match the arguments to the block's parameters, then evaluate them here,
  // in the caller's scope.
  std::vector<const Expr *> bound(block.params.size(), nullptr);
  bool ok = true;
  size_t nextPositional = 0;
  for (const Argument &arg : call.args) {
    size_t index = block.params.size();
    if (arg.isKeyword()) {
      for (size_t i = 0; i < block.params.size(); ++i)
        if (block.params[i].name == arg.name)
          index = i;
      if (index == block.params.size()) {
        fail(arg.nameRange, fmt::format("block '{}' has no argument named '{}'", name, arg.name));
        ok = false;
        continue;
      }
    } else if (nextPositional >= block.params.size()) {
      fail(arg.value->range, fmt::format("block '{}' takes {} argument{}, found {}", name,
                                         block.params.size(), block.params.size() == 1 ? "" : "s",
                                         call.args.size()));
      ok = false;
      break;
    } else {
      index = nextPositional++;
    }
    if (bound[index]) {
      fail(arg.range(), fmt::format("block '{}': argument '{}' is given twice", name,
                                    block.params[index].name));
      ok = false;
      continue;
    }
    bound[index] = arg.value.get();
  }
  for (size_t i = 0; i < bound.size(); ++i) {
    if (!bound[i]) {
      fail(call.range, fmt::format("block '{}': missing argument '{}'", name, block.params[i].name));
      ok = false;
    }
  }
  std::vector<Value> args(bound.size());
  for (size_t i = 0; i < bound.size(); ++i)
    if (bound[i])
      args[i] = eval(*bound[i]);
  if (!ok || !step(call.calleeRange))
    return Value::poison();

  int use = current().uses[name]++;
  Scope scope;
  scope.isBlock = true;
  scope.prefix = fmt::format("{}{}.{}.", current().prefix, name, use);
  for (size_t i = 0; i < args.size(); ++i)
    scope.names.emplace(block.params[i].name, Binding{Binding::Kind::Arg, args[i], block.params[i].range});
  scopes_.push_back(std::move(scope));
  instantiating_.push_back(&block);
  callSites_.push_back(sources_.location(call.calleeRange.begin));
  Value result;
  {
    DiagnosticContextGuard context(diags_, call.calleeRange,
                                   fmt::format("in instantiation of block '{}' here", name));
    execAll(block.body);
    if (!stopping())
      result = eval(*block.result);
  }
  callSites_.pop_back();
  instantiating_.pop_back();
  scopes_.pop_back();
  return result;
}

} // namespace stringc::sema
