//===- Parser.h - builds the AST of a .pe file ------------------*- C++ -*-===//
//
// A recursive-descent parser. Expressions:
//
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/') unary)*
//   unary   := '-' unary | primary
//   primary := NUMBER | STRING | IDENT | IDENT '(' args? ')' | '(' expr ')'
//   args    := arg (',' arg)* ','?      arg := IDENT '=' expr | expr
//
// Statements start with a keyword. After a syntax error the parser reports it
// and skips to the next statement keyword (or the '}' closing the current
// body), so one run reports every syntax error. Statements that are not
// allowed where they appear (an `input` inside a block, a `param` inside a
// loop, a misplaced `return`) are reported here too.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_FRONTEND_PARSER_H
#define STRINGC_FRONTEND_PARSER_H

#include "stringc/Frontend/AST.h"
#include "stringc/Frontend/Diagnostics.h"
#include "stringc/Frontend/Token.h"

#include <vector>

namespace stringc {

class Parser {
public:
  Parser(const SourceManager &sources, DiagnosticEngine &diags);

  ast::Module parseModule();
  /// One expression followed by the end of the input (for tests).
  ast::ExprPtr parseStandaloneExpression();

private:
  /// Where a statement list is: decides which statements are allowed.
  enum class Context { TopLevel, Block, Loop };
  /// Thrown after a syntax error has been reported; caught by the statement
  /// loop, which then resynchronizes.
  struct SyntaxError {};
  class NestingGuard;

  const Token &peek(size_t ahead = 0) const;
  const Token &advance();
  bool check(TokenKind kind) const { return peek().is(kind); }
  bool accept(TokenKind kind);
  const Token &expect(TokenKind kind, const char *what);
  [[noreturn]] void fail(const Token &at, const std::string &message);
  void synchronize();
  static bool startsStatement(TokenKind kind);

  std::vector<ast::StmtPtr> parseStatements(Context context, ast::BlockStmt *block);
  ast::StmtPtr parseStatement(Context context);
  bool checkAllowed(const Token &keyword, Context context);

  ast::StmtPtr parseModel();
  ast::StmtPtr parseConst();
  ast::StmtPtr parseInput();
  ast::StmtPtr parseParam();
  ast::StmtPtr parseBlock();
  ast::StmtPtr parseLet();
  ast::StmtPtr parseFor();
  ast::StmtPtr parseOutput();
  template <typename T> ast::StmtPtr parseExprStmt();
  /// Starts statement T at its keyword, owned by partial_ until it is complete.
  template <typename T> T &begin();

  ast::Ident parseIdent(const char *what);
  std::vector<ast::ExprPtr> parseDims(SourceRange &range);
  std::vector<ast::StmtPtr> parseBody(Context context, ast::BlockStmt *block);

  ast::ExprPtr parseExpr();
  ast::ExprPtr parseTerm();
  ast::ExprPtr parseUnary();
  ast::ExprPtr parsePrimary();
  ast::ExprPtr parseCall(const Token &callee);
  /// `expr`, or a syntax error at `at` when its tree is too high to walk.
  ast::ExprPtr limitHeight(ast::ExprPtr expr, const Token &at);

  DiagnosticEngine &diags_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0; // nesting, bounded so hostile input cannot overflow the stack
  const ast::BlockStmt *currentBlock_ = nullptr;
  /// The statement being parsed; if a syntax error interrupts it, it is kept
  /// (marked incomplete) when it already names what it defines.
  ast::StmtPtr partial_;
  bool partialAllowed_ = true;
};

} // namespace stringc

#endif // STRINGC_FRONTEND_PARSER_H
