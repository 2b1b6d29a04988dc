//===- SemaLanguageTest.cpp - constants, loops, blocks, seeds -------------===//

#include "TestHelpers.h"

#include "stringc/Frontend/Determinism.h"

#include <algorithm>
#include <set>

using namespace stringc;
using namespace stringc::test;

namespace {

/// The value of top-level constant `name`, as a double.
double constant(const ModelGraph &graph, const std::string &name) {
  for (const GraphConstant &c : graph.constants)
    if (c.name == name)
      return std::holds_alternative<int64_t>(c.value) ? static_cast<double>(std::get<int64_t>(c.value))
                                                     : std::get<double>(c.value);
  throw std::runtime_error("no constant " + name);
}

bool isInt(const ModelGraph &graph, const std::string &name) {
  for (const GraphConstant &c : graph.constants)
    if (c.name == name)
      return std::holds_alternative<int64_t>(c.value);
  return false;
}

TEST(Language, ConstantFolding) {
  Compiled c = compileBody(R"(const heads = 4
const Dh = D / heads
const neg = -7 / 2
const mixed = D / 3.0
const prec = 1 + 2 * 3 - 4
const P = pairs(D)
const K = sparse_pairs(D, 0.1)
const r = sqrt(16)
const lr = 1e-3 * 2
)");
  ASSERT_COMPILES(c);
  const ModelGraph &g = *c.graph;
  EXPECT_EQ(constant(g, "D"), 64);
  EXPECT_EQ(constant(g, "Dh"), 16);
  EXPECT_TRUE(isInt(g, "Dh"));
  EXPECT_EQ(constant(g, "neg"), -4); // floor division
  EXPECT_DOUBLE_EQ(constant(g, "mixed"), 64 / 3.0);
  EXPECT_FALSE(isInt(g, "mixed"));
  EXPECT_EQ(constant(g, "prec"), 3);
  EXPECT_EQ(constant(g, "P"), 2016);
  EXPECT_EQ(constant(g, "K"), 202);
  EXPECT_DOUBLE_EQ(constant(g, "r"), 4.0);
  EXPECT_FALSE(isInt(g, "r"));
  EXPECT_DOUBLE_EQ(constant(g, "lr"), 2e-3);
}

TEST(Language, ConstantsAsDimensions) {
  Compiled c = compileBody("const H = D * 4\nparam w: [D, H] = zeros\noutput y = linear(x, w)");
  ASSERT_COMPILES(c);
  EXPECT_EQ(c.graph->params[0].type.dims, (std::vector<int64_t>{64, 256}));
  EXPECT_EQ(outputOp(*c.graph, "y").result.dims, (std::vector<int64_t>{B, 16, 256}));
}

TEST(Language, ForLoopUnrolls) {
  Compiled c = compileBody("let h = x\nfor i in 0..5 {\n  let h = gelu(h)\n}\noutput y = h");
  ASSERT_COMPILES(c);
  EXPECT_EQ(countOps(*c.graph, "pe.gelu"), 5u);
  // Each gelu consumes the previous one: a chain, not five copies of gelu(x).
  const GraphOp &last = outputOp(*c.graph, "y");
  const GraphOp *prev = c.graph->definingOp(last.operands[0]);
  ASSERT_NE(prev, nullptr);
  EXPECT_EQ(prev->name, "pe.gelu");
}

TEST(Language, LoopVariableIsAConstantAndGoesOutOfScope) {
  Compiled c = compileBody("let total = 0\nfor i in 2..5 {\n  let total = total + i\n}\nconst t = total * 1\n"
                           "output y = x * t");
  ASSERT_COMPILES(c);
  EXPECT_EQ(constant(*c.graph, "t"), 9);
  Compiled after = compileBody("for i in 0..2 { let a = i }\nconst j = i");
  EXPECT_EQ(after.firstError(), "9:11: unknown name 'i'");
}

TEST(Language, EmptyRangeRunsNothing) {
  Compiled c = compileBody("let h = x\nfor i in 3..3 { let h = gelu(h) }\noutput y = h * 1");
  ASSERT_COMPILES(c);
  EXPECT_EQ(countOps(*c.graph, "pe.gelu"), 0u);
}

constexpr const char *kEncoder = R"(block encoder(h, layer) {
  param wq: [D, D] = normal(std = 0.02)
  param g: [D] = ones
  let q = linear(h, wq)
  return h + attention(q, q, q, heads = 4, mask = skip(layer + 1)) * g
}
let h = x
for layer in 0..3 {
  let h = encoder(h, layer)
}
output y = h
)";

