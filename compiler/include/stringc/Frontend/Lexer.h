//===- Lexer.h - turns .pe source into tokens -------------------*- C++ -*-===//
//
// Comments run from `#` to the end of the line; newlines are whitespace.
// Numbers with a `.` or an exponent are floats, others integers; `0..4` is the
// integer 0, `..`, the integer 4. Strings stay on one line and know only the
// escapes `\"` and `\\`. Each malformed token is reported once and becomes a
// TokenKind::Error token, which the parser skips without a second message.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_FRONTEND_LEXER_H
#define STRINGC_FRONTEND_LEXER_H

#include "stringc/Frontend/Diagnostics.h"
#include "stringc/Frontend/Token.h"

#include <vector>

namespace stringc {

class Lexer {
public:
  Lexer(const SourceManager &sources, DiagnosticEngine &diags);

  /// The next token; Eof forever once the input is exhausted.
  Token next();

  /// Every token up to and including Eof.
  std::vector<Token> lexAll();

private:
  void skipWhitespaceAndComments();
  Token make(TokenKind kind, uint32_t begin);
  Token lexNumber(uint32_t begin);
  Token lexString(uint32_t begin);
  Token lexIdentifier(uint32_t begin);
  char peek(uint32_t ahead = 0) const;

  DiagnosticEngine &diags_;
  std::string_view text_;
  uint32_t pos_ = 0;
};

} // namespace stringc

#endif // STRINGC_FRONTEND_LEXER_H
