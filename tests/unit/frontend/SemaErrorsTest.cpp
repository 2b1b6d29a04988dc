//===- SemaErrorsTest.cpp - semantic errors and error recovery ------------===//

#include "TestHelpers.h"

#include "stringrt/Safetensors.h"

#include <filesystem>

using namespace stringc;
using namespace stringc::test;

namespace {

/// All errors of a body (see withModel: the body starts at line 8).
std::vector<std::string> errorsOf(const std::string &body) { return compileBody(body).errors(); }

TEST(Errors, UnknownNameWithSuggestion) {
  EXPECT_EQ(errorsOf("let h = gelu(xx)"), (std::vector<std::string>{"8:14: unknown name 'xx'; did you mean 'x'?"}));
  EXPECT_EQ(errorsOf("let h = gelu(zzzz)"), (std::vector<std::string>{"8:14: unknown name 'zzzz'"}));
}

TEST(Errors, UnknownFunction) {
  EXPECT_EQ(errorsOf("let h = gleu(x)"),
            (std::vector<std::string>{"8:9: unknown function 'gleu'; did you mean 'gelu'?"}));
  EXPECT_EQ(errorsOf("let h = normal(std = 1)"),
            (std::vector<std::string>{
                "8:9: 'normal' is an initializer; it is only allowed after '=' in a 'param' declaration"}));
  EXPECT_EQ(errorsOf("let h = gelu"), (std::vector<std::string>{"8:9: 'gelu' is a built-in function; call it as gelu(...)"}));
}

TEST(Errors, Arguments) {
  EXPECT_EQ(errorsOf("let h = gelu(x, x)"),
            (std::vector<std::string>{"8:17: gelu: too many arguments (it takes 1: x)"}));
  EXPECT_EQ(errorsOf("let h = attention(x, x, x, head = 4)"),
            (std::vector<std::string>{
                "8:28: attention: unknown argument 'head' (expected q, k, v, heads, mask, scale or relative)",
                "8:9: attention: missing argument 'heads'"}));
  EXPECT_EQ(errorsOf("let h = attention(x, x, x, 4)"),
            (std::vector<std::string>{"8:28: attention: too many positional arguments; 'heads' must be given by name (heads = ...)",
                                      "8:9: attention: missing argument 'heads'"}));
  EXPECT_EQ(errorsOf("let h = layer_norm(x)"),
            (std::vector<std::string>{"8:9: layer_norm: missing argument 'g'", "8:9: layer_norm: missing argument 'b'"}));
  EXPECT_EQ(errorsOf("let h = gelu(x, x = x)"),
            (std::vector<std::string>{"8:17: gelu: argument 'x' is given twice"}));
}

TEST(Errors, TypeErrors) {
  EXPECT_EQ(errorsOf("let h = gelu(3)"),
            (std::vector<std::string>{"8:14: gelu: argument 'x' must be a tensor, found the integer 3"}));
  EXPECT_EQ(errorsOf("let h = select_token(x, index = x)"),
            (std::vector<std::string>{
                "8:33: select_token: argument 'index' must be a compile-time integer, found a tensor f32[B, 16, 64]"}));
  EXPECT_EQ(errorsOf("let h = select_token(x, index = 1.5)"),
            (std::vector<std::string>{"8:33: select_token: argument 'index' must be a compile-time integer, found the number 1.5"}));
  EXPECT_EQ(errorsOf("const c = x"),
            (std::vector<std::string>{"8:11: constant 'c' must be a compile-time number, found a tensor f32[B, 16, 64]"}));
  EXPECT_EQ(errorsOf("output o = 3"), (std::vector<std::string>{"8:12: output 'o' must be a tensor, found the integer 3"}));
  EXPECT_EQ(errorsOf("let s = \"a\" + 1"), (std::vector<std::string>{"8:13: cannot apply '+' to a string"}));
}

TEST(Errors, NumberArithmetic) {
  EXPECT_EQ(errorsOf("const a = 1 / 0"), (std::vector<std::string>{"8:15: division by zero"}));
  EXPECT_EQ(errorsOf("const a = 9223372036854775807 + 1"),
            (std::vector<std::string>{"8:31: integer overflow in 9223372036854775807 + 1"}));
  EXPECT_EQ(errorsOf("const a = 1e300 * 1e300"),
            (std::vector<std::string>{"8:17: the result of 1e+300 * 1e+300 is out of range"}));
  EXPECT_EQ(errorsOf("const a = sqrt(-1)"), (std::vector<std::string>{"8:16: sqrt: x must not be negative, found -1"}));
}

TEST(Errors, Definitions) {
  EXPECT_EQ(errorsOf("param w: [2] = zeros\nparam w: [3] = zeros"),
            (std::vector<std::string>{"9:7: redefinition of 'w' (already a parameter)"}));
  Compiled c = compileBody("const x = 1");
  ASSERT_EQ(c.diags->diagnostics().size(), 1u);
  EXPECT_EQ(c.firstError(), "8:7: redefinition of 'x' (already an input)");
  ASSERT_EQ(c.diags->diagnostics()[0].notes.size(), 1u);
  EXPECT_EQ(c.diags->diagnostics()[0].notes[0].message, "'x' was defined here");
  EXPECT_EQ(errorsOf("let D = 3"), (std::vector<std::string>{"8:5: cannot rebind 'D' with 'let': it is a constant"}));
  EXPECT_EQ(errorsOf("const B = 3"),
            (std::vector<std::string>{"8:7: 'B' is reserved for the batch dimension and cannot be defined"}));
  EXPECT_EQ(errorsOf("block linear(a) { return a }"),
            (std::vector<std::string>{"8:7: block 'linear' has the name of a built-in function"}));
  EXPECT_EQ(errorsOf("block b(a, a) { return a }"),
            (std::vector<std::string>{"8:12: block 'b' has two arguments named 'a'"}));
  EXPECT_EQ(errorsOf("for i in 0..2 { let i = 1 }"),
            (std::vector<std::string>{"8:21: cannot rebind 'i' with 'let': it is a loop variable"}));
}

TEST(Errors, InputTypes) {
  EXPECT_EQ(errorsOf("input a: f32[28, B]"),
            (std::vector<std::string>{"8:18: the batch dimension 'B' must be the first dimension of input 'a'"}));
  EXPECT_EQ(errorsOf("input a: f32[28]"),
            (std::vector<std::string>{"8:14: input 'a' must have the batch dimension 'B' first (e.g. f32[B, 28, 28])"}));
  EXPECT_EQ(errorsOf("input a: f16[B]"), (std::vector<std::string>{"8:10: unknown element type 'f16' (expected f32 or i32)"}));
  EXPECT_EQ(errorsOf("input a: f32[B, 0]"),
            (std::vector<std::string>{"8:17: input dimensions must be positive integers below 2^31, found 0"}));
  EXPECT_EQ(errorsOf("param w: [B, 2] = zeros"),
            (std::vector<std::string>{"8:11: parameters have no batch dimension; 'B' may only be the first dimension of an input"}));
  EXPECT_EQ(errorsOf("param w: [2.5] = zeros"),
            (std::vector<std::string>{"8:11: parameter dimensions must be positive integers, found the number 2.5"}));
}

TEST(Errors, Initializers) {
  EXPECT_EQ(errorsOf("param w: [2] = gaussian(std = 1)"),
            (std::vector<std::string>{"8:16: unknown initializer 'gaussian' (expected normal, uniform, zeros, ones, constant or load)"}));
  EXPECT_EQ(errorsOf("param w: [2] = normal(std = 0)"),
            (std::vector<std::string>{"8:23: normal: std must be positive, found 0"}));
  EXPECT_EQ(errorsOf("param w: [2] = uniform(low = 1, high = 1)"),
            (std::vector<std::string>{"8:33: uniform: low (1) must be less than high (1)"}));
  EXPECT_EQ(errorsOf("param w: [2] = normal(seed = -1)"),
            (std::vector<std::string>{"8:23: normal: seed must be a non-negative integer, found -1"}));
  EXPECT_EQ(errorsOf("param w: [2] = constant"), (std::vector<std::string>{"8:16: constant: missing argument 'value'"}));
  EXPECT_EQ(errorsOf("param w: [2] = 3"),
            (std::vector<std::string>{"8:16: expected an initializer (normal, uniform, zeros, ones, constant or load)"}));
}

TEST(Errors, ReservedParameterNames) {
  // A parameter is the module symbol @NAME, beside the compiler's functions.
  EXPECT_EQ(errorsOf("param forward: [2] = zeros"),
            (std::vector<std::string>{"8:7: parameter name 'forward' is reserved (the compiler defines @forward)"}));
  EXPECT_EQ(errorsOf("param gradients: [2, 2] = ones frozen"),
            (std::vector<std::string>{
                "8:7: parameter name 'gradients' is reserved (the compiler defines @gradients)"}));
  EXPECT_EQ(errorsOf("param train_step: [2] = zeros"),
            (std::vector<std::string>{
                "8:7: parameter name 'train_step' is reserved (the compiler defines @train_step)"}));
  // The name stays defined (as poison): its uses report nothing more, and
  // errors in the rest of the declaration are still reported.
  EXPECT_EQ(errorsOf("param forward: [64] = zeros\noutput o = x * forward"),
            (std::vector<std::string>{"8:7: parameter name 'forward' is reserved (the compiler defines @forward)"}));
  EXPECT_EQ(errorsOf("param forward: [2] = normal(std = 0)"),
            (std::vector<std::string>{"8:7: parameter name 'forward' is reserved (the compiler defines @forward)",
                                      "8:29: normal: std must be positive, found 0"}));
  // Only the exact full names are reserved: inside a block the name gets the
  // instance prefix (blk.0.forward), and other spellings are free.
  Compiled c = compileBody("block blk(h) {\n  param forward: [64] = ones\n  return h * forward\n}\n"
                           "param Forward: [2] = zeros\nparam forward_w: [2] = zeros\nparam gradients2: [2] = zeros\n"
                           "output o = blk(x)");
  ASSERT_TRUE(c.graph) << c.printed();
  std::vector<std::string> names;
  for (const GraphParam &param : c.graph->params)
    names.push_back(param.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Forward", "forward_w", "gradients2", "blk.0.forward"}));
}

TEST(Errors, ForRanges) {
  EXPECT_EQ(errorsOf("for i in 3..1 { }"),
            (std::vector<std::string>{"8:10: for: the range 3..1 is reversed (the start must not exceed the end)"}));
  EXPECT_EQ(errorsOf("for i in 0..2.5 { }"),
            (std::vector<std::string>{"8:13: for: loop bounds must be compile-time integers, found the number 2.5"}));
  EXPECT_EQ(errorsOf("for i in 0..x { }"),
            (std::vector<std::string>{"8:13: for: loop bounds must be compile-time integers, found a tensor f32[B, 16, 64]"}));
  EXPECT_EQ(errorsOf("for i in 0..1000000 { }"),
            (std::vector<std::string>{"8:10: for: the range 0..1000000 has 1000000 iterations, more than the limit of 100000"}));
  EXPECT_EQ(errorsOf("for D in 0..2 { }"),
            (std::vector<std::string>{"8:5: redefinition of 'D' (already a constant)"}));
}

TEST(Errors, RunawayEvaluationIsStopped) {
  // No ops, so only the step budget can stop these.
  Compiled loops = compileBody("let t = 0\nfor i in 0..100000 {\n  for j in 0..100000 { let t = t + 1 }\n}");
  ASSERT_EQ(loops.errors().size(), 1u);
  EXPECT_NE(loops.firstError().find("the model takes too long to evaluate: more than 2000000 statements"),
            std::string::npos);
  // Empty bodies run no statement: the iterations themselves must count
  // (fuzz/regressions/frontend/timeout-empty-nested-loops.pe: days).
  Compiled empty = compileBody("for i in 0..99999 { for j in 0..99999 { for k in 0..99999 { } } }");
  ASSERT_EQ(empty.errors().size(), 1u);
  EXPECT_NE(empty.firstError().find("the model takes too long to evaluate: more than 2000000 statements "
                                    "and loop iterations run"),
            std::string::npos);
  // A loop of the largest trip count with a statement in it still fits.
  EXPECT_TRUE(compileBody("let t = 0\nfor i in 0..100000 { let t = t + 1 }").errors().empty());
  std::string blocks = "block b0(n) { return n + 1 }\n";
  for (int i = 1; i < 40; ++i)
    blocks += "block b" + std::to_string(i) + "(n) { return b" + std::to_string(i - 1) + "(b" +
              std::to_string(i - 1) + "(n)) }\n";
  Compiled doubling = compileBody(blocks + "const k = b39(0)");
  ASSERT_EQ(doubling.errors().size(), 1u);
  EXPECT_NE(doubling.firstError().find("the model takes too long to evaluate"), std::string::npos);
}

TEST(Errors, BadRangeStillChecksTheBodyOnce) {
  EXPECT_EQ(errorsOf("for i in 0..2.5 { let h = gelu(y) }\noutput o = h"),
            (std::vector<std::string>{"8:13: for: loop bounds must be compile-time integers, found the number 2.5",
                                      "8:32: unknown name 'y'"}));
}

TEST(Errors, Recursion) {
  Compiled c = compileBody("block a(h) { return b(h) }\nblock b(h) { return a(h) }\noutput o = a(x)");
  ASSERT_EQ(c.errors().size(), 1u);
  EXPECT_EQ(c.firstError(), "9:21: block 'a' is used recursively (a -> b -> a); blocks cannot call themselves");
  // Notes: the chain of instantiations, innermost first.
  const auto &notes = c.diags->diagnostics()[0].notes;
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].message, "in instantiation of block 'b' here");
  EXPECT_EQ(notes[1].message, "in instantiation of block 'a' here");
}