TEST(Language, BlockInstantiationNamesParameters) {
  Compiled c = compileBody(kEncoder);
  ASSERT_COMPILES(c);
  std::vector<std::string> names;
  for (const GraphParam &p : c.graph->params)
    names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"encoder.0.wq", "encoder.0.g", "encoder.1.wq", "encoder.1.g",
                                             "encoder.2.wq", "encoder.2.g"}));
  EXPECT_EQ(countOps(*c.graph, "pe.get_param"), 6u);
  for (const GraphOp &op : c.graph->ops)
    if (op.name == "pe.get_param")
      EXPECT_NE(c.graph->findParam(std::get<std::string>(*op.attr("param"))), nullptr);
}

TEST(Language, LayerIndexReachesSkipBase) {
  Compiled c = compileBody(kEncoder);
  ASSERT_COMPILES(c);
  std::vector<int64_t> bases;
  for (const GraphOp &op : c.graph->ops)
    if (op.name == "pe.attention") {
      EXPECT_EQ(enumAttr(op, "mask"), "skip");
      bases.push_back(intAttr(op, "skip_base"));
    }
  EXPECT_EQ(bases, (std::vector<int64_t>{1, 2, 3}));
}

TEST(Language, OpsInBlocksRecordTheirInstanceAndCallSite) {
  Compiled c = compileBody(kEncoder);
  ASSERT_COMPILES(c);
  std::vector<std::string> scopes;
  for (const GraphOp &op : c.graph->ops) {
    if (op.name != "pe.attention")
      continue;
    scopes.push_back(op.scope);
    ASSERT_EQ(op.callSites.size(), 1u);
    EXPECT_EQ(op.callSites[0].line, 16u); // `let h = encoder(h, layer)`
    EXPECT_EQ(op.loc.line, 12u);          // the attention call in the block
  }
  EXPECT_EQ(scopes, (std::vector<std::string>{"encoder.0", "encoder.1", "encoder.2"}));
  Compiled top = compileBody("output y = gelu(x)");
  ASSERT_COMPILES(top);
  EXPECT_TRUE(outputOp(*top.graph, "y").scope.empty());
  EXPECT_TRUE(outputOp(*top.graph, "y").callSites.empty());
}

TEST(Language, DerivedSeedsDifferPerInstance) {
  Compiled c = compileBody(kEncoder);
  ASSERT_COMPILES(c);
  const GraphParam *w0 = c.graph->findParam("encoder.0.wq");
  const GraphParam *w1 = c.graph->findParam("encoder.1.wq");
  ASSERT_TRUE(w0 && w1);
  int64_t s0 = std::get<int64_t>(*findAttr(w0->initAttrs, "seed"));
  int64_t s1 = std::get<int64_t>(*findAttr(w1->initAttrs, "seed"));
  EXPECT_EQ(s0, derivedSeed("encoder.0.wq"));
  EXPECT_EQ(s1, derivedSeed("encoder.1.wq"));
  EXPECT_NE(s0, s1);
  EXPECT_EQ(w0->init, "normal");
  EXPECT_DOUBLE_EQ(std::get<double>(*findAttr(w0->initAttrs, "mean")), 0.0);
  EXPECT_DOUBLE_EQ(std::get<double>(*findAttr(w0->initAttrs, "std")), 0.02);
}

