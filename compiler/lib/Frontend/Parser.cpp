//===- Parser.cpp ---------------------------------------------------------===//

#include "stringc/Frontend/Parser.h"

#include "stringc/Frontend/Lexer.h"

#include <fmt/format.h>

namespace stringc {

using namespace ast;

namespace {
/// Deeper nesting than this (parentheses, calls, loops) is rejected rather
/// than risking the stack on hostile input.
constexpr int kMaxNesting = 200;
/// An expression tree may be this many levels high: `a + b + ... + z` is a
/// chain as high as it has terms, and the analyzer recurses once per level.
constexpr int kMaxExpressionHeight = 1000;

} // namespace

/// Whether an interrupted statement is worth keeping: it already has the
/// name it defines, or it is one of the once-per-model statements (so the
/// analyzer does not also report it missing or misplaced).
bool definesSomething(const Stmt &stmt) {
  switch (stmt.kind) {
  case Stmt::Kind::Const: return !static_cast<const ConstStmt &>(stmt).name.name.empty();
  case Stmt::Kind::Input: return !static_cast<const InputStmt &>(stmt).name.name.empty();
  case Stmt::Kind::Param: return !static_cast<const ParamStmt &>(stmt).name.name.empty();
  case Stmt::Kind::Block: return !static_cast<const BlockStmt &>(stmt).name.name.empty();
  case Stmt::Kind::Let: return !static_cast<const LetStmt &>(stmt).name.name.empty();
  case Stmt::Kind::Output: return !static_cast<const OutputStmt &>(stmt).name.name.empty();
  case Stmt::Kind::Model: // kept even unnamed: the file does start with 'model'
  case Stmt::Kind::Loss:
  case Stmt::Kind::Optimizer:
  case Stmt::Kind::Schedule:
  case Stmt::Kind::Data: return true;
  case Stmt::Kind::For: return false;
  }
  return false;
}

/// Counts nesting (parentheses, calls, unary minus, bodies) for as long as it
/// lives; exceptions unwind it too.
class Parser::NestingGuard {
public:
  NestingGuard(Parser &parser, const Token &at) : parser_(parser) {
    if (++parser_.depth_ > kMaxNesting) {
      --parser_.depth_;
      parser_.fail(at, "nested too deeply");
    }
  }
  ~NestingGuard() { --parser_.depth_; }

private:
  Parser &parser_;
};

Parser::Parser(const SourceManager &sources, DiagnosticEngine &diags)
    : diags_(diags) {
  tokens_ = Lexer(sources, diags).lexAll();
}

const Token &Parser::peek(size_t ahead) const {
  size_t index = pos_ + ahead;
  return index < tokens_.size() ? tokens_[index] : tokens_.back();
}

const Token &Parser::advance() {
  const Token &token = peek();
  if (pos_ + 1 < tokens_.size())
    ++pos_;
  return token;
}

bool Parser::accept(TokenKind kind) {
  if (!check(kind))
    return false;
  advance();
  return true;
}

void Parser::fail(const Token &at, const std::string &message) {
  // An invalid token was already reported by the lexer.
  if (!at.is(TokenKind::Error))
    diags_.error(at.range, message);
  throw SyntaxError{};
}

const Token &Parser::expect(TokenKind kind, const char *what) {
  if (check(kind))
    return advance();
  fail(peek(), fmt::format("expected {} {}, found {}", tokenKindName(kind), what, describeToken(peek())));
}

bool Parser::startsStatement(TokenKind kind) {
  switch (kind) {
  case TokenKind::KwModel:
  case TokenKind::KwConst:
  case TokenKind::KwInput:
  case TokenKind::KwParam:
  case TokenKind::KwBlock:
  case TokenKind::KwLet:
  case TokenKind::KwReturn:
  case TokenKind::KwFor:
  case TokenKind::KwOutput:
  case TokenKind::KwLoss:
  case TokenKind::KwOptimizer:
  case TokenKind::KwSchedule:
  case TokenKind::KwData:
    return true;
  default:
    return false;
  }
}

void Parser::synchronize() {
  // Skip to a statement keyword or the '}' that closes the current body;
  // braced regions met on the way are skipped whole.
  int braces = 0;
  while (!check(TokenKind::Eof)) {
    if (braces == 0 && (startsStatement(peek().kind) || check(TokenKind::RBrace)))
      return;
    if (check(TokenKind::LBrace))
      ++braces;
    else if (check(TokenKind::RBrace))
      --braces;
    advance();
  }
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

Module Parser::parseModule() {
  Module module;
  module.stmts = parseStatements(Context::TopLevel, nullptr);
  return module;
}

std::vector<StmtPtr> Parser::parseStatements(Context context, BlockStmt *block) {
  std::vector<StmtPtr> stmts;
  while (!check(TokenKind::Eof) && !diags_.shouldStop()) {
    if (check(TokenKind::RBrace)) {
      if (context != Context::TopLevel)
        return stmts;
      diags_.error(peek().range, "unexpected '}' at the top level");
      advance();
      continue;
    }
    try {
      if (check(TokenKind::KwReturn)) {
        const Token &keyword = advance();
        if (context == Context::Block)
          block->returnRange = keyword.range; // even if the expression fails to parse
        ExprPtr value = parseExpr();
        if (context == Context::Block) {
          block->result = std::move(value);
          if (!check(TokenKind::RBrace) && !check(TokenKind::Eof)) {
            diags_.error(peek().range, fmt::format("'return' must be the last statement of block '{}'",
                                                   block->name.name));
            synchronize();
            // Skip the rest of the body: nothing after a return is analyzed.
            while (!check(TokenKind::RBrace) && !check(TokenKind::Eof)) {
              advance();
              synchronize();
            }
          }
          return stmts;
        }
        if (currentBlock_)
          diags_.error(keyword.range, fmt::format("'return' must be the last statement of block '{}', "
                                                  "not inside a 'for' loop",
                                                  currentBlock_->name.name));
        else
          diags_.error(keyword.range, "'return' is only allowed as the last statement of a block");
        continue;
      }
      if (StmtPtr stmt = parseStatement(context))
        stmts.push_back(std::move(stmt));
    } catch (SyntaxError &) {
      if (partial_ && partialAllowed_ && definesSomething(*partial_)) {
        partial_->incomplete = true;
        stmts.push_back(std::move(partial_));
      }
      partial_.reset();
      synchronize();
    }
  }
  return stmts;
}

bool Parser::checkAllowed(const Token &keyword, Context context) {
  TokenKind kind = keyword.kind;
  bool topLevelOnly = kind == TokenKind::KwModel || kind == TokenKind::KwInput ||
                      kind == TokenKind::KwBlock || kind == TokenKind::KwOutput ||
                      kind == TokenKind::KwLoss || kind == TokenKind::KwOptimizer ||
                      kind == TokenKind::KwSchedule || kind == TokenKind::KwData;
  std::string spelling(keyword.text);
  if (context == Context::Block && topLevelOnly) {
    diags_.error(keyword.range,
                 kind == TokenKind::KwBlock
                     ? std::string("blocks cannot be nested; define the block at the top level")
                     : fmt::format("'{}' is only allowed at the top level, not inside a block", spelling));
    return false;
  }
  if (context == Context::Loop) {
    if (kind == TokenKind::KwParam) {
      diags_.error(keyword.range, "'param' is not allowed inside a 'for' loop; declare the parameter "
                                  "in a block and call the block from the loop");
      return false;
    }
    if (kind == TokenKind::KwConst) {
      diags_.error(keyword.range, "'const' is not allowed inside a 'for' loop; use 'let'");
      return false;
    }
    if (topLevelOnly) {
      diags_.error(keyword.range,
                   fmt::format("'{}' is only allowed at the top level, not inside a 'for' loop", spelling));
      return false;
    }
  }
  return true;
}

StmtPtr Parser::parseStatement(Context context) {
  const Token &keyword = peek();
  if (!startsStatement(keyword.kind)) {
    if (keyword.is(TokenKind::Identifier) && peek(1).is(TokenKind::Equal))
      fail(keyword, fmt::format("expected a statement, found identifier '{}' (to bind a name write "
                                "'let {} = ...')",
                                keyword.text, keyword.text));
    fail(keyword, fmt::format("expected a statement (model, const, input, param, block, let, for, "
                              "output, loss, optimizer, schedule or data), found {}",
                              describeToken(keyword)));
  }
  bool allowed = checkAllowed(keyword, context);
  partial_.reset();
  partialAllowed_ = allowed;
  StmtPtr stmt;
  switch (keyword.kind) {
  case TokenKind::KwModel: stmt = parseModel(); break;
  case TokenKind::KwConst: stmt = parseConst(); break;
  case TokenKind::KwInput: stmt = parseInput(); break;
  case TokenKind::KwParam: stmt = parseParam(); break;
  case TokenKind::KwBlock: stmt = parseBlock(); break;
  case TokenKind::KwLet: stmt = parseLet(); break;
  case TokenKind::KwFor: stmt = parseFor(); break;
  case TokenKind::KwOutput: stmt = parseOutput(); break;
  case TokenKind::KwLoss: stmt = parseExprStmt<LossStmt>(); break;
  case TokenKind::KwOptimizer: stmt = parseExprStmt<OptimizerStmt>(); break;
  case TokenKind::KwSchedule: stmt = parseExprStmt<ScheduleStmt>(); break;
  case TokenKind::KwData: stmt = parseExprStmt<DataStmt>(); break;
  default: break;
  }
  // A statement that is not allowed here was parsed only to skip it cleanly.
  return allowed ? std::move(stmt) : nullptr;
}

template <typename T> T &Parser::begin() {
  partial_ = std::make_unique<T>(advance().range);
  return static_cast<T &>(*partial_);
}

Ident Parser::parseIdent(const char *what) {
  if (check(TokenKind::Identifier)) {
    const Token &token = advance();
    return Ident{std::string(token.text), token.range};
  }
  if (peek().isKeyword()) {
    const Token &keyword = peek();
    // `let loss = ...`: the keyword was meant as a name; skip it so that
    // recovery does not start a statement there.
    TokenKind after = peek(1).kind;
    if (after == TokenKind::Equal || after == TokenKind::Colon || after == TokenKind::LParen)
      advance();
    fail(keyword, fmt::format("expected {}, found {} (keywords cannot be used as names)", what,
                              describeToken(keyword)));
  }
  fail(peek(), fmt::format("expected {}, found {}", what, describeToken(peek())));
}

StmtPtr Parser::parseModel() {
  auto &stmt = begin<ModelStmt>();
  stmt.name = parseIdent("the model name after 'model'");
  return std::move(partial_);
}

StmtPtr Parser::parseConst() {
  auto &stmt = begin<ConstStmt>();
  stmt.name = parseIdent("a constant name after 'const'");
  expect(TokenKind::Equal, "after the constant name");
  stmt.value = parseExpr();
  return std::move(partial_);
}

std::vector<ExprPtr> Parser::parseDims(SourceRange &range) {
  const Token &open = expect(TokenKind::LBracket, "to start the shape");
  std::vector<ExprPtr> dims;
  while (!check(TokenKind::RBracket)) {
    dims.push_back(parseExpr());
    if (!accept(TokenKind::Comma) && !check(TokenKind::RBracket))
      fail(peek(), fmt::format("expected ',' or ']' after a dimension, found {}", describeToken(peek())));
  }
  const Token &close = advance(); // ']'

  range = SourceRange::cover(open.range, close.range);
  return dims;
}

StmtPtr Parser::parseInput() {
  auto &stmt = begin<InputStmt>();
  stmt.name = parseIdent("an input name after 'input'");
  expect(TokenKind::Colon, "after the input name");
  stmt.elementType = parseIdent("an element type (f32 or i32)");
  SourceRange shapeRange;
  stmt.dims = parseDims(shapeRange);
  return std::move(partial_);
}

StmtPtr Parser::parseParam() {
  auto &stmt = begin<ParamStmt>();
  stmt.name = parseIdent("a parameter name after 'param'");
  expect(TokenKind::Colon, "after the parameter name");
  if (check(TokenKind::Identifier) && peek(1).is(TokenKind::LBracket))
    fail(peek(), fmt::format("parameter shapes are written [d1, ...] without an element type "
                             "(parameters are always f32), found '{}'",
                             peek().text));
  stmt.dims = parseDims(stmt.shapeRange);
  expect(TokenKind::Equal, "before the parameter's initializer");
  stmt.init = parseExpr();
  stmt.frozen = accept(TokenKind::KwFrozen);
  return std::move(partial_);
}

std::vector<StmtPtr> Parser::parseBody(Context context, BlockStmt *block) {
  expect(TokenKind::LBrace, context == Context::Block ? "to start the block body" : "to start the loop body");
  NestingGuard nesting(*this, peek());
  std::vector<StmtPtr> body = parseStatements(context, block);
  if (check(TokenKind::Eof)) {
    diags_.error(peek().range, fmt::format("expected '}}' to end the {}, found end of file",
                                           context == Context::Block ? "block body" : "loop body"));
    return body;
  }
  advance(); // '}'
  return body;
}

StmtPtr Parser::parseBlock() {
  begin<BlockStmt>();
  auto *header = static_cast<BlockStmt *>(partial_.get());
  header->name = parseIdent("a block name after 'block'");
  expect(TokenKind::LParen, "after the block name");
  if (!check(TokenKind::RParen)) {
    do {
      header->params.push_back(parseIdent("an argument name"));
    } while (accept(TokenKind::Comma) && !check(TokenKind::RParen));
  }
  expect(TokenKind::RParen, "to end the block's argument list");
  // The body's statements reuse partial_; the block owns itself from here.
  std::unique_ptr<BlockStmt> stmt(static_cast<BlockStmt *>(partial_.release()));
  const BlockStmt *enclosing = currentBlock_;
  currentBlock_ = stmt.get();
  try {
    stmt->body = parseBody(Context::Block, stmt.get());
  } catch (SyntaxError &) {
    currentBlock_ = enclosing;
    throw;
  }
  currentBlock_ = enclosing;
  if (stmt->returnRange.length() == 0) {
    // Point at the closing brace: that is where the return is missing.
    const Token &close = tokens_[pos_ > 0 ? pos_ - 1 : 0];
    diags_.error(close.is(TokenKind::RBrace) ? close.range : stmt->name.range,
                 fmt::format("block '{}' must end with 'return EXPR'", stmt->name.name));
  }
  return stmt;
}

StmtPtr Parser::parseLet() {
  auto &stmt = begin<LetStmt>();
  stmt.name = parseIdent("a name after 'let'");
  expect(TokenKind::Equal, "after the name in 'let'");
  stmt.value = parseExpr();
  return std::move(partial_);
}

StmtPtr Parser::parseFor() {
  auto stmt = std::make_unique<ForStmt>(advance().range);
  stmt->var = parseIdent("a loop variable after 'for'");
  expect(TokenKind::KwIn, "after the loop variable");
  stmt->lo = parseExpr();
  expect(TokenKind::DotDot, "between the loop bounds (write 'for i in 0..n')");
  stmt->hi = parseExpr();
  stmt->body = parseBody(Context::Loop, nullptr);
  return stmt;
}

StmtPtr Parser::parseOutput() {
  auto &stmt = begin<OutputStmt>();
  stmt.name = parseIdent("an output name after 'output'");
  expect(TokenKind::Equal, "after the output name");
  stmt.value = parseExpr();
  return std::move(partial_);
}

template <typename T> StmtPtr Parser::parseExprStmt() {
  auto &stmt = begin<T>();
  stmt.value = parseExpr();
  return std::move(partial_);
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

ExprPtr Parser::parseStandaloneExpression() {
  try {
    ExprPtr expr = parseExpr();
    if (!check(TokenKind::Eof))
      fail(peek(), fmt::format("expected end of expression, found {}", describeToken(peek())));
    return expr;
  } catch (SyntaxError &) {
    return nullptr;
  }
}

ExprPtr Parser::limitHeight(ExprPtr expr, const Token &at) {
  if (expr->height > kMaxExpressionHeight)
    fail(at, fmt::format("expression too deep: more than {} levels of operators, calls and "
                         "parentheses (split it with 'let')",
                         kMaxExpressionHeight));
  return expr;
}

ExprPtr Parser::parseExpr() {
  ExprPtr lhs = parseTerm();
  while (check(TokenKind::Plus) || check(TokenKind::Minus)) {
    const Token &op = advance();
    ExprPtr rhs = parseTerm();
    SourceRange range = SourceRange::cover(lhs->range, rhs->range);
    lhs = limitHeight(
        std::make_unique<BinaryExpr>(range, op.text[0], op.range, std::move(lhs), std::move(rhs)),
        op);
  }
  return lhs;
}

ExprPtr Parser::parseTerm() {
  ExprPtr lhs = parseUnary();
  while (check(TokenKind::Star) || check(TokenKind::Slash)) {
    const Token &op = advance();
    ExprPtr rhs = parseUnary();
    SourceRange range = SourceRange::cover(lhs->range, rhs->range);
    lhs = limitHeight(
        std::make_unique<BinaryExpr>(range, op.text[0], op.range, std::move(lhs), std::move(rhs)),
        op);
  }
  return lhs;
}

ExprPtr Parser::parseUnary() {
  if (check(TokenKind::Minus)) {
    const Token &op = advance();
    NestingGuard nesting(*this, op);
    ExprPtr operand = parseUnary();
    SourceRange range = SourceRange::cover(op.range, operand->range);
    return limitHeight(std::make_unique<UnaryExpr>(range, op.range, std::move(operand)), op);
  }
  return parsePrimary();
}

ExprPtr Parser::parsePrimary() {
  const Token &token = peek();
  switch (token.kind) {
  case TokenKind::Integer:
    advance();
    return std::make_unique<NumberExpr>(token.range, token.intValue);
  case TokenKind::Float:
    advance();
    return std::make_unique<NumberExpr>(token.range, token.floatValue);
  case TokenKind::String:
    advance();
    return std::make_unique<StringExpr>(token.range, token.stringValue);
  case TokenKind::Identifier:
    advance();
    if (check(TokenKind::LParen))
      return parseCall(token);
    return std::make_unique<NameExpr>(token.range, std::string(token.text));
  case TokenKind::LParen: {
    advance();
    NestingGuard nesting(*this, token);
    ExprPtr inner = parseExpr();
    const Token &close = expect(TokenKind::RParen, "to close the parenthesis");
    inner->range = SourceRange::cover(token.range, close.range);
    return inner;
  }
  default:
    fail(token, fmt::format("expected an expression, found {}", describeToken(token)));
  }
}

ExprPtr Parser::parseCall(const Token &callee) {
  advance(); // '('
  NestingGuard nesting(*this, callee);
  std::vector<Argument> args;
  bool sawKeyword = false;
  while (!check(TokenKind::RParen)) {
    Argument arg;
    if (check(TokenKind::Identifier) && peek(1).is(TokenKind::Equal)) {
      const Token &name = advance();
      advance(); // '='
      arg.name = std::string(name.text);
      arg.nameRange = name.range;
      sawKeyword = true;
      arg.value = parseExpr();
    } else {
      arg.value = parseExpr();
      if (sawKeyword)
        diags_.error(arg.value->range, fmt::format("positional argument after a keyword argument in "
                                                   "the call to '{}'",
                                                   callee.text));
    }
    args.push_back(std::move(arg));
    if (!accept(TokenKind::Comma)) {
      if (!check(TokenKind::RParen))
        fail(peek(), fmt::format("expected ',' or ')' in the arguments of '{}', found {}", callee.text,
                                 describeToken(peek())));
      break;
    }
  }
  const Token &close = advance(); // ')'
  SourceRange range = SourceRange::cover(callee.range, close.range);
  return limitHeight(
      std::make_unique<CallExpr>(range, std::string(callee.text), callee.range, std::move(args)),
      callee);
}

} // namespace stringc
