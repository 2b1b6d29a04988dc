//===- Token.cpp ----------------------------------------------------------===//

#include "stringc/Frontend/Token.h"

#include <fmt/format.h>

#include <array>
#include <utility>

namespace stringc {

namespace {
constexpr std::array<std::pair<std::string_view, TokenKind>, 15> kKeywords = {{
    {"model", TokenKind::KwModel},
    {"const", TokenKind::KwConst},
    {"input", TokenKind::KwInput},
    {"param", TokenKind::KwParam},
    {"block", TokenKind::KwBlock},
    {"let", TokenKind::KwLet},
    {"return", TokenKind::KwReturn},
    {"for", TokenKind::KwFor},
    {"in", TokenKind::KwIn},
    {"output", TokenKind::KwOutput},
    {"loss", TokenKind::KwLoss},
    {"optimizer", TokenKind::KwOptimizer},
    {"schedule", TokenKind::KwSchedule},
    {"data", TokenKind::KwData},
    {"frozen", TokenKind::KwFrozen},
}};
} // namespace

TokenKind keywordKind(std::string_view word) {
  for (const auto &[spelling, kind] : kKeywords)
    if (spelling == word)
      return kind;
  return TokenKind::Identifier;
}

std::string tokenKindName(TokenKind kind) {
  for (const auto &[spelling, k] : kKeywords)
    if (k == kind)
      return fmt::format("'{}'", spelling);
  switch (kind) {
  case TokenKind::Eof: return "end of file";
  case TokenKind::Error: return "invalid token";
  case TokenKind::Identifier: return "identifier";
  case TokenKind::Integer: return "integer";
  case TokenKind::Float: return "number";
  case TokenKind::String: return "string";
  case TokenKind::LParen: return "'('";
  case TokenKind::RParen: return "')'";
  case TokenKind::LBracket: return "'['";
  case TokenKind::RBracket: return "']'";
  case TokenKind::LBrace: return "'{'";
  case TokenKind::RBrace: return "'}'";
  case TokenKind::Comma: return "','";
  case TokenKind::Colon: return "':'";
  case TokenKind::Equal: return "'='";
  case TokenKind::Plus: return "'+'";
  case TokenKind::Minus: return "'-'";
  case TokenKind::Star: return "'*'";
  case TokenKind::Slash: return "'/'";
  case TokenKind::DotDot: return "'..'";
  default: return "token";
  }
}

std::string describeToken(const Token &token) {
  switch (token.kind) {
  case TokenKind::Identifier: return fmt::format("identifier '{}'", token.text);
  case TokenKind::Integer:
  case TokenKind::Float: return fmt::format("number {}", token.text);
  case TokenKind::String: return fmt::format("string {}", token.text);
  default:
    if (token.isKeyword())
      return "keyword " + tokenKindName(token.kind);
    return tokenKindName(token.kind);
  }
}

} // namespace stringc