TEST(Language, ExplicitSeedsAreKeptAndMayUseBlockArguments) {
  Compiled c = compileBody(R"(block b(h, i) {
  param w: [D] = uniform(low = -0.5, high = 0.5, seed = 100 + i)
  return h * w
}
param top: [D] = normal(seed = 5)
output y = b(b(x, 0), 1) * top
)");
  ASSERT_COMPILES(c);
  EXPECT_EQ(std::get<int64_t>(*findAttr(c.graph->findParam("b.0.w")->initAttrs, "seed")), 100);
  EXPECT_EQ(std::get<int64_t>(*findAttr(c.graph->findParam("b.1.w")->initAttrs, "seed")), 101);
  EXPECT_EQ(std::get<int64_t>(*findAttr(c.graph->findParam("top")->initAttrs, "seed")), 5);
}

TEST(Language, NestedBlocksUsePathNames) {
  Compiled c = compileBody(R"(block mlp(h) {
  param w: [D, D] = zeros
  return linear(h, w)
}
block layer(h) {
  return mlp(mlp(h))
}
output y = layer(layer(x))
)");
  ASSERT_COMPILES(c);
  std::vector<std::string> names;
  for (const GraphParam &p : c.graph->params)
    names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"layer.0.mlp.0.w", "layer.0.mlp.1.w", "layer.1.mlp.0.w",
                                             "layer.1.mlp.1.w"}));
}

TEST(Language, BlocksMayReturnNumbersAndTakeKeywordArguments) {
  Compiled c = compileBody("block twice(n) { return 2 * n }\nconst k = twice(n = 21)\noutput y = x * k");
  ASSERT_COMPILES(c);
  EXPECT_EQ(constant(*c.graph, "k"), 42);
}

TEST(Language, BlocksSeeGlobalsButNotTopLevelLets) {
  Compiled ok = compileBody("param w: [D] = ones\nblock b(h) { return h * w + D }\noutput y = b(x)");
  ASSERT_COMPILES(ok);
  Compiled bad = compileBody("let s = x\nblock b(h) { return h + s }\noutput y = b(x)");
  EXPECT_EQ(bad.firstError(), "9:25: 's' is a 'let' binding of the top level, which blocks cannot see (blocks see "
                              "constants, parameters and inputs); pass it as an argument");
}

TEST(Language, LetRebindsInTheEnclosingScope) {
  Compiled c = compileBody("let a = 1\nlet a = a + 1\nblock b(h) {\n  let h = h * 2\n  return h\n}\noutput y = b(x) * a");
  ASSERT_COMPILES(c);
  const GraphOp &y = outputOp(*c.graph, "y");
  EXPECT_DOUBLE_EQ(floatAttr(y, "factor"), 2.0);
}

TEST(Language, SparseSkewSupportFromSeed) {
  Compiled c = compileBody(R"(param p: [202] = zeros
param q: [202] = zeros
output y = sparse_skew(p, dim = 64, fraction = 0.1, seed = 11)
output z = sparse_skew(q, dim = 64, fraction = 0.1, seed = 11)
output u = sparse_skew(q, dim = 64, fraction = 0.1)
)");
  ASSERT_COMPILES(c);
  const auto &y = std::get<std::vector<int64_t>>(*outputOp(*c.graph, "y").attr("support"));
  const auto &z = std::get<std::vector<int64_t>>(*outputOp(*c.graph, "z").attr("support"));
  const GraphOp &u = outputOp(*c.graph, "u");
  EXPECT_EQ(y.size(), static_cast<size_t>(sparsePairs(64, 0.1)));
  EXPECT_TRUE(std::is_sorted(y.begin(), y.end()));
  EXPECT_EQ(std::set<int64_t>(y.begin(), y.end()).size(), y.size());
  EXPECT_EQ(y, z); // same seed, same support
  EXPECT_EQ(y, sparseSkewSupport(64, 202, 11));
  // Without a seed: derived from the parameter's full name.
  EXPECT_EQ(intAttr(u, "seed"), derivedSeed("q"));
  EXPECT_EQ(std::get<std::vector<int64_t>>(*u.attr("support")), sparseSkewSupport(64, 202, derivedSeed("q")));
}