TEST(Errors, BlockCalls) {
  EXPECT_EQ(errorsOf("block b(h, i) { return h }\noutput o = b(x)"),
            (std::vector<std::string>{"9:12: block 'b': missing argument 'i'"}));
  EXPECT_EQ(errorsOf("block b(h) { return h }\noutput o = b(x, 1)"),
            (std::vector<std::string>{"9:17: block 'b' takes 1 argument, found 2"}));
  EXPECT_EQ(errorsOf("block b(h) { return h }\noutput o = b(y = x)"),
            (std::vector<std::string>{"9:14: block 'b' has no argument named 'y'", "9:12: block 'b': missing argument 'h'"}));
  EXPECT_EQ(errorsOf("block b(h) { return h }\noutput o = b"),
            (std::vector<std::string>{"9:12: 'b' is a block; call it as b(...)"}));
}

TEST(Errors, ErrorsInsideBlocksAreReportedOnceWithTheFirstInstantiation) {
  Compiled c = compileBody(R"(block enc(h, i) {
  param w: [32, 32] = zeros
  return linear(h, w)
}
let h = x
for i in 0..4 {
  let h = enc(h, i)
}
output o = h)");
  ASSERT_EQ(c.errors().size(), 1u);
  EXPECT_EQ(c.firstError(),
            "10:20: linear: input has 64 features but weight 'w' expects 32 (weight shape [32, 32])");
  const auto &notes = c.diags->diagnostics()[0].notes;
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].message, "in instantiation of block 'enc' here");
  EXPECT_EQ(c.sources->location(notes[0].range.begin).line, 14u);
}

