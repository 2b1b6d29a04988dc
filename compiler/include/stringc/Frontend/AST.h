//===- AST.h - syntax tree of a .pe file ------------------------*- C++ -*-===//
//
// The parser builds this tree; the analyzer (Sema) walks it. Nodes hold source
// ranges for diagnostics and nothing the analyzer computes.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_FRONTEND_AST_H
#define STRINGC_FRONTEND_AST_H

#include "stringc/Frontend/SourceManager.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace stringc::ast {

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

struct Expr {
  enum class Kind { Number, String, Name, Call, Unary, Binary };

  explicit Expr(Kind kind, SourceRange range) : kind(kind), range(range) {}
  virtual ~Expr() = default;

  /// The node as `T` when it is one, else nullptr.
  template <typename T> const T *as() const {
    return kind == T::kKind ? static_cast<const T *>(this) : nullptr;
  }

  const Kind kind;
  SourceRange range; // the whole expression
  /// The levels of the tree below and including this node (1 for a leaf):
  /// the depth every recursive walk of it (analysis, destruction) reaches.
  int height = 1;
};
using ExprPtr = std::unique_ptr<Expr>;

struct NumberExpr : Expr {
  static constexpr Kind kKind = Kind::Number;
  NumberExpr(SourceRange range, int64_t value) : Expr(kKind, range), isInteger(true), intValue(value) {}
  NumberExpr(SourceRange range, double value) : Expr(kKind, range), isInteger(false), floatValue(value) {}
  bool isInteger;
  int64_t intValue = 0;
  double floatValue = 0;
};

struct StringExpr : Expr {
  static constexpr Kind kKind = Kind::String;
  StringExpr(SourceRange range, std::string value) : Expr(kKind, range), value(std::move(value)) {}
  std::string value;
};

struct NameExpr : Expr {
  static constexpr Kind kKind = Kind::Name;
  NameExpr(SourceRange range, std::string name) : Expr(kKind, range), name(std::move(name)) {}
  std::string name;
};

/// `value` or `name = value` inside a call.
struct Argument {
  std::string name; // empty for a positional argument
  SourceRange nameRange;
  ExprPtr value;

  bool isKeyword() const { return !name.empty(); }
  /// The name (if any) and the value.
  SourceRange range() const { return isKeyword() ? SourceRange::cover(nameRange, value->range) : value->range; }
};

struct CallExpr : Expr {
  static constexpr Kind kKind = Kind::Call;
  CallExpr(SourceRange range, std::string callee, SourceRange calleeRange, std::vector<Argument> args)
      : Expr(kKind, range), callee(std::move(callee)), calleeRange(calleeRange), args(std::move(args)) {
    for (const Argument &arg : this->args)
      height = std::max(height, arg.value->height + 1);
  }
  std::string callee;
  SourceRange calleeRange;
  std::vector<Argument> args;
};

struct UnaryExpr : Expr {
  static constexpr Kind kKind = Kind::Unary;
  UnaryExpr(SourceRange range, SourceRange opRange, ExprPtr operand)
      : Expr(kKind, range), opRange(opRange), operand(std::move(operand)) {
    height = this->operand->height + 1;
  }
  SourceRange opRange; // the only unary operator is '-'
  ExprPtr operand;
};

struct BinaryExpr : Expr {
  static constexpr Kind kKind = Kind::Binary;
  BinaryExpr(SourceRange range, char op, SourceRange opRange, ExprPtr lhs, ExprPtr rhs)
      : Expr(kKind, range), op(op), opRange(opRange), lhs(std::move(lhs)), rhs(std::move(rhs)) {
    height = std::max(this->lhs->height, this->rhs->height) + 1;
  }
  char op; // '+', '-', '*' or '/'
  SourceRange opRange;
  ExprPtr lhs, rhs;
};

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

struct Stmt {
  enum class Kind { Model, Const, Input, Param, Block, Let, For, Output, Loss, Optimizer, Schedule, Data };

