//===- LexerTest.cpp ------------------------------------------------------===//

#include "stringc/Frontend/Lexer.h"

#include <gtest/gtest.h>

#include <memory>

using namespace stringc;

namespace {

struct Lexed {
  std::unique_ptr<SourceManager> sources;
  std::unique_ptr<DiagnosticEngine> diags;
  std::vector<Token> tokens;

  std::vector<TokenKind> kinds() const {
    std::vector<TokenKind> out;
    for (const Token &t : tokens)
      out.push_back(t.kind);
    return out;
  }
  std::string error(size_t i = 0) const {
    if (i >= diags->diagnostics().size())
      return "<none>";
    const Diagnostic &d = diags->diagnostics()[i];
    SourceLoc loc = sources->location(d.range.begin);
    return std::to_string(loc.line) + ":" + std::to_string(loc.col) + ": " + d.message;
  }
};

Lexed lex(const std::string &text) {
  Lexed result;
  result.sources = std::make_unique<SourceManager>("lex.pe", text);
  result.diags = std::make_unique<DiagnosticEngine>(*result.sources);
  result.tokens = Lexer(*result.sources, *result.diags).lexAll();
  return result;
}

using K = TokenKind;

TEST(Lexer, KeywordsAndIdentifiers) {
  Lexed l = lex("model const input param block let return for in output loss optimizer schedule data "
                "frozen modelx _x B f32");
  std::vector<K> expected = {K::KwModel, K::KwConst, K::KwInput,  K::KwParam,     K::KwBlock,
                             K::KwLet,   K::KwReturn, K::KwFor,   K::KwIn,        K::KwOutput,
                             K::KwLoss,  K::KwOptimizer, K::KwSchedule, K::KwData, K::KwFrozen,
                             K::Identifier, K::Identifier, K::Identifier, K::Identifier, K::Eof};
  EXPECT_EQ(l.kinds(), expected);
  EXPECT_EQ(l.tokens[15].text, "modelx");
  EXPECT_FALSE(l.diags->hasErrors());
}

TEST(Lexer, Punctuation) {
  Lexed l = lex("( ) [ ] { } , : = + - * / ..");
  std::vector<K> expected = {K::LParen, K::RParen, K::LBracket, K::RBracket, K::LBrace,
                             K::RBrace, K::Comma,  K::Colon,    K::Equal,    K::Plus,
                             K::Minus,  K::Star,   K::Slash,    K::DotDot,   K::Eof};
  EXPECT_EQ(l.kinds(), expected);
}

TEST(Lexer, Numbers) {
  Lexed l = lex("64 0.02 1e-3 3.5e+2 2E5 0");
  ASSERT_FALSE(l.diags->hasErrors()) << l.error();
  EXPECT_EQ(l.tokens[0].kind, K::Integer);
  EXPECT_EQ(l.tokens[0].intValue, 64);
  EXPECT_EQ(l.tokens[1].kind, K::Float);
  EXPECT_DOUBLE_EQ(l.tokens[1].floatValue, 0.02);
  EXPECT_EQ(l.tokens[2].kind, K::Float);
  EXPECT_DOUBLE_EQ(l.tokens[2].floatValue, 1e-3);
  EXPECT_EQ(l.tokens[3].kind, K::Float);
  EXPECT_DOUBLE_EQ(l.tokens[3].floatValue, 350.0);
  EXPECT_EQ(l.tokens[4].kind, K::Float); // an exponent makes a float
  EXPECT_DOUBLE_EQ(l.tokens[4].floatValue, 2e5);
  EXPECT_EQ(l.tokens[5].kind, K::Integer);
}

TEST(Lexer, RangeIsNotAFraction) {
  Lexed l = lex("0..depth 1.5..3");
  std::vector<K> expected = {K::Integer, K::DotDot, K::Identifier, K::Float, K::DotDot, K::Integer, K::Eof};
  EXPECT_EQ(l.kinds(), expected);
  EXPECT_FALSE(l.diags->hasErrors());
}

TEST(Lexer, StringsWithEscapes) {
  Lexed l = lex(R"("plain" "a\"b\\c" "")");
  ASSERT_FALSE(l.diags->hasErrors()) << l.error();
  EXPECT_EQ(l.tokens[0].stringValue, "plain");
  EXPECT_EQ(l.tokens[1].stringValue, "a\"b\\c");
  EXPECT_EQ(l.tokens[1].text, R"("a\"b\\c")");
  EXPECT_EQ(l.tokens[2].stringValue, "");
}

TEST(Lexer, CommentsAndNewlinesAreWhitespace) {
  Lexed l = lex("let # a comment ( [\n  x # another\n=\r\n1");
  std::vector<K> expected = {K::KwLet, K::Identifier, K::Equal, K::Integer, K::Eof};
  EXPECT_EQ(l.kinds(), expected);
}

TEST(Lexer, Locations) {
  Lexed l = lex("model m\n  let x = 1\n");
  SourceLoc let = l.sources->location(l.tokens[2].range.begin);
  EXPECT_EQ(let.line, 2u);
  EXPECT_EQ(let.col, 3u);
  EXPECT_EQ(l.tokens[3].range.length(), 1u);
  SourceLoc eof = l.sources->location(l.tokens.back().range.begin);
  EXPECT_EQ(eof.line, 3u);
}

TEST(Lexer, UnterminatedString) {
  Lexed l = lex("let f = \"weights.bin\nlet y = 2");
  EXPECT_EQ(l.error(), "1:9: unterminated string (strings end with '\"' on the same line)");
  EXPECT_EQ(l.tokens[3].kind, K::Error);
  // Lexing goes on with the next line.
  EXPECT_EQ(l.tokens[4].kind, K::KwLet);
}

TEST(Lexer, UnterminatedStringAtEndOfFile) {
  Lexed l = lex("\"abc");
  EXPECT_EQ(l.error(), "1:1: unterminated string (strings end with '\"' on the same line)");
}

TEST(Lexer, UnknownEscape) {
  Lexed l = lex(R"("a\nb")");
  EXPECT_EQ(l.error(), "1:3: unknown escape sequence '\\n' in string (only '\\\"' and '\\\\' are allowed)");
  EXPECT_EQ(l.tokens[0].kind, K::Error);
}

TEST(Lexer, BadCharacter) {
  Lexed l = lex("let x = 3 $ 4");
  EXPECT_EQ(l.error(), "1:11: unexpected character '$'");
  EXPECT_EQ(l.tokens[4].kind, K::Error);
  EXPECT_EQ(l.tokens[5].kind, K::Integer);
}

TEST(Lexer, NonAsciiCharacterIsOneError) {
  Lexed l = lex("let \xc3\xa9 = 1");
  EXPECT_EQ(l.diags->errorCount(), 1u);
  EXPECT_EQ(l.error(), "1:5: unexpected character byte 0xc3");
}

TEST(Lexer, LoneDot) {
  Lexed l = lex("a.b");
  EXPECT_EQ(l.error(), "1:2: unexpected character '.' (ranges are written 'A..B')");
}

TEST(Lexer, MalformedNumbers) {
  EXPECT_EQ(lex("1.").error(), "1:1: invalid number '1.': expected a digit after the decimal point");
  EXPECT_EQ(lex("1e").error(), "1:1: invalid number '1e': the exponent has no digits");
  EXPECT_EQ(lex("2e-x").error(), "1:1: invalid number '2e-': the exponent has no digits");
  EXPECT_EQ(lex("12abc").error(), "1:1: invalid number '12abc'");
  EXPECT_EQ(lex("99999999999999999999").error(),
            "1:1: integer '99999999999999999999' is too large (the largest is 9223372036854775807)");
  EXPECT_EQ(lex("1e999").error(), "1:1: number '1e999' is out of range");
}

TEST(Lexer, SeveralErrorsInOneRun) {
  Lexed l = lex("$ @ \"x");
  EXPECT_EQ(l.diags->errorCount(), 3u);
}

} // namespace