TEST(Language, LossTermsBecomeScalarOps) {
  Compiled c = compileSource(R"(model m
input img: f32[B, 4]
input label: i32[B]
param w: [4, 3] = zeros
param L: [2, 4, 4] = zeros
output logits = linear(img, w)
loss cross_entropy(logits, label) + 0.01 * commutator_norm(L)
optimizer sgd(lr = 0.1)
)");
  ASSERT_COMPILES(c);
  const ModelGraph &g = *c.graph;
  const GraphOp *loss = g.definingOp(g.lossId);
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->name, "pe.add");
  EXPECT_TRUE(loss->result.dims.empty());
  EXPECT_EQ(g.definingOp(loss->operands[0])->name, "pe.cross_entropy");
  const GraphOp *scaled = g.definingOp(loss->operands[1]);
  EXPECT_EQ(scaled->name, "pe.scale");
  EXPECT_DOUBLE_EQ(floatAttr(*scaled, "factor"), 0.01);
  EXPECT_EQ(g.definingOp(scaled->operands[0])->name, "pe.commutator_norm");
}

TEST(Language, GraphIsTopologicalAndValuesAreConsistent) {
  Compiled c = compileBody(kEncoder);
  ASSERT_COMPILES(c);
  const ModelGraph &g = *c.graph;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const GraphOp &op = g.ops[i];
    EXPECT_EQ(g.values[op.resultId].opIndex, static_cast<int>(i));
    EXPECT_EQ(g.values[op.resultId].type, op.result);
    for (int operand : op.operands) {
      ASSERT_LT(operand, op.resultId);
      const GraphOp *def = g.definingOp(operand);
      if (def)
        EXPECT_LT(def - g.ops.data(), static_cast<ptrdiff_t>(i));
    }
    EXPECT_GT(op.loc.line, 0u);
  }
  for (const GraphInput &input : g.inputs) {
    EXPECT_EQ(g.values[input.valueId].inputIndex, static_cast<int>(&input - g.inputs.data()));
    EXPECT_TRUE(input.type.hasBatch());
  }
}

TEST(Language, StatementsCutShortBySyntaxErrorsStillDefineTheirNames) {
  Compiled c = compileBody("input a f32[B, 4]\nparam w: [4 = zeros\noutput y = gelu(a) * w");
  std::vector<std::string> expected = {"8:9: expected ':' after the input name, found identifier 'f32'",
                                       "9:13: expected ',' or ']' after a dimension, found '='"};
  EXPECT_EQ(c.errors(), expected);
}

TEST(Language, InitializersAndFrozen) {
  Compiled c = compileBody(R"(param a: [2] = zeros
param b: [2] = ones()
param d: [2] = constant(0.5) frozen
param e: [2] = uniform
param f: [2] = normal
)");
  ASSERT_COMPILES(c);
  const ModelGraph &g = *c.graph;
  EXPECT_EQ(g.findParam("a")->init, "zeros");
  EXPECT_TRUE(g.findParam("a")->initAttrs.empty());
  EXPECT_EQ(g.findParam("b")->init, "ones");
  EXPECT_EQ(g.findParam("d")->init, "constant");
  EXPECT_TRUE(g.findParam("d")->frozen);
  EXPECT_FALSE(g.findParam("a")->frozen);
  EXPECT_DOUBLE_EQ(std::get<double>(*findAttr(g.findParam("d")->initAttrs, "value")), 0.5);
  EXPECT_DOUBLE_EQ(std::get<double>(*findAttr(g.findParam("e")->initAttrs, "low")), -1.0);
  EXPECT_DOUBLE_EQ(std::get<double>(*findAttr(g.findParam("f")->initAttrs, "std")), 1.0);
  EXPECT_EQ(std::get<int64_t>(*findAttr(g.findParam("f")->initAttrs, "seed")), derivedSeed("f"));
}

} // namespace