TEST(Errors, PoisonSuppressesCascades) {
  // One mistake, one error: h is poison, so its uses stay silent.
  EXPECT_EQ(errorsOf("let h = gelu(nope)\nlet k = linear(h, h)\noutput o = h + k"),
            (std::vector<std::string>{"8:14: unknown name 'nope'"}));
  // A name whose definition was cut short by a syntax error stays defined.
  EXPECT_EQ(errorsOf("let h = gelu(x\nlet k = h * 2\noutput o = k"),
            (std::vector<std::string>{"9:1: expected ',' or ')' in the arguments of 'gelu', found keyword 'let'"}));
  EXPECT_EQ(errorsOf("param w: [3] = gaussian\noutput o = x * 1 + w"),
            (std::vector<std::string>{"8:16: unknown initializer 'gaussian' (expected normal, uniform, zeros, ones, constant or load)"}));
}

TEST(Errors, SeveralErrorsInOneFile) {
  std::vector<std::string> errors = errorsOf(R"(param w: [32, 10] = zeros
let a = linear(x, w)
let b = gelu(missing)
const c = 1 / 0
output o = attention(x, x, x, heads = 3)
)");
  std::vector<std::string> expected = {
      "9:19: linear: input has 64 features but weight 'w' expects 32 (weight shape [32, 10])",
      "10:14: unknown name 'missing'",
      "11:15: division by zero",
      "12:31: attention: heads = 3 does not divide the model width 64",
  };
  EXPECT_EQ(errors, expected);
}

