//===- Lexer.cpp ----------------------------------------------------------===//

#include "stringc/Frontend/Lexer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace stringc {

namespace {
bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

std::string printable(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f)
    return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", u);
}
} // namespace

Lexer::Lexer(const SourceManager &sources, DiagnosticEngine &diags)
    : diags_(diags), text_(sources.text()) {}

char Lexer::peek(uint32_t ahead) const {
  return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
}

Token Lexer::make(TokenKind kind, uint32_t begin) {
  Token token;
  token.kind = kind;
  token.range = {begin, pos_};
  token.text = text_.substr(begin, pos_ - begin);
  return token;
}

void Lexer::skipWhitespaceAndComments() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n')
        ++pos_;
    } else {
      break;
    }
  }
}

Token Lexer::next() {
  skipWhitespaceAndComments();
  uint32_t begin = pos_;
  if (pos_ >= text_.size())
    return make(TokenKind::Eof, begin);
  char c = text_[pos_];
  if (isIdentStart(c))
    return lexIdentifier(begin);
  if (isDigit(c))
    return lexNumber(begin);
  if (c == '"')
    return lexString(begin);
  ++pos_;
  switch (c) {
  case '(': return make(TokenKind::LParen, begin);
  case ')': return make(TokenKind::RParen, begin);
  case '[': return make(TokenKind::LBracket, begin);
  case ']': return make(TokenKind::RBracket, begin);
  case '{': return make(TokenKind::LBrace, begin);
  case '}': return make(TokenKind::RBrace, begin);
  case ',': return make(TokenKind::Comma, begin);
  case ':': return make(TokenKind::Colon, begin);
  case '=': return make(TokenKind::Equal, begin);
  case '+': return make(TokenKind::Plus, begin);
  case '-': return make(TokenKind::Minus, begin);
  case '*': return make(TokenKind::Star, begin);
  case '/': return make(TokenKind::Slash, begin);
  case '.':
    if (peek() == '.') {
      ++pos_;
      return make(TokenKind::DotDot, begin);
    }
    diags_.error({begin, pos_}, "unexpected character '.' (ranges are written 'A..B')");
    return make(TokenKind::Error, begin);
  default:
    break;
  }
  // Consume a whole UTF-8 sequence so a stray non-ASCII character is one error.
  while (pos_ < text_.size() && (static_cast<unsigned char>(text_[pos_]) & 0xC0) == 0x80)
    ++pos_;
  diags_.error({begin, pos_}, fmt::format("unexpected character {}", printable(c)));
  return make(TokenKind::Error, begin);
}

Token Lexer::lexIdentifier(uint32_t begin) {
  while (isIdentChar(peek()))
    ++pos_;
  Token token = make(TokenKind::Identifier, begin);
  token.kind = keywordKind(token.text);
  return token;
}

Token Lexer::lexNumber(uint32_t begin) {
  bool isFloat = false;
  while (isDigit(peek()))
    ++pos_;
  // A '.' followed by a second '.' is a range, not a fraction: `0..4`.
  if (peek() == '.' && peek(1) != '.') {
    ++pos_;
    if (!isDigit(peek())) {
      diags_.error({begin, pos_}, fmt::format("invalid number '{}': expected a digit after the "
                                              "decimal point",
                                              text_.substr(begin, pos_ - begin)));
      return make(TokenKind::Error, begin);
    }
    isFloat = true;
    while (isDigit(peek()))
      ++pos_;
  }
  if (peek() == 'e' || peek() == 'E') {
    uint32_t exponentDigits = (peek(1) == '+' || peek(1) == '-') ? 2 : 1;
    if (!isDigit(peek(exponentDigits))) {
      pos_ += exponentDigits;
      diags_.error({begin, pos_}, fmt::format("invalid number '{}': the exponent has no digits",
                                              text_.substr(begin, pos_ - begin)));
      return make(TokenKind::Error, begin);
    }
    pos_ += exponentDigits;
    isFloat = true;
    while (isDigit(peek()))
      ++pos_;
  }
  if (isIdentChar(peek())) {
    while (isIdentChar(peek()))
      ++pos_;
    diags_.error({begin, pos_}, fmt::format("invalid number '{}'", text_.substr(begin, pos_ - begin)));
    return make(TokenKind::Error, begin);
  }
  Token token = make(isFloat ? TokenKind::Float : TokenKind::Integer, begin);
  std::string spelling(token.text);
  errno = 0;
  if (isFloat) {
    token.floatValue = std::strtod(spelling.c_str(), nullptr);
    if (errno == ERANGE && std::isinf(token.floatValue)) {
      diags_.error(token.range, fmt::format("number '{}' is out of range", spelling));
      token.kind = TokenKind::Error;
    }
  } else {
    token.intValue = std::strtoll(spelling.c_str(), nullptr, 10);
    if (errno == ERANGE) {
      diags_.error(token.range, fmt::format("integer '{}' is too large (the largest is {})",
                                            spelling, INT64_MAX));
      token.kind = TokenKind::Error;
    }
  }
  return token;
}

Token Lexer::lexString(uint32_t begin) {
  ++pos_; // the opening quote
  std::string value;
  bool bad = false;
  while (true) {
    char c = peek();
    if (pos_ >= text_.size() || c == '\n' || c == '\r') {
      diags_.error({begin, pos_}, "unterminated string (strings end with '\"' on the same line)");
      return make(TokenKind::Error, begin);
    }
    ++pos_;
    if (c == '"')
      break;
    if (c == '\\') {
      char escaped = peek();
      if (escaped == '"' || escaped == '\\') {
        value += escaped;
        ++pos_;
        continue;
      }
      if (escaped == '\n' || escaped == '\r' || pos_ >= text_.size())
        continue; // reported as unterminated on the next turn
      diags_.error({pos_ - 1, pos_ + 1},
                   fmt::format("unknown escape sequence '\\{}' in string (only '\\\"' and "
                               "'\\\\' are allowed)",
                               escaped));
      ++pos_;
      bad = true;
      continue;
    }
    value += c;
  }
  Token token = make(bad ? TokenKind::Error : TokenKind::String, begin);
  token.stringValue = std::move(value);
  return token;
}

std::vector<Token> Lexer::lexAll() {
  std::vector<Token> tokens;
  do {
    tokens.push_back(next());
  } while (!tokens.back().is(TokenKind::Eof));
  return tokens;
}

} // namespace stringc
