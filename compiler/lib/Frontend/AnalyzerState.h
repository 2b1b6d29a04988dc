//===- Analyzer.h - the semantic analyzer's state ---------------*- C++ -*-===//
//
// Private to the frontend library. Statements.cpp runs statements,
// Expressions.cpp evaluates expressions and instantiates blocks, the
// Builtins*.cpp files check and emit the built-in functions,
// InitializerAnalysis.cpp and TrainingSetup.cpp handle parameters' initializers and
// the optimizer, schedule and data statements.
//
// Scoping: the global scope holds constants, inputs, parameters, blocks, and
// the top-level `let` and `output` bindings. Each block instantiation gets a
// fresh scope whose parent is the global scope, of which it sees only
// constants, inputs, parameters and blocks. A `for` body shares the enclosing
// scope; its loop variable lives there for the duration of the loop.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_LIB_FRONTEND_ANALYZER_H
#define STRINGC_LIB_FRONTEND_ANALYZER_H

#include "Value.h"

#include "stringc/Frontend/AST.h"
#include "stringc/Frontend/Diagnostics.h"
#include "stringc/Frontend/Graph.h"
#include "stringc/Frontend/Analyzer.h"
#include "stringrt/OpSchema.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace stringc::sema {

using stringrt::OpCode;

struct Binding {
  enum class Kind { Const, Input, Param, Let, Output, Arg, LoopVar, Block };
  Kind kind = Kind::Let;
  Value value;
  SourceRange range; // where the name was defined
  const ast::BlockStmt *block = nullptr;
};

/// "a constant", "an input", "a parameter", ...
const char *bindingKindName(Binding::Kind kind);

struct Scope {
  std::map<std::string, Binding> names;
  bool isBlock = false;
  /// Prepended to the names of parameters declared here: "encoder.0.".
  std::string prefix;
  /// Per block name, how many times it was used from this scope so far.
  std::map<std::string, int> uses;
};

class Analyzer {
public:
  /// The unrolled graph may not exceed this many ops: a hostile or mistaken
  /// file (nested loops to a million) fails cleanly instead of exhausting memory.
  static constexpr size_t kMaxOps = 1'000'000;
  /// The most iterations one `for` loop may have.
  static constexpr int64_t kMaxTripCount = 100'000;
  /// The most statements, loop iterations and block uses evaluation may run
  /// in all, so that nested loops (even empty ones) or blocks that each use
  /// another block twice cannot make the compiler run for hours even when
  /// they emit no ops.
  static constexpr int64_t kMaxSteps = 2'000'000;
  /// The most entries the model's sparse_skew supports may hold in all: each
  /// is drawn at compile time (a hash map entry or two per element) and kept
  /// as an IR attribute, so a loop of large ones would take hours and
  /// gigabytes.
  static constexpr int64_t kMaxSupportEntries = int64_t(1) << 20;
  /// How deep block uses may nest (a block using a block using ...): each
  /// level is a frame of the compiler's own recursion.
  static constexpr size_t kMaxBlockDepth = 100;

  Analyzer(const SourceManager &sources, DiagnosticEngine &diags, AnalyzerOptions options);
  std::optional<ModelGraph> run(const ast::Module &module);

  //===--- used by the built-ins ---------------------------------------===//
  /// Reports an error and returns poison, so checks read `return fail(...)`.
  Value fail(SourceRange range, std::string message);
  /// Whether a value of `type` fits the package limits (ManifestLimits.h:
  /// rank, per-example elements); reports at `where` when it does not.
  bool withinLimits(const TensorType &type, SourceRange where, const std::string &what);
  /// Appends an op and returns its result. The op is named by its code, so
  /// a misspelt op is a compile error, and its operand count and attribute
  /// names are checked against the op schema generated from the dialect's
  /// ODS (stringrt/OpSchema.h): a built-in that disagrees with the dialect
  /// is reported as an internal error, not passed on.
  Value emit(OpCode code, std::vector<int> operands, std::vector<NamedAttr> attrs,
             TensorType result, SourceRange where);
  /// The op that produced a tensor value, or nullptr (inputs, non-tensors).
  const GraphOp *definingOp(const Value &value) const;
  /// The full name of the parameter a tensor value reads directly, or "".
  std::string paramNameOf(const Value &value) const;
  Value eval(const ast::Expr &expr);
  /// An absolute path for `path`, relative ones against the model's directory.
  std::string resolvePath(const std::string &path) const;
  /// Adds `count` entries to the model's sparse supports; false (nothing
  /// added) when the total would pass kMaxSupportEntries.
  bool reserveSupportEntries(int64_t count);
  int64_t supportEntries() const { return supportEntries_; }
  /// The random stream of the next dropout or drop_path the model applies:
  /// 0, 1, 2, ... in the order the graph is built, so that every one draws
  /// its own masks (pe.dropout's `stream`).
  int64_t nextRandomStream() { return randomStreams_++; }

private:
  //===--- statements (Statements.cpp) ----------------------------------===//
  void execAll(const std::vector<ast::StmtPtr> &stmts);
  void exec(const ast::Stmt &stmt);
  void execModel(const ast::ModelStmt &stmt);
  void execConst(const ast::ConstStmt &stmt);
  void execInput(const ast::InputStmt &stmt);
  void execParam(const ast::ParamStmt &stmt);
  void execBlock(const ast::BlockStmt &stmt);
  void execLet(const ast::LetStmt &stmt);
  void execFor(const ast::ForStmt &stmt);
  void execOutput(const ast::OutputStmt &stmt);
  void execLoss(const ast::LossStmt &stmt);
  /// The value of top-level constant `stmt`: `fileValue`, or the -D
  /// override of its name (then every later error notes it).
  Value overriddenConstant(const ast::ConstStmt &stmt, const Value &fileValue);
  /// Reports the -D overrides that named no top-level constant.
  void reportUnusedOverrides();
  void finish();
  bool stopping() const { return aborted_ || diags_.shouldStop(); }