  Stmt(Kind kind, SourceRange keywordRange) : kind(kind), keywordRange(keywordRange) {}
  virtual ~Stmt() = default;

  template <typename T> const T *as() const {
    return kind == T::kKind ? static_cast<const T *>(this) : nullptr;
  }

  const Kind kind;
  SourceRange keywordRange; // the leading keyword
  /// Set when a syntax error cut the statement short. Such statements are
  /// kept only so that the name they define exists (as an invalid value) and
  /// uses of it raise no further errors; their other fields may be missing.
  bool incomplete = false;
};
using StmtPtr = std::unique_ptr<Stmt>;

/// An identifier together with where it was written.
struct Ident {
  std::string name;
  SourceRange range;
};

struct ModelStmt : Stmt {
  static constexpr Kind kKind = Kind::Model;
  explicit ModelStmt(SourceRange kw) : Stmt(kKind, kw) {}
  Ident name;
};

struct ConstStmt : Stmt {
  static constexpr Kind kKind = Kind::Const;
  explicit ConstStmt(SourceRange kw) : Stmt(kKind, kw) {}
  Ident name;
  ExprPtr value;
};

/// `input NAME: f32[B, 28, 28]`
struct InputStmt : Stmt {
  static constexpr Kind kKind = Kind::Input;
  explicit InputStmt(SourceRange kw) : Stmt(kKind, kw) {}
  Ident name;
  Ident elementType; // f32 or i32, checked by Sema
  std::vector<ExprPtr> dims;
};

/// `param NAME: [d1, ...] = INIT [frozen]`
struct ParamStmt : Stmt {
  static constexpr Kind kKind = Kind::Param;
  explicit ParamStmt(SourceRange kw) : Stmt(kKind, kw) {}
  Ident name;
  std::vector<ExprPtr> dims;
  SourceRange shapeRange; // '[' .. ']'
  ExprPtr init;
  bool frozen = false;
};

/// `block NAME(a, b) { ... return EXPR }`; the return is not in `body`.
struct BlockStmt : Stmt {
  static constexpr Kind kKind = Kind::Block;
  explicit BlockStmt(SourceRange kw) : Stmt(kKind, kw) {}
  Ident name;
  std::vector<Ident> params;
  std::vector<StmtPtr> body;
  ExprPtr result;           // null if missing or unparsable
  SourceRange returnRange; // the 'return' keyword; empty if there is none
};

/// `let NAME = EXPR`
struct LetStmt : Stmt {
  static constexpr Kind kKind = Kind::Let;
  explicit LetStmt(SourceRange kw) : Stmt(kKind, kw) {}
  Ident name;
  ExprPtr value;
};

/// `for NAME in LO..HI { ... }`
struct ForStmt : Stmt {
  static constexpr Kind kKind = Kind::For;
  explicit ForStmt(SourceRange kw) : Stmt(kKind, kw) {}
  Ident var;
  ExprPtr lo, hi;
  std::vector<StmtPtr> body;
};

/// `output NAME = EXPR`
struct OutputStmt : Stmt {
  static constexpr Kind kKind = Kind::Output;
  explicit OutputStmt(SourceRange kw) : Stmt(kKind, kw) {}
  Ident name;
  ExprPtr value;
};

/// `loss EXPR`, `optimizer CALL`, `schedule CALL`, `data CALL`: a keyword and
/// one expression.
template <Stmt::Kind K> struct ExprStmt : Stmt {
  static constexpr Kind kKind = K;
  explicit ExprStmt(SourceRange kw) : Stmt(kKind, kw) {}
  ExprPtr value;
};
using LossStmt = ExprStmt<Stmt::Kind::Loss>;
using OptimizerStmt = ExprStmt<Stmt::Kind::Optimizer>;
using ScheduleStmt = ExprStmt<Stmt::Kind::Schedule>;
using DataStmt = ExprStmt<Stmt::Kind::Data>;

struct Module {
  std::vector<StmtPtr> stmts;
};

} // namespace stringc::ast

#endif // STRINGC_FRONTEND_AST_H