TEST(Errors, ModelStructure) {
  EXPECT_EQ(compileSource("model m\noptimizer sgd(lr = 1)\n").errors(),
            (std::vector<std::string>{"1:7: model 'm' has no 'loss' statement"}));
  EXPECT_EQ(compileSource("model m\ninput x: f32[B]\nloss mean(x)\n").errors(),
            (std::vector<std::string>{"1:7: model 'm' has no 'optimizer' statement (e.g. optimizer adamw(lr = 1e-3))"}));
  EXPECT_EQ(compileBody("loss mean(x)").errors(),
            (std::vector<std::string>{"9:1: a model has exactly one 'loss'; write one expression that sums the terms"}));
  EXPECT_EQ(compileSource("const a = 1\nmodel m\n").firstError(), "1:1: a model file must start with 'model NAME'");
  EXPECT_EQ(compileSource("").errors(), (std::vector<std::string>{"1:1: a model file must start with 'model NAME'"}));
  // A broken model statement is one error, not also a missing one.
  EXPECT_EQ(compileSource("model 3\ninput x: f32[B]\nloss mean(x)\noptimizer sgd(lr = 1)\n").errors(),
            (std::vector<std::string>{"1:7: expected the model name after 'model', found number 3"}));
  EXPECT_EQ(compileSource("model m\nmodel n\n").firstError(),
            "2:1: the model is already named 'm' at 1:1; 'model' must be the first statement and appear once");
  EXPECT_EQ(compileSource("model m\ninput x: f32[B, 3]\nloss x\noptimizer sgd(lr = 1)\n").errors(),
            (std::vector<std::string>{"3:6: the loss must be a scalar f32[] tensor, found a tensor f32[B, 3] (reduce it, e.g. with mean(...))"}));
}

class LoadTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / "stringc_frontend_load_test";
    std::filesystem::create_directories(dir_);
    std::vector<float> wq(8 * 4, 0.5f);
    std::vector<int32_t> ids(3, 1);
    stringrt::writeSafetensors((dir_ / "w.safetensors").string(),
                               {{"wq", stringrt::DType::F32, {8, 4}, wq.data()},
                                {"ids", stringrt::DType::I32, {3}, ids.data()}});
  }
  std::string dir() const { return dir_.string(); }
  std::filesystem::path dir_;
};

TEST_F(LoadTest, ValidLoadResolvesThePath) {
  Compiled c = compileBody("param w: [8, 4] = load(\"w.safetensors\", \"wq\") frozen", dir());
  ASSERT_COMPILES(c);
  const GraphParam *w = c.graph->findParam("w");
  EXPECT_EQ(w->init, "load");
  EXPECT_TRUE(w->frozen);
  EXPECT_EQ(std::get<std::string>(*findAttr(w->initAttrs, "file")), (dir_ / "w.safetensors").string());
  EXPECT_EQ(std::get<std::string>(*findAttr(w->initAttrs, "tensor")), "wq");
}

TEST_F(LoadTest, MissingFile) {
  Compiled c = compileBody("param w: [8, 4] = load(\"nope.safetensors\", \"wq\")", dir());
  EXPECT_EQ(c.firstError(), "8:24: load: cannot read 'nope.safetensors' (" + (dir_ / "nope.safetensors").string() +
                                "): no such file");
}

TEST_F(LoadTest, MissingTensor) {
  Compiled c = compileBody("param w: [8, 4] = load(\"w.safetensors\", \"wk\")", dir());
  EXPECT_EQ(c.firstError(), "8:41: load: 'w.safetensors' has no tensor 'wk' (it has wq, ids)");
}

TEST_F(LoadTest, WrongShape) {
  Compiled c = compileBody("param w: [4, 8] = load(\"w.safetensors\", \"wq\")", dir());
  EXPECT_EQ(c.firstError(),
            "8:19: load: tensor 'wq' in 'w.safetensors' has shape [8, 4] but parameter 'w' is declared [4, 8]");
}

TEST_F(LoadTest, WrongDtype) {
  Compiled c = compileBody("param w: [3] = load(\"w.safetensors\", \"ids\")", dir());
  EXPECT_EQ(c.firstError(), "8:38: load: tensor 'ids' in 'w.safetensors' has dtype I32; parameters are F32");
}

TEST_F(LoadTest, ParameterInBlockReportsItsFullName) {
  Compiled c = compileBody("block b(h) {\n  param w: [4, 4] = load(\"w.safetensors\", \"wq\")\n  return h\n}\noutput o = b(x)", dir());
  EXPECT_EQ(c.firstError(),
            "9:21: load: tensor 'wq' in 'w.safetensors' has shape [8, 4] but parameter 'b.0.w' is declared [4, 4]");
}

} // namespace