  /// A positive dimension of an input or parameter type, or nullopt after an error.
  std::optional<int64_t> evalDim(const ast::Expr &expr, bool isParam);

  //===--- names ---------------------------------------------------------===//
  Scope &current() { return scopes_.back(); }
  Scope &global() { return scopes_.front(); }
  /// Defines a new name in the current scope; reports a redefinition.
  bool define(const ast::Ident &name, Binding binding);
  /// What `name` means here, or nullptr. Sets `hidden` to the top-level
  /// binding a block cannot see, if that is why the lookup failed.
  const Binding *lookup(const std::string &name, const Binding **hidden = nullptr) const;
  /// Names visible here (for "did you mean").
  std::vector<std::string> visibleNames() const;

  //===--- expressions (Expressions.cpp) --------------------------------===//
  Value evalName(const ast::NameExpr &expr);
  Value evalUnary(const ast::UnaryExpr &expr);
  Value evalBinary(const ast::BinaryExpr &expr);
  Value evalNumbers(const ast::BinaryExpr &expr, const Value &lhs, const Value &rhs);
  Value evalTensors(const ast::BinaryExpr &expr, const Value &lhs, const Value &rhs);
  Value evalCall(const ast::CallExpr &expr);
  Value instantiate(const ast::BlockStmt &block, const ast::CallExpr &call);

  //===--- parameters and training set-up -------------------------------===//
  /// Fills param.init and param.initAttrs from `init`; false after an error.
  /// `shapeKnown` says whether param.type is valid (load checks against it).
  bool evalInitializer(const ast::Expr &init, GraphParam &param, bool shapeKnown);
  void execOptimizer(const ast::OptimizerStmt &stmt);
  void execSchedule(const ast::ScheduleStmt &stmt);
  void execData(const ast::DataStmt &stmt);

  const SourceManager &sources_;
  DiagnosticEngine &diags_;
  AnalyzerOptions options_;
  ModelGraph graph_;
  std::vector<Scope> scopes_;
  /// Elements of all parameters declared so far (kMaxParamElements).
  int64_t paramElements_ = 0;
  std::vector<const ast::BlockStmt *> instantiating_;
  /// Where each block being instantiated was called, outermost first.
  std::vector<SourceLoc> callSites_;
  /// Set when the graph grew past kMaxOps or evaluation past kMaxSteps:
  /// analysis stops.
  bool aborted_ = false;
  int64_t steps_ = 0;
  int64_t supportEntries_ = 0;
  int64_t randomStreams_ = 0;
  /// Per entry of options_.overrides: whether a constant took it.
  std::vector<bool> overrideUsed_;
  /// Counts one step; reports and aborts when the budget is spent.
  bool step(SourceRange where);

  const ast::ModelStmt *model_ = nullptr;
  const ast::LossStmt *loss_ = nullptr;
  const ast::OptimizerStmt *optimizer_ = nullptr;
  const ast::ScheduleStmt *schedule_ = nullptr;
  const ast::DataStmt *data_ = nullptr;
  /// Where schedule's min_lr was given, to check it against lr at the end.
  std::optional<SourceRange> minLrRange_;

  /// Opened safetensors headers by resolved path (see InitializerAnalysis.cpp).
  struct LoadCache;
  std::shared_ptr<LoadCache> loadCache_;
};

} // namespace stringc::sema

#endif // STRINGC_LIB_FRONTEND_ANALYZER_H
