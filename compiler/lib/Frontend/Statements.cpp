//===- Statements.cpp - running the statements of a model -----------------===//

#include "AnalyzerState.h"
#include "Builtins.h"

#include "stringrt/ManifestLimits.h"

#include <fmt/format.h>

#include <algorithm>

namespace stringc::sema {

using namespace ast;

namespace {
/// Each dimension must fit comfortably in int64 arithmetic with the others.
constexpr int64_t kMaxDim = int64_t(1) << 31;

bool isBatchName(const Expr &expr) {
  const auto *name = expr.as<NameExpr>();
  return name && name->name == "B";
}

/// The symbols the compiler defines in the module besides the parameters:
/// @forward (MLIRGen), @gradients (pe-autodiff) and @train_step (kept for
/// the compiled training step).
bool isReservedSymbol(const std::string &name) {
  return name == "forward" || name == "gradients" || name == "train_step";
}
} // namespace

std::optional<ModelGraph> Analyzer::run(const Module &module) {
  if (module.stmts.empty() || module.stmts.front()->kind != Stmt::Kind::Model) {
    SourceRange at = module.stmts.empty() ? SourceRange{0, 0} : module.stmts.front()->keywordRange;
    // An empty module after syntax errors is not worth a second message.
    if (!(module.stmts.empty() && diags_.hasErrors()))
      diags_.error(at, "a model file must start with 'model NAME'");
  }
  overrideUsed_.assign(options_.overrides.size(), false);
  execAll(module.stmts);
  reportUnusedOverrides();
  if (!stopping())
    finish();
  if (diags_.hasErrors() || aborted_)
    return std::nullopt;
  return std::move(graph_);
}

void Analyzer::execAll(const std::vector<StmtPtr> &stmts) {
  for (const StmtPtr &stmt : stmts) {
    if (stopping() || !step(stmt->keywordRange))
      return;
    exec(*stmt);
  }
}

bool Analyzer::step(SourceRange where) {
  if (++steps_ <= kMaxSteps)
    return true;
  if (!aborted_)
    diags_.error(where, fmt::format("the model takes too long to evaluate: more than {} statements and "
                                    "loop iterations run after unrolling loops and instantiating blocks",
                                    kMaxSteps));
  aborted_ = true;
  return false;
}

bool Analyzer::reserveSupportEntries(int64_t count) {
  if (count > kMaxSupportEntries - supportEntries_)
    return false;
  supportEntries_ += count;
  return true;
}

void Analyzer::exec(const Stmt &stmt) {
  switch (stmt.kind) {
  case Stmt::Kind::Model: return execModel(*stmt.as<ModelStmt>());
  case Stmt::Kind::Const: return execConst(*stmt.as<ConstStmt>());
  case Stmt::Kind::Input: return execInput(*stmt.as<InputStmt>());
  case Stmt::Kind::Param: return execParam(*stmt.as<ParamStmt>());
  case Stmt::Kind::Block: return execBlock(*stmt.as<BlockStmt>());
  case Stmt::Kind::Let: return execLet(*stmt.as<LetStmt>());
  case Stmt::Kind::For: return execFor(*stmt.as<ForStmt>());
  case Stmt::Kind::Output: return execOutput(*stmt.as<OutputStmt>());
  case Stmt::Kind::Loss: return execLoss(*stmt.as<LossStmt>());
  case Stmt::Kind::Optimizer: return execOptimizer(*stmt.as<OptimizerStmt>());
  case Stmt::Kind::Schedule: return execSchedule(*stmt.as<ScheduleStmt>());
  case Stmt::Kind::Data: return execData(*stmt.as<DataStmt>());
  }
}

void Analyzer::execModel(const ModelStmt &stmt) {
  if (model_) {
    SourceLoc first = sources_.location(model_->keywordRange.begin);
    diags_.error(stmt.keywordRange, fmt::format("the model is already named '{}' at {}:{}; 'model' "
                                                "must be the first statement and appear once",
                                                model_->name.name, first.line, first.col));
    return;
  }
  model_ = &stmt;
  graph_.modelName = stmt.name.name;
}

void Analyzer::execConst(const ConstStmt &stmt) {
  Value value = stmt.value ? eval(*stmt.value) : Value::poison();
  if (!value.isPoison() && !value.isNumber()) {
    diags_.error(stmt.value->range, fmt::format("constant '{}' must be a compile-time number, found {}",
                                                stmt.name.name, describeValue(value)));
    value = Value::poison();
  }
  if (!current().isBlock)
    value = overriddenConstant(stmt, value);
  if (define(stmt.name, Binding{Binding::Kind::Const, value, stmt.name.range}) && !current().isBlock &&
      value.isNumber()) {
    GraphConstant constant{stmt.name.name, value.intValue};
    if (value.kind == Value::Kind::Float)
      constant.value = value.floatValue;
    graph_.constants.push_back(std::move(constant));
  }
}

Value Analyzer::overriddenConstant(const ConstStmt &stmt, const Value &fileValue) {
  for (size_t i = 0; i < options_.overrides.size(); ++i) {
    const ConstantOverride &given = options_.overrides[i];
    // The first definition takes it; a second one is a redefinition error.
    if (given.name != stmt.name.name || overrideUsed_[i])
      continue;
    overrideUsed_[i] = true;
    // Any error from here on may come from the new value: each one notes it
    // at the constant's line (a context that stays for the rest of the run).
    std::string file = fileValue.isNumber() ? formatNumber(fileValue) : "no valid value";
    diags_.pushContext(stmt.name.range, fmt::format("'{}' is {} here, set by -D {}={} (the file gives {})",
                                                    given.name, given.text, given.name, given.text,
                                                    file));
    return given.isFloat ? Value::real(given.floatValue) : Value::integer(given.intValue);
  }
  return fileValue;
}

void Analyzer::reportUnusedOverrides() {
  if (stopping()) // the constant may lie beyond where analysis stopped
    return;
  std::string constants;
  for (const GraphConstant &constant : graph_.constants)
    constants += (constants.empty() ? "" : ", ") + constant.name;
  SourceRange at = model_ ? model_->name.range : SourceRange{0, 0};
  for (size_t i = 0; i < options_.overrides.size(); ++i) {
    if (overrideUsed_[i])
      continue;
    const ConstantOverride &given = options_.overrides[i];
    diags_.error(at, fmt::format("-D {}={}: model '{}' has no top-level constant '{}' ({})", given.name,
                                 given.text, graph_.modelName, given.name,
                                 constants.empty() ? "it has none"
                                                   : "its constants: " + constants));
  }
}

std::optional<int64_t> Analyzer::evalDim(const Expr &expr, bool isParam) {
  const char *what = isParam ? "parameter" : "input";
  if (isBatchName(expr)) {
    diags_.error(expr.range, isParam ? "parameters have no batch dimension; 'B' may only be the first "
                                       "dimension of an input"
                                     : "the batch dimension 'B' may only be the first dimension of an input");
    return std::nullopt;
  }
  Value value = eval(expr);
  if (value.isPoison())
    return std::nullopt;
  if (value.kind != Value::Kind::Int) {
    diags_.error(expr.range, fmt::format("{} dimensions must be positive integers, found {}", what,
                                         describeValue(value)));
    return std::nullopt;
  }
  if (value.intValue <= 0 || value.intValue >= kMaxDim) {
    diags_.error(expr.range, fmt::format("{} dimensions must be positive integers below 2^31, found {}",
                                         what, value.intValue));
    return std::nullopt;
  }
  return value.intValue;
}

void Analyzer::execInput(const InputStmt &stmt) {
  if (stmt.incomplete) {
    define(stmt.name, Binding{Binding::Kind::Input, Value::poison(), stmt.name.range});
    return;
  }
  TensorType type;
  bool ok = true;
  if (stmt.elementType.name == "f32") {
    type.dtype = DType::F32;
  } else if (stmt.elementType.name == "i32") {
    type.dtype = DType::I32;
  } else {
    diags_.error(stmt.elementType.range,
                 fmt::format("unknown element type '{}' (expected f32 or i32)", stmt.elementType.name));
    ok = false;
  }
  bool batchFirst = !stmt.dims.empty() && isBatchName(*stmt.dims[0]);
  if (batchFirst) {
    type.dims.push_back(kBatchDim);
  } else {
    ok = false;
    const Expr *misplaced = nullptr;
    for (const ExprPtr &dim : stmt.dims)
      if (!misplaced && isBatchName(*dim))
        misplaced = dim.get();
    if (misplaced)
      diags_.error(misplaced->range, fmt::format("the batch dimension 'B' must be the first dimension of "
                                                 "input '{}'",
                                                 stmt.name.name));
    else
      diags_.error(stmt.dims.empty() ? stmt.name.range : stmt.dims[0]->range,
                   fmt::format("input '{}' must have the batch dimension 'B' first (e.g. f32[B, 28, 28])",
                               stmt.name.name));
  }
  for (size_t i = batchFirst ? 1 : 0; i < stmt.dims.size(); ++i) {
    if (!batchFirst && isBatchName(*stmt.dims[i]))
      continue; // reported above
    std::optional<int64_t> dim = evalDim(*stmt.dims[i], /*isParam=*/false);
    ok = ok && dim.has_value();
    type.dims.push_back(dim.value_or(1));
  }
  ok = ok && withinLimits(type, stmt.name.range, fmt::format("input '{}'", stmt.name.name));
  Value value;
  if (ok) {
    int id = static_cast<int>(graph_.values.size());
    graph_.values.push_back(GraphValue{type, static_cast<int>(graph_.inputs.size()), -1});
    graph_.inputs.push_back(GraphInput{stmt.name.name, type, id, sources_.location(stmt.name.range.begin)});
    value = Value::tensor(id, type);
  }
  define(stmt.name, Binding{Binding::Kind::Input, value, stmt.name.range});
}

void Analyzer::execParam(const ParamStmt &stmt) {
  if (stmt.incomplete) {
    define(stmt.name, Binding{Binding::Kind::Param, Value::poison(), stmt.name.range});
    return;
  }
  GraphParam param;
  param.name = current().prefix + stmt.name.name;
  param.frozen = stmt.frozen;
  param.loc = sources_.location(stmt.name.range.begin);
  bool ok = true;
  // A parameter becomes the symbol @NAME of the module, next to the
  // functions the compiler adds.
  if (isReservedSymbol(param.name)) {
    diags_.error(stmt.name.range, fmt::format("parameter name '{}' is reserved (the compiler defines @{})",
                                              param.name, param.name));
    ok = false;
  }
  int64_t elements = 1;
  for (const ExprPtr &dimExpr : stmt.dims) {
    std::optional<int64_t> dim = evalDim(*dimExpr, /*isParam=*/true);
    if (!dim) {
      ok = false;
      continue;
    }
    param.type.dims.push_back(*dim);
    if (elements > stringrt::kMaxParamElements / *dim) {
      diags_.error(stmt.shapeRange, fmt::format("parameter '{}' is too large (more than 2^32 elements)",
                                                stmt.name.name));
      ok = false;
    }
    elements = std::min(elements * *dim, stringrt::kMaxParamElements + 1);
  }
  if (ok && param.type.rank() > stringrt::kMaxRank) {
    diags_.error(stmt.shapeRange, fmt::format("parameter '{}' has rank {}; a package allows at most {} "
                                              "dimensions",
                                              stmt.name.name, param.type.rank(), stringrt::kMaxRank));
    ok = false;
  }
  if (ok && elements > stringrt::kMaxParamElements - paramElements_) {
    diags_.error(stmt.shapeRange, fmt::format("parameter '{}' takes the model's parameters past 2^32 "
                                              "elements in all, the most a package allows",
                                              stmt.name.name));
    ok = false;
  }
  if (ok)
    paramElements_ += elements;
  ok = evalInitializer(*stmt.init, param, ok) && ok;
  Value value;
  if (ok) {
    TensorType type = param.type;
    SourceRange where = stmt.name.range;
    graph_.params.push_back(std::move(param));
    value = emit(OpCode::GetParam, {}, {{"param", graph_.params.back().name}}, type, where);
  }
  define(stmt.name, Binding{Binding::Kind::Param, value, stmt.name.range});
}

void Analyzer::execBlock(const BlockStmt &stmt) {
  bool ok = true;
  std::map<std::string, SourceRange> seen;
  for (const Ident &param : stmt.params) {
    if (param.name == "B") {
      diags_.error(param.range, "'B' is reserved for the batch dimension and cannot be defined");
      ok = false;
    } else if (!seen.emplace(param.name, param.range).second) {
      diags_.error(param.range, fmt::format("block '{}' has two arguments named '{}'", stmt.name.name,
                                            param.name));
      ok = false;
    }
  }
  if (findBuiltin(stmt.name.name)) {
    diags_.error(stmt.name.range,
                 fmt::format("block '{}' has the name of a built-in function", stmt.name.name));
    ok = false;
  }
  // A block with a bad signature is still defined, so calls to it do not
  // report "unknown function"; they evaluate to poison.
  Binding binding{Binding::Kind::Block, Value::poison(), stmt.name.range,
                  ok && stmt.result ? &stmt : nullptr};
  define(stmt.name, binding);
}

void Analyzer::execLet(const LetStmt &stmt) {
  Value value = stmt.value ? eval(*stmt.value) : Value::poison();
  if (stmt.name.name == "B") {
    diags_.error(stmt.name.range, "'B' is reserved for the batch dimension and cannot be defined");
    return;
  }
  auto it = current().names.find(stmt.name.name);
  if (it == current().names.end()) {
    current().names.emplace(stmt.name.name, Binding{Binding::Kind::Let, value, stmt.name.range});
    return;
  }
  Binding &existing = it->second;
  if (existing.kind == Binding::Kind::Let || existing.kind == Binding::Kind::Arg) {
    existing.value = value;
    return;
  }
  diags_.error(stmt.name.range,
               fmt::format("cannot rebind '{}' with 'let': it is {}", stmt.name.name,
                           bindingKindName(existing.kind)),
               {DiagnosticEngine::note(existing.range, fmt::format("'{}' was defined here", stmt.name.name))});
}

void Analyzer::execFor(const ForStmt &stmt) {
  Value lo = eval(*stmt.lo);
  Value hi = eval(*stmt.hi);
  bool valid = true;
  for (const auto &[bound, expr] : {std::pair{&lo, stmt.lo.get()}, std::pair{&hi, stmt.hi.get()}}) {
    if (!bound->isPoison() && bound->kind != Value::Kind::Int) {
      diags_.error(expr->range, fmt::format("for: loop bounds must be compile-time integers, found {}",
                                            describeValue(*bound)));
      *bound = Value::poison();
    }
    valid = valid && !bound->isPoison();
  }
  if (valid && lo.intValue > hi.intValue) {
    diags_.error(SourceRange::cover(stmt.lo->range, stmt.hi->range),
                 fmt::format("for: the range {}..{} is reversed (the start must not exceed the end)",
                             lo.intValue, hi.intValue));
    valid = false;
  } else if (valid && hi.intValue - lo.intValue > kMaxTripCount) {
    diags_.error(SourceRange::cover(stmt.lo->range, stmt.hi->range),
                 fmt::format("for: the range {}..{} has {} iterations, more than the limit of {}",
                             lo.intValue, hi.intValue, hi.intValue - lo.intValue, kMaxTripCount));
    valid = false;
  }
  if (!define(stmt.var, Binding{Binding::Kind::LoopVar, Value::poison(), stmt.var.range}))
    return;
  if (!valid) {
    // Check the body once anyway, with a poison loop variable: its errors
    // are still reported and the names it binds still exist afterwards.
    execAll(stmt.body);
  } else {
    // Every iteration is a step: loops with empty bodies nested three deep
    // run no statement, yet would spin for days.
    for (int64_t i = lo.intValue; i < hi.intValue && !stopping() && step(stmt.keywordRange); ++i) {
      current().names[stmt.var.name].value = Value::integer(i);
      execAll(stmt.body);
    }
  }
  current().names.erase(stmt.var.name);
}

void Analyzer::execOutput(const OutputStmt &stmt) {
  Value value = stmt.value ? eval(*stmt.value) : Value::poison();
  if (!value.isPoison() && !value.isTensor()) {
    diags_.error(stmt.value->range, fmt::format("output '{}' must be a tensor, found {}", stmt.name.name,
                                                describeValue(value)));
    value = Value::poison();
  }
  if (define(stmt.name, Binding{Binding::Kind::Output, value, stmt.name.range}) && value.isTensor())
    graph_.outputs.push_back(GraphOutput{stmt.name.name, value.id, sources_.location(stmt.name.range.begin)});
}

void Analyzer::execLoss(const LossStmt &stmt) {
  if (loss_) {
    diags_.error(stmt.keywordRange, "a model has exactly one 'loss'; write one expression that sums "
                                    "the terms",
                 {DiagnosticEngine::note(loss_->keywordRange, "the first 'loss' is here")});
    return;
  }
  loss_ = &stmt;
  if (!stmt.value)
    return;
  Value value = eval(*stmt.value);
  if (value.isPoison())
    return;
  if (!value.isTensor() || value.type.dtype != DType::F32 || value.type.rank() != 0) {
    diags_.error(stmt.value->range,
                 fmt::format("the loss must be a scalar f32[] tensor, found {}{}", describeValue(value),
                             value.isTensor() ? " (reduce it, e.g. with mean(...))" : ""));
    return;
  }
  graph_.lossId = value.id;
  graph_.lossLoc = sources_.location(stmt.value->range.begin);
}

void Analyzer::finish() {
  // Without a model statement (already reported) the file is likely not a
  // model at all; listing everything else it lacks would only add noise.
  if (!model_)
    return;
  SourceRange at = model_->name.name.empty() ? model_->keywordRange : model_->name.range;
  std::string name = fmt::format("model '{}'", model_->name.name);
  if (!loss_)
    diags_.error(at, fmt::format("{} has no 'loss' statement", name));
  if (!optimizer_)
    diags_.error(at, fmt::format("{} has no 'optimizer' statement (e.g. optimizer adamw(lr = 1e-3))", name));
  if (minLrRange_ && graph_.optimizer.minLr > graph_.optimizer.lr)
    diags_.error(*minLrRange_, fmt::format("warmup_cosine: min_lr ({}) must not exceed the optimizer's "
                                           "lr ({})",
                                           graph_.optimizer.minLr, graph_.optimizer.lr));
}

} // namespace stringc::sema
