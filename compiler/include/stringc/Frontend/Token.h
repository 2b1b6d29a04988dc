//===- Token.h - tokens of the .pe language ---------------------*- C++ -*-===//
#ifndef STRINGC_FRONTEND_TOKEN_H
#define STRINGC_FRONTEND_TOKEN_H

#include "stringc/Frontend/SourceManager.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace stringc {

enum class TokenKind {
  Eof,
  Error, // an invalid token, already diagnosed by the lexer
  Identifier,
  Integer,
  Float,
  String,
  // Keywords.
  KwModel,
  KwConst,
  KwInput,
  KwParam,
  KwBlock,
  KwLet,
  KwReturn,
  KwFor,
  KwIn,
  KwOutput,
  KwLoss,
  KwOptimizer,
  KwSchedule,
  KwData,
  KwFrozen,
  // Punctuation.
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Equal,
  Plus,
  Minus,
  Star,
  Slash,
  DotDot,
};

struct Token {
  TokenKind kind = TokenKind::Eof;
  SourceRange range;
  std::string_view text;   // the token's spelling in the source
  int64_t intValue = 0;    // Integer
  double floatValue = 0;   // Float
  std::string stringValue; // String, with escapes resolved

  bool is(TokenKind k) const { return kind == k; }
  bool isKeyword() const { return kind >= TokenKind::KwModel && kind <= TokenKind::KwFrozen; }
};

/// The keyword for `word`, or Identifier.
TokenKind keywordKind(std::string_view word);

/// How a token kind reads in a message: "'('", "identifier", "end of file".
std::string tokenKindName(TokenKind kind);

/// How a particular token reads in a message: "identifier 'foo'", "')'".
std::string describeToken(const Token &token);

} // namespace stringc

#endif // STRINGC_FRONTEND_TOKEN_H
