//===- ParserTest.cpp -----------------------------------------------------===//

#include "stringc/Frontend/Parser.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>

using namespace stringc;
using namespace stringc::ast;

namespace {

struct Parsed {
  std::unique_ptr<SourceManager> sources;
  std::unique_ptr<DiagnosticEngine> diags;
  Module module;

  std::vector<std::string> errors() const {
    std::vector<std::string> out;
    for (const Diagnostic &d : diags->diagnostics()) {
      SourceLoc loc = sources->location(d.range.begin);
      out.push_back(fmt::format("{}:{}: {}", loc.line, loc.col, d.message));
    }
    return out;
  }
};

Parsed parse(const std::string &text) {
  Parsed result;
  result.sources = std::make_unique<SourceManager>("parse.pe", text);
  result.diags = std::make_unique<DiagnosticEngine>(*result.sources);
  result.module = Parser(*result.sources, *result.diags).parseModule();
  return result;
}

/// An expression as an s-expression: (+ 1 (* 2 3)), (call f 1 k=2).
std::string show(const Expr &e) {
  if (auto *n = e.as<NumberExpr>())
    return n->isInteger ? std::to_string(n->intValue) : fmt::format("{}", n->floatValue);
  if (auto *s = e.as<StringExpr>())
    return "\"" + s->value + "\"";
  if (auto *n = e.as<NameExpr>())
    return n->name;
  if (auto *u = e.as<UnaryExpr>())
    return "(neg " + show(*u->operand) + ")";
  if (auto *b = e.as<BinaryExpr>())
    return fmt::format("({} {} {})", b->op, show(*b->lhs), show(*b->rhs));
  auto *c = e.as<CallExpr>();
  std::string out = "(call " + c->callee;
  for (const Argument &arg : c->args)
    out += " " + (arg.isKeyword() ? arg.name + "=" : "") + show(*arg.value);
  return out + ")";
}

std::string expr(const std::string &text) {
  SourceManager sources("e.pe", text);
  DiagnosticEngine diags(sources);
  ExprPtr e = Parser(sources, diags).parseStandaloneExpression();
  if (!e)
    return "<error>";
  return show(*e);
}

TEST(Parser, Precedence) {
  EXPECT_EQ(expr("1 + 2 * 3"), "(+ 1 (* 2 3))");
  EXPECT_EQ(expr("(1 + 2) * 3"), "(* (+ 1 2) 3)");
  EXPECT_EQ(expr("8 / 2 / 2"), "(/ (/ 8 2) 2)");
  EXPECT_EQ(expr("a - b - c"), "(- (- a b) c)");
  EXPECT_EQ(expr("-a * b"), "(* (neg a) b)");
  EXPECT_EQ(expr("2 * -3"), "(* 2 (neg 3))");
  EXPECT_EQ(expr("- - x"), "(neg (neg x))");
  EXPECT_EQ(expr("x + 0.01 * f(L)"), "(+ x (* 0.01 (call f L)))");
}

TEST(Parser, Calls) {
  EXPECT_EQ(expr("f()"), "(call f)");
  EXPECT_EQ(expr("linear(x, w, b)"), "(call linear x w b)");
  EXPECT_EQ(expr("attention(q, k, v, heads = 4, mask = skip(layer + 1),)"),
            "(call attention q k v heads=4 mask=(call skip (+ layer 1)))");
  EXPECT_EQ(expr("load(\"w.st\", \"wq\")"), "(call load \"w.st\" \"wq\")");
}

TEST(Parser, ExpressionErrors) {
  EXPECT_EQ(expr("1 +"), "<error>");
  EXPECT_EQ(expr("f(1 2)"), "<error>");
  EXPECT_EQ(expr("(1"), "<error>");
}

TEST(Parser, EveryStatementKind) {
  Parsed p = parse(R"(model vit
const D = 64
input image: f32[B, 1, 28, 28]
param w: [16, D] = normal(std = 0.02) frozen
block enc(x, layer) {
  const h = 2
  param g: [D] = ones
  let y = x
  for i in 0..2 { let y = y }
  return y
}
let x = enc(image, 0)
for layer in 0..4 {
  let x = enc(x, layer)
}
output logits = x
loss mean(x)
optimizer adamw(lr = 1e-3)
schedule warmup_cosine(warmup = 10)
data idx("/data")
)");
  ASSERT_TRUE(p.errors().empty()) << p.errors().front();
  const auto &s = p.module.stmts;
  ASSERT_EQ(s.size(), 12u);
  EXPECT_EQ(s[0]->as<ModelStmt>()->name.name, "vit");
  EXPECT_EQ(s[1]->as<ConstStmt>()->name.name, "D");
  const auto *input = s[2]->as<InputStmt>();
  EXPECT_EQ(input->elementType.name, "f32");
  EXPECT_EQ(input->dims.size(), 4u);
  const auto *param = s[3]->as<ParamStmt>();
  EXPECT_TRUE(param->frozen);
  EXPECT_EQ(param->dims.size(), 2u);
  EXPECT_EQ(show(*param->init), "(call normal std=0.02)");
  const auto *block = s[4]->as<BlockStmt>();
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(block->params.size(), 2u);
  EXPECT_EQ(block->body.size(), 4u);
  EXPECT_EQ(show(*block->result), "y");
  EXPECT_NE(s[5]->as<LetStmt>(), nullptr);
  const auto *loop = s[6]->as<ForStmt>();
  EXPECT_EQ(loop->var.name, "layer");
  EXPECT_EQ(show(*loop->hi), "4");
  EXPECT_EQ(loop->body.size(), 1u);
  EXPECT_EQ(s[7]->as<OutputStmt>()->name.name, "logits");
  EXPECT_NE(s[8]->as<LossStmt>(), nullptr);
  EXPECT_EQ(show(*s[9]->as<OptimizerStmt>()->value), "(call adamw lr=0.001)");
  EXPECT_NE(s[10]->as<ScheduleStmt>(), nullptr);
  EXPECT_EQ(show(*s[11]->as<DataStmt>()->value), "(call idx \"/data\")");
}

TEST(Parser, RecoversAndReportsSeveralErrors) {
  Parsed p = parse(R"(model m
let a = (1 +
let b = 2
const = 3
let c = f(1 2)
input x f32[B]
let d = 4
)");
  std::vector<std::string> expected = {
      "3:1: expected an expression, found keyword 'let'",
      "4:7: expected a constant name after 'const', found '='",
      "5:13: expected ',' or ')' in the arguments of 'f', found number 2",
      "6:9: expected ':' after the input name, found identifier 'f32'",
  };
  EXPECT_EQ(p.errors(), expected);
  // The statements between the errors were parsed, and the interrupted
  // ones that name what they define were kept (incomplete).
  std::vector<std::string> names;
  for (const StmtPtr &s : p.module.stmts)
    if (auto *let = s->as<LetStmt>())
      names.push_back(let->name.name + (let->incomplete ? "?" : ""));
  EXPECT_EQ(names, (std::vector<std::string>{"a?", "b", "c?", "d"}));
}

TEST(Parser, AssignmentWithoutLetGetsAHint) {
  Parsed p = parse("model m\nx = 3\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "2:1: expected a statement, found identifier 'x' (to bind a name write 'let x = ...')");
}

TEST(Parser, StrayTokenAfterStatement) {
  Parsed p = parse("model m\nlet x = a b\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0].substr(0, 44), "2:11: expected a statement (model, const, in");
}

TEST(Parser, MisplacedStatements) {
  Parsed p = parse(R"(model m
block b(x) {
  input y: f32[B]
  block inner() { return 1 }
  for i in 0..2 {
    param p: [2] = zeros
    const c = 1
    output o = x
  }
  return x
}
return 3
)");
  std::vector<std::string> expected = {
      "3:3: 'input' is only allowed at the top level, not inside a block",
      "4:3: blocks cannot be nested; define the block at the top level",
      "6:5: 'param' is not allowed inside a 'for' loop; declare the parameter in a block and call the block from the loop",
      "7:5: 'const' is not allowed inside a 'for' loop; use 'let'",
      "8:5: 'output' is only allowed at the top level, not inside a 'for' loop",
      "12:1: 'return' is only allowed as the last statement of a block",
  };
  EXPECT_EQ(p.errors(), expected);
}

TEST(Parser, ReturnMustBeLast) {
  Parsed p = parse("model m\nblock b(x) {\n  return x\n  let y = x\n}\nlet z = 1\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "4:3: 'return' must be the last statement of block 'b'");
  EXPECT_EQ(p.module.stmts.size(), 3u); // model, block, let z
}

TEST(Parser, ReturnInsideLoopOfBlock) {
  Parsed p = parse("model m\nblock b(x) {\n  for i in 0..2 { return x }\n  return x\n}\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "3:19: 'return' must be the last statement of block 'b', not inside a 'for' loop");
}

TEST(Parser, MissingReturn) {
  Parsed p = parse("model m\nblock b(x) {\n  let y = x\n}\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "4:1: block 'b' must end with 'return EXPR'");
}

TEST(Parser, BrokenReturnIsNotAlsoMissing) {
  Parsed p = parse("model m\nblock b(x) {\n  return x +\n}\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "4:1: expected an expression, found '}'");
}

TEST(Parser, UnclosedBody) {
  Parsed p = parse("model m\nfor i in 0..2 {\n  let y = 1\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "4:1: expected '}' to end the loop body, found end of file");
}

TEST(Parser, PositionalAfterKeyword) {
  Parsed p = parse("model m\nlet y = f(a = 1, 2)\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "2:18: positional argument after a keyword argument in the call to 'f'");
}

TEST(Parser, KeywordAsName) {
  Parsed p = parse("model m\nlet loss = 1\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "2:5: expected a name after 'let', found keyword 'loss' (keywords cannot be used as names)");
}

TEST(Parser, ParamTypeHasNoElementType) {
  Parsed p = parse("model m\nparam w: f32[4] = zeros\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "2:10: parameter shapes are written [d1, ...] without an element type (parameters are always f32), found 'f32'");
}

TEST(Parser, RangeNeedsDotDot) {
  Parsed p = parse("model m\nfor i in 0 to 3 { }\n");
  ASSERT_GE(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "2:12: expected '..' between the loop bounds (write 'for i in 0..n'), found identifier 'to'");
}

TEST(Parser, UnexpectedClosingBrace) {
  Parsed p = parse("model m\n}\nlet x = 1\n");
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_EQ(p.errors()[0], "2:1: unexpected '}' at the top level");
  EXPECT_EQ(p.module.stmts.size(), 2u);
}

TEST(Parser, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "model m\nlet x = " + std::string(5000, '(') + "1" + std::string(5000, ')') + "\n";
  Parsed p = parse(deep);
  ASSERT_EQ(p.errors().size(), 1u);
  EXPECT_NE(p.errors()[0].find("nested too deeply"), std::string::npos);
}

} // namespace
