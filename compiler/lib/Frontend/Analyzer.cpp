//===- Analyzer.cpp - graph building, names and the entry point -----------===//

#include "AnalyzerState.h"

#include "stringrt/ManifestLimits.h"

#include <fmt/format.h>

#include <filesystem>

namespace stringc {

std::optional<ModelGraph> analyzeModule(const ast::Module &module, const SourceManager &sources,
                                        DiagnosticEngine &diags, const AnalyzerOptions &options) {
  return sema::Analyzer(sources, diags, options).run(module);
}

namespace sema {

const char *bindingKindName(Binding::Kind kind) {
  switch (kind) {
  case Binding::Kind::Const: return "a constant";
  case Binding::Kind::Input: return "an input";
  case Binding::Kind::Param: return "a parameter";
  case Binding::Kind::Let: return "a 'let' binding";
  case Binding::Kind::Output: return "an output";
  case Binding::Kind::Arg: return "a block argument";
  case Binding::Kind::LoopVar: return "a loop variable";
  case Binding::Kind::Block: return "a block";
  }
  return "name";
}

Analyzer::Analyzer(const SourceManager &sources, DiagnosticEngine &diags, AnalyzerOptions options)
    : sources_(sources), diags_(diags), options_(std::move(options)) {
  scopes_.emplace_back();
  graph_.sourcePath = sources.name();
}

Value Analyzer::fail(SourceRange range, std::string message) {
  diags_.error(range, std::move(message));
  return Value::poison();
}

bool Analyzer::withinLimits(const TensorType &type, SourceRange where, const std::string &what) {
  if (type.rank() > stringrt::kMaxRank) {
    diags_.error(where, fmt::format("{} has rank {}; a package allows at most {} dimensions", what,
                                    type.rank(), stringrt::kMaxRank));
    return false;
  }
  int64_t elements = 1;
  for (int64_t dim : type.dims) {
    int64_t d = dim == kBatchDim ? 1 : dim;
    if (d > 0 && elements > stringrt::kMaxExampleElements / d) {
      diags_.error(where, fmt::format("{} has shape {}: more than 2^32 elements per example, the "
                                      "largest value a package allows",
                                      what, formatShape(type.dims)));
      return false;
    }
    elements *= d;
  }
  return true;
}

Value Analyzer::emit(OpCode code, std::vector<int> operands, std::vector<NamedAttr> attrs,
                     TensorType result, SourceRange where) {
  const stringrt::OpSchema &schema = stringrt::opSchema(code);
  std::string name = schema.name;
  const int count = static_cast<int>(operands.size());
  if (count < schema.minOperands || count > schema.maxOperands)
    return fail(where, fmt::format("internal error: {} built with {} operands, its schema takes {} "
                                   "to {}",
                                   name, count, schema.minOperands, schema.maxOperands));
  for (const NamedAttr &attr : attrs)
    if (!schema.findAttr(attr.first))
      return fail(where, fmt::format("internal error: {} has no attribute '{}'", name, attr.first));
  for (const stringrt::AttrSchema &attr : schema.attrs)
    if (attr.required && !findAttr(attrs, attr.name))
      return fail(where, fmt::format("internal error: {} built without its attribute '{}'", name,
                                     attr.name));
  if (!withinLimits(result, where, "the result of " + name))
    return Value::poison();
  if (graph_.ops.size() >= kMaxOps) {
    if (!aborted_)
      diags_.error(where, fmt::format("the model is too large: more than {} ops after unrolling loops "
                                      "and instantiating blocks",
                                      kMaxOps));
    aborted_ = true;
    return Value::poison();
  }
  int id = static_cast<int>(graph_.values.size());
  GraphOp op;
  op.code = code;
  op.name = std::move(name);
  op.operands = std::move(operands);
  op.attrs = std::move(attrs);
  op.result = result;
  op.resultId = id;
  op.loc = sources_.location(where.begin);
  if (current().isBlock) {
    const std::string &prefix = current().prefix;
    op.scope = prefix.substr(0, prefix.size() - 1); // without the trailing '.'
    op.callSites.assign(callSites_.rbegin(), callSites_.rend());
  }
  graph_.values.push_back(GraphValue{result, -1, static_cast<int>(graph_.ops.size())});
  graph_.ops.push_back(std::move(op));
  return Value::tensor(id, std::move(result));
}

const GraphOp *Analyzer::definingOp(const Value &value) const {
  return value.isTensor() ? graph_.definingOp(value.id) : nullptr;
}

std::string Analyzer::paramNameOf(const Value &value) const {
  const GraphOp *op = definingOp(value);
  if (!op || op->code != OpCode::GetParam)
    return "";
  return std::get<std::string>(*op->attr("param"));
}

std::string Analyzer::resolvePath(const std::string &path) const {
  namespace fs = std::filesystem;
  fs::path resolved(path);
  if (resolved.is_relative())
    resolved = fs::path(options_.baseDir.empty() ? "." : options_.baseDir) / resolved;
  std::error_code ec;
  fs::path absolute = fs::absolute(resolved, ec);
  return (ec ? resolved : absolute).lexically_normal().string();
}

bool Analyzer::define(const ast::Ident &name, Binding binding) {
  if (name.name == "B") {
    diags_.error(name.range, "'B' is reserved for the batch dimension and cannot be defined");
    return false;
  }
  auto [it, inserted] = current().names.emplace(name.name, binding);
  if (inserted)
    return true;
  const Binding &previous = it->second;
  diags_.error(name.range,
               fmt::format("redefinition of '{}' (already {})", name.name, bindingKindName(previous.kind)),
               {DiagnosticEngine::note(previous.range, fmt::format("'{}' was defined here", name.name))});
  return false;
}

const Binding *Analyzer::lookup(const std::string &name, const Binding **hidden) const {
  const Scope &scope = scopes_.back();
  auto it = scope.names.find(name);
  if (it != scope.names.end())
    return &it->second;
  if (!scope.isBlock)
    return nullptr;
  const Scope &top = scopes_.front();
  it = top.names.find(name);
  if (it == top.names.end())
    return nullptr;
  switch (it->second.kind) {
  case Binding::Kind::Const:
  case Binding::Kind::Input:
  case Binding::Kind::Param:
  case Binding::Kind::Block:
    return &it->second;
  default:
    if (hidden)
      *hidden = &it->second;
    return nullptr;
  }
}

std::vector<std::string> Analyzer::visibleNames() const {
  std::vector<std::string> names;
  for (const auto &[name, binding] : scopes_.back().names)
    names.push_back(name);
  if (scopes_.back().isBlock)
    for (const auto &[name, binding] : scopes_.front().names)
      if (lookup(name))
        names.push_back(name);
  return names;
}

} // namespace sema
} // namespace stringc
