//===- SemaShapesTest.cpp - shape inference of every built-in -------------===//
//
// Each test compiles a small model (see withModel: x is f32[B, 16, 64]) and
// checks the op's result type and attributes, then the shape errors.
//
//===----------------------------------------------------------------------===//

#include "TestHelpers.h"

#include <cmath>

using namespace stringc;
using namespace stringc::test;

namespace {

using Dims = std::vector<int64_t>;

/// Compiles `body` and returns the op of output `y`.
GraphOp opOf(const std::string &body) {
  Compiled c = compileBody(body);
  if (!c.graph)
    throw std::runtime_error(c.printed());
  return outputOp(*c.graph, "y");
}

Dims dimsOf(const std::string &body) { return opOf(body).result.dims; }

/// The first error of compiling `body`, with the body's own line numbers
/// (withModel puts the body at line 8).
std::string errorOf(const std::string &body) {
  Compiled c = compileBody(body);
  if (c.graph)
    return "<compiled>";
  std::string e = c.firstError();
  size_t colon = e.find(':');
  int line = std::stoi(e.substr(0, colon)) - 7;
  return std::to_string(line) + e.substr(colon);
}

TEST(Shapes, Linear) {
  GraphOp op = opOf("param w: [64, 10] = zeros\nparam b: [10] = zeros\noutput y = linear(x, w, b)");
  EXPECT_EQ(op.name, "pe.linear");
  EXPECT_EQ(op.operands.size(), 3u);
  EXPECT_EQ(op.result.dims, (Dims{B, 16, 10}));
  EXPECT_EQ(dimsOf("param w: [64, 3] = zeros\noutput y = linear(x, w)"), (Dims{B, 16, 3}));
  EXPECT_EQ(errorOf("param w1: [128, 256] = zeros\noutput y = linear(x, w1)"),
            "2:22: linear: input has 64 features but weight 'w1' expects 128 (weight shape [128, 256])");
  EXPECT_EQ(errorOf("param w: [64, 8] = zeros\nparam b: [9] = zeros\noutput y = linear(x, w, b)"),
            "3:25: linear: bias 'b' must be [8] (the weight has 8 outputs), found [9]");
  EXPECT_EQ(errorOf("param w: [64] = zeros\noutput y = linear(x, w)"),
            "2:22: linear: weight 'w' must be [I, O] (rank 2), found f32[64]");
  EXPECT_EQ(errorOf("output y = linear(x, x)"),
            "1:22: linear: weight 'x' must be [I, O] (rank 2), found f32[B, 16, 64]");
}

TEST(Shapes, LayerNormActivationsMean) {
  GraphOp ln = opOf("param g: [64] = ones\nparam b: [64] = zeros\noutput y = layer_norm(x, g, b, eps = 1e-6)");
  EXPECT_EQ(ln.name, "pe.layer_norm");
  EXPECT_EQ(ln.result.dims, (Dims{B, 16, 64}));
  EXPECT_DOUBLE_EQ(floatAttr(ln, "epsilon"), 1e-6);
  EXPECT_DOUBLE_EQ(floatAttr(opOf("param g: [64] = ones\noutput y = layer_norm(x, g, g)"), "epsilon"), 1e-5);
  EXPECT_EQ(errorOf("param g: [32] = ones\noutput y = layer_norm(x, g, g)"),
            "2:26: layer_norm: gain 'g' must be [64] (the input's last dimension is 64), found [32]");

  GraphOp gelu = opOf("output y = gelu(x)");
  EXPECT_EQ(gelu.name, "pe.gelu");
  EXPECT_EQ(std::get<bool>(*gelu.attr("approximate")), false);
  EXPECT_EQ(opOf("output y = relu(x)").name, "pe.relu");

  GraphOp all = opOf("output y = mean(x)");
  EXPECT_EQ(all.result.dims, Dims{});
  EXPECT_EQ(all.attr("axis"), nullptr);
  GraphOp axis1 = opOf("output y = mean(x, axis = 1)");
  EXPECT_EQ(axis1.result.dims, (Dims{B, 64}));
  EXPECT_EQ(intAttr(axis1, "axis"), 1);
  EXPECT_EQ(intAttr(opOf("output y = mean(x, axis = -1)"), "axis"), 2);
  EXPECT_EQ(errorOf("output y = mean(x, axis = 3)"), "1:20: mean: axis 3 is out of range for f32[B, 16, 64] (rank 3)");
}

TEST(Shapes, PatchEmbedAndTokens) {
  GraphOp pe = opOf("param w: [16, 32] = zeros\nparam b: [32] = zeros\noutput y = patch_embed(img, w, b, patch = 4)");
  EXPECT_EQ(pe.name, "pe.patch_embed");
  EXPECT_EQ(pe.result.dims, (Dims{B, 49, 32}));
  EXPECT_EQ(intAttr(pe, "patch"), 4);
  EXPECT_EQ(errorOf("param w: [16, 32] = zeros\nparam b: [32] = zeros\noutput y = patch_embed(img, w, b, patch = 5)"),
            "3:35: patch_embed: patch = 5 does not divide the image size 28x28");
  EXPECT_EQ(errorOf("param w: [15, 32] = zeros\nparam b: [32] = zeros\noutput y = patch_embed(img, w, b, patch = 4)"),
            "3:29: patch_embed: weight 'w' has 15 rows but a 1x4x4 patch has 16 values (weight shape [15, 32])");
  EXPECT_EQ(errorOf("param w: [16, 32] = zeros\nparam b: [32] = zeros\noutput y = patch_embed(img, w, b)"),
            "3:12: patch_embed: missing argument 'patch'");

  GraphOp te = opOf("param table: [256, 32] = zeros\noutput y = token_embed(ids, table)");
  EXPECT_EQ(te.name, "pe.token_embed");
  EXPECT_EQ(te.result.dims, (Dims{B, 16, 32}));
  EXPECT_EQ(errorOf("param table: [256, 32] = zeros\noutput y = token_embed(x, table)"),
            "2:24: token_embed: argument 'ids' must be an i32 tensor, found a tensor f32[B, 16, 64]");

  GraphOp ct = opOf("param cls: [64] = zeros\noutput y = class_token(x, cls)");
  EXPECT_EQ(ct.result.dims, (Dims{B, 17, 64}));
  EXPECT_EQ(errorOf("param cls: [32] = zeros\noutput y = class_token(x, cls)"),
            "2:27: class_token: class token 'cls' must be [64] (the model width is 64), found [32]");

  GraphOp st = opOf("output y = select_token(x, index = 3)");
  EXPECT_EQ(st.result.dims, (Dims{B, 64}));
  EXPECT_EQ(intAttr(st, "index"), 3);
  EXPECT_EQ(intAttr(opOf("output y = select_token(x)"), "index"), 0);
  EXPECT_EQ(intAttr(opOf("output y = select_token(x, index = -1)"), "index"), 15);
  EXPECT_EQ(errorOf("output y = select_token(x, index = 16)"),
            "1:28: select_token: index 16 is out of range for 16 tokens");
}

TEST(Shapes, CrossEntropy) {
  Compiled c = compileSource("model m\ninput x: f32[B, 8]\ninput label: i32[B]\nparam w: [8, 10] = zeros\n"
                             "loss cross_entropy(linear(x, w), label)\noptimizer sgd(lr = 1)\n");
  ASSERT_COMPILES(c);
  const GraphOp *ce = c.graph->definingOp(c.graph->lossId);
  ASSERT_NE(ce, nullptr);
  EXPECT_EQ(ce->name, "pe.cross_entropy");
  EXPECT_EQ(ce->result, (TensorType{DType::F32, {}}));
  EXPECT_EQ(c.graph->definingOp(ce->operands[0])->result.dims, (Dims{B, 10}));
  EXPECT_EQ(ce->operands[1], c.graph->inputs[1].valueId);
  EXPECT_EQ(errorOf("param w: [64, 10] = zeros\noutput y = cross_entropy(linear(x, w), label)"),
            "2:40: cross_entropy: labels 'label' must have shape [B, 16] (the logits' shape [B, 16, 10] without its last dimension), found [B]");
  EXPECT_EQ(errorOf("output y = cross_entropy(x, x)"),
            "1:29: cross_entropy: argument 'labels' must be an i32 tensor, found a tensor f32[B, 16, 64]");
}

TEST(Shapes, Positions) {
  GraphOp seq = opOf("output y = seq_positions(length = 16, special = 1)");
  EXPECT_EQ(seq.name, "pe.seq_positions");
  EXPECT_TRUE(seq.operands.empty());
  EXPECT_EQ(seq.result.dims, (Dims{17, 1}));
  EXPECT_EQ(intAttr(seq, "special"), 1);
  GraphOp grid = opOf("output y = grid_positions(rows = 7, cols = 7, special = 1)");
  EXPECT_EQ(grid.result.dims, (Dims{50, 2}));
  EXPECT_EQ(intAttr(grid, "cols"), 7);
  EXPECT_EQ(intAttr(opOf("output y = grid_positions(rows = 2, cols = 3)"), "special"), 0);
  EXPECT_EQ(errorOf("output y = seq_positions(length = 0)"), "1:26: seq_positions: length must be at least 1, found 0");

  GraphOp sin = opOf("output y = sinusoidal(length = 16, dim = 64)");
  EXPECT_EQ(sin.result.dims, (Dims{16, 64}));
  EXPECT_DOUBLE_EQ(floatAttr(sin, "base"), 10000.0);
  EXPECT_EQ(errorOf("output y = sinusoidal(length = 16, dim = 63)"),
            "1:36: sinusoidal: dim must be even (sin/cos pairs), found 63");

  GraphOp rel = opOf("output y = relative_positions(grid_positions(rows = 2, cols = 2, special = 1))");
  EXPECT_EQ(rel.result.dims, (Dims{5, 5, 2}));
  EXPECT_EQ(errorOf("output y = relative_positions(x)"),
            "1:31: relative_positions: positions 'x' must be [T, A] (rank 2), found f32[B, 16, 64]");
}

TEST(Shapes, RopeFrequencies) {
  GraphOp f = opOf("output y = rope_freqs(dim = 64, heads = 4)");
  EXPECT_EQ(f.name, "pe.rope_freqs");
  EXPECT_EQ(f.result.dims, (Dims{32, 1}));
  EXPECT_EQ(enumAttr(f, "kind"), "seq");
  EXPECT_EQ(intAttr(f, "heads"), 4);
  EXPECT_DOUBLE_EQ(floatAttr(f, "base"), 10000.0);
  GraphOp ax = opOf("output y = rope_freqs_axial(dim = 64, heads = 4)");
  EXPECT_EQ(ax.result.dims, (Dims{32, 2}));
  EXPECT_EQ(enumAttr(ax, "kind"), "axial");
  EXPECT_DOUBLE_EQ(floatAttr(ax, "base"), 100.0);
  EXPECT_EQ(errorOf("output y = rope_freqs(dim = 60, heads = 4)"),
            "1:23: rope_freqs: the head dimension 15 (dim 60 / heads 4) is odd; rotary pairs need an even head dimension");
  EXPECT_EQ(errorOf("output y = rope_freqs(dim = 64, heads = 5)"), "1:33: rope_freqs: heads = 5 does not divide dim = 64");
  EXPECT_EQ(errorOf("output y = rope_freqs_axial(dim = 24, heads = 4)"),
            "1:29: rope_freqs_axial: the head dimension 6 (dim 24 / heads 4) is not a multiple of 4; each head splits its 3 rotary pairs evenly between the x and y axes");
}

TEST(Shapes, RopeModes) {
  GraphOp seq = opOf("output y = rope(x, seq_positions(length = 16), rope_freqs(dim = 64, heads = 4))");
  EXPECT_EQ(seq.name, "pe.rope");
  EXPECT_EQ(seq.result.dims, (Dims{B, 16, 64}));
  EXPECT_EQ(enumAttr(seq, "mode"), "seq");
  EXPECT_EQ(enumAttr(opOf("output y = rope(x, grid_positions(rows = 4, cols = 4), rope_freqs_axial(dim = 64, heads = 4))"),
                     "mode"),
            "axial");
  EXPECT_EQ(enumAttr(opOf("param f: [32, 2] = normal(std = 0.1)\noutput y = rope(x, grid_positions(rows = 4, cols = 4), f)"),
                     "mode"),
            "mixed");
  // Axial frequencies scaled are no longer the fixed table: mixed.
  EXPECT_EQ(enumAttr(opOf("output y = rope(x, grid_positions(rows = 4, cols = 4), 2 * rope_freqs_axial(dim = 64))"),
                     "mode"),
            "mixed");
}

TEST(Shapes, RopeErrors) {
  EXPECT_EQ(errorOf("output y = rope(x, seq_positions(length = 16), rope_freqs(dim = 32))"),
            "1:48: rope: frequencies must have 32 rows (one per rotary pair of the width-64 input), found 16");
  EXPECT_EQ(errorOf("output y = rope(x, seq_positions(length = 15), rope_freqs(dim = 64))"),
            "1:20: rope: positions must have 16 rows (one per token of x), found 15");
  EXPECT_EQ(errorOf("output y = rope(x, seq_positions(length = 16), rope_freqs_axial(dim = 64))"),
            "1:48: rope: frequencies must have 1 column (one per axis of the positions), found 2");
  EXPECT_EQ(errorOf("param w: [64, 63] = zeros\nlet q = linear(x, w)\noutput y = rope(q, seq_positions(length = 16), rope_freqs(dim = 62))"),
            "3:17: rope: input 'q' has an odd width 63; rotary pairs need an even width");
}

TEST(Shapes, Householder) {
  GraphOp h = opOf("param f1: [32, 2] = zeros\nparam f2: [32, 2] = zeros\noutput y = householder(x, grid_positions(rows = 4, cols = 4), f1, f2)");
  EXPECT_EQ(h.name, "pe.householder");
  EXPECT_EQ(h.operands.size(), 4u);
  EXPECT_EQ(h.result.dims, (Dims{B, 16, 64}));
  EXPECT_EQ(errorOf("param f1: [32, 2] = zeros\nparam f2: [31, 2] = zeros\noutput y = householder(x, grid_positions(rows = 4, cols = 4), f1, f2)"),
            "3:67: householder: second frequencies 'f2' must have 32 rows (one per rotary pair of the width-64 input), found 31");
}

TEST(Shapes, SkewAndCayley) {
  GraphOp s = opOf("param p: [2016] = zeros\noutput y = skew(p, dim = 64)");
  EXPECT_EQ(s.name, "pe.skew");
  EXPECT_EQ(s.result.dims, (Dims{64, 64}));
  EXPECT_EQ(intAttr(s, "dim"), 64);
  EXPECT_EQ(dimsOf("param p: [3, 6] = zeros\noutput y = skew(p, dim = 4)"), (Dims{3, 4, 4}));
  EXPECT_EQ(errorOf("param p: [2000] = zeros\noutput y = skew(p, dim = 64)"),
            "2:17: skew: parameters 'p' must have 2016 entries in the last dimension (dim = 64 needs 64*63/2), found shape [2000]");

  GraphOp c = opOf("param p: [2016] = zeros\noutput y = cayley(x, skew(p, dim = 64))");
  EXPECT_EQ(c.name, "pe.cayley");
  EXPECT_EQ(c.result.dims, (Dims{B, 16, 64}));
  EXPECT_EQ(errorOf("param p: [496] = zeros\nlet S = skew(p, dim = 32)\noutput y = cayley(x, S)"),
            "3:22: cayley: skew matrix 'S' must be [64, 64] (the last dimension of x is 64), found [32, 32]");
}

TEST(Shapes, SparseSkew) {
  GraphOp s = opOf("param p: [202] = zeros\noutput y = sparse_skew(p, dim = 64, fraction = 0.1, seed = 7)");
  EXPECT_EQ(s.name, "pe.sparse_skew");
  EXPECT_EQ(s.result.dims, (Dims{64, 64}));
  EXPECT_EQ(intAttr(s, "seed"), 7);
  EXPECT_DOUBLE_EQ(floatAttr(s, "fraction"), 0.1);
  const auto &support = std::get<std::vector<int64_t>>(*s.attr("support"));
  EXPECT_EQ(support.size(), 202u);
  EXPECT_EQ(errorOf("param p: [200] = zeros\noutput y = sparse_skew(p, dim = 64, fraction = 0.1, seed = 7)"),
            "2:24: sparse_skew: dim = 64 and fraction = 0.1 keep 202 of the 2016 upper-triangle entries, so parameters 'p' must be [202], found [200]");
  EXPECT_EQ(errorOf("param p: [1] = zeros\noutput y = sparse_skew(p, dim = 64, fraction = 0, seed = 7)"),
            "2:37: sparse_skew: fraction must be in (0, 1], found 0");
  EXPECT_EQ(errorOf("param p: [1] = zeros\noutput y = sparse_skew(p, dim = 64, fraction = 1.5, seed = 7)"),
            "2:37: sparse_skew: fraction must be in (0, 1], found 1.5");
}

TEST(Shapes, SparseSkewSupportLimit) {
  // Supports are drawn at compile time and kept in the IR: 2^20 entries in
  // all, however many calls (a loop of large ones took hours).
  EXPECT_EQ(errorOf("param p: [2096128] = zeros\noutput y = sparse_skew(p, dim = 2048, fraction = 1, seed = 7)"),
            "2:39: sparse_skew: 2096128 kept entries is more than the limit of 1048576");
  EXPECT_EQ(errorOf("param p: [523776] = zeros\nparam q: [2016] = zeros\n"
                    "for i in 0..2 { let s = sparse_skew(p, dim = 1024, fraction = 1, seed = i) }\n"
                    "output y = sparse_skew(q, dim = 64, fraction = 1, seed = 7)"),
            "4:12: sparse_skew: the model's sparse supports would hold 1049568 entries in all, more than the "
            "limit of 1048576");
}

TEST(Shapes, GeneratorsAndRotations) {
  GraphOp g = opOf("param L: [2, 16, 16] = zeros\nlet r = relative_positions(seq_positions(length = 16))\noutput y = generator_exp(relative_positions(grid_positions(rows = 4, cols = 4)), L)");
  EXPECT_EQ(g.name, "pe.generator_exp");
  EXPECT_EQ(g.result.dims, (Dims{16, 16, 16, 16}));
  EXPECT_EQ(errorOf("param L: [2, 16, 16] = zeros\noutput y = generator_exp(relative_positions(seq_positions(length = 16)), L)"),
            "2:74: generator_exp: the coordinates have 1 axis (shape [16, 16, 1]), so generators 'L' must be [1, d, d], found [2, 16, 16]");
  EXPECT_EQ(errorOf("param L: [2, 16, 8] = zeros\noutput y = commutator_norm(L)"),
            "2:28: commutator_norm: generators 'L' must be square matrices [K, d, d], found [2, 16, 8]");

  GraphOp cn = opOf("param L: [2, 16, 16] = zeros\noutput y = commutator_norm(L)");
  EXPECT_EQ(cn.result.dims, Dims{});
  EXPECT_EQ(errorOf("param L: [1, 16, 16] = zeros\noutput y = commutator_norm(L)"),
            "2:28: commutator_norm: generators 'L' must hold at least 2 generators (a commutator needs a pair), found [1, 16, 16]");
  EXPECT_EQ(errorOf("param L: [16, 16, 16] = zeros\noutput y = generator_exp(x, L)"),
            "2:26: generator_exp: coordinates 'x' must not have the batch dimension B, found f32[B, 16, 64]");

  GraphOp ar = opOf("param R: [16, 16, 16] = zeros\noutput y = apply_rotation(x, R, heads = 4)");
  EXPECT_EQ(ar.name, "pe.apply_rotation");
  EXPECT_EQ(intAttr(ar, "heads"), 4);
  EXPECT_EQ(ar.result.dims, (Dims{B, 16, 64}));
  EXPECT_EQ(errorOf("param R: [16, 8, 8] = zeros\noutput y = apply_rotation(x, R, heads = 4)"),
            "2:30: apply_rotation: rotations 'R' must be [16, 16, 16] ([T, Dh, Dh] with T = 16 tokens and Dh = 64 / 4), found [16, 8, 8]");

  EXPECT_EQ(dimsOf("param g: [64] = zeros\noutput y = spd_gate(x, g)"), (Dims{B, 16, 64}));
  EXPECT_EQ(dimsOf("param g: [16, 64] = zeros\noutput y = spd_gate(x, g)"), (Dims{B, 16, 64}));
  EXPECT_EQ(errorOf("param g: [8, 64] = zeros\noutput y = spd_gate(x, g)"),
            "2:24: spd_gate: gate 'g' must be [64] or [16, 64] (per width or per token and width), found [8, 64]");
}

TEST(Shapes, Attention) {
  GraphOp a = opOf("output y = attention(x, x, x, heads = 4)");
  EXPECT_EQ(a.name, "pe.attention");
  EXPECT_EQ(a.result.dims, (Dims{B, 16, 64}));
  EXPECT_EQ(intAttr(a, "heads"), 4);
  EXPECT_DOUBLE_EQ(floatAttr(a, "scale"), 1.0 / std::sqrt(16.0));
  EXPECT_EQ(enumAttr(a, "mask"), "none");
  EXPECT_EQ(a.attr("skip_base"), nullptr);
  EXPECT_EQ(a.operands.size(), 3u);

  GraphOp c = opOf("output y = attention(x, x, x, heads = 2, mask = causal, scale = 0.5)");
  EXPECT_EQ(enumAttr(c, "mask"), "causal");
  EXPECT_DOUBLE_EQ(floatAttr(c, "scale"), 0.5);

  GraphOp s = opOf("output y = attention(x, x, x, heads = 1, mask = skip(3))");
  EXPECT_EQ(enumAttr(s, "mask"), "skip");
  EXPECT_EQ(intAttr(s, "skip_base"), 3);

  GraphOp r = opOf("param L: [1, 16, 16] = zeros\nlet R = generator_exp(relative_positions(seq_positions(length = 16)), L)\n"
                   "output y = attention(x, x, x, heads = 4, relative = R)");
  EXPECT_EQ(r.operands.size(), 4u);

  EXPECT_EQ(errorOf("output y = attention(x, x, x, heads = 5)"),
            "1:31: attention: heads = 5 does not divide the model width 64");
  EXPECT_EQ(errorOf("output y = attention(x, x, select_token(x), heads = 4)"),
            "1:28: attention: values must have the shape of the queries [B, 16, 64], found [B, 64]");
  EXPECT_EQ(errorOf("output y = attention(x, x, x, heads = 4, mask = sometimes)"),
            "1:49: attention: mask must be none, causal or skip(n)");
  EXPECT_EQ(errorOf("output y = attention(x, x, x, heads = 4, mask = skip(-1))"),
            "1:54: attention: skip(n) needs n >= 0, found -1");
  EXPECT_EQ(errorOf("param L: [1, 8, 8] = zeros\nlet R = generator_exp(relative_positions(seq_positions(length = 16)), L)\n"
                    "output y = attention(x, x, x, heads = 4, relative = R)"),
            "3:42: attention: relative rotations 'R' must be [16, 16, 16, 16] ([T, T, Dh, Dh] with T = 16 tokens and Dh = 64 / 4), found [16, 16, 8, 8]");
}

TEST(Shapes, ArithmeticOnTensors) {
  GraphOp add = opOf("param b: [64] = zeros\noutput y = x + b");
  EXPECT_EQ(add.name, "pe.add");
  EXPECT_EQ(add.result.dims, (Dims{B, 16, 64}));
  GraphOp radd = opOf("param b: [16, 64] = zeros\noutput y = b - x");
  EXPECT_EQ(radd.name, "pe.sub");
  EXPECT_EQ(radd.result.dims, (Dims{B, 16, 64}));
  EXPECT_EQ(opOf("output y = x * x").name, "pe.mul");

  GraphOp scale = opOf("output y = 2 * x");
  EXPECT_EQ(scale.name, "pe.scale");
  EXPECT_DOUBLE_EQ(floatAttr(scale, "factor"), 2.0);
  EXPECT_DOUBLE_EQ(floatAttr(scale, "bias"), 0.0);
  GraphOp div = opOf("output y = x / 4");
  EXPECT_DOUBLE_EQ(floatAttr(div, "factor"), 0.25);
  GraphOp shift = opOf("output y = x + 1");
  EXPECT_DOUBLE_EQ(floatAttr(shift, "factor"), 1.0);
  EXPECT_DOUBLE_EQ(floatAttr(shift, "bias"), 1.0);
  GraphOp minus = opOf("output y = x - 3");
  EXPECT_DOUBLE_EQ(floatAttr(minus, "bias"), -3.0);
  GraphOp rminus = opOf("output y = 3 - x");
  EXPECT_DOUBLE_EQ(floatAttr(rminus, "factor"), -1.0);
  EXPECT_DOUBLE_EQ(floatAttr(rminus, "bias"), 3.0);
  GraphOp neg = opOf("output y = -x");
  EXPECT_DOUBLE_EQ(floatAttr(neg, "factor"), -1.0);

  EXPECT_EQ(errorOf("param b: [32] = zeros\noutput y = x + b"),
            "2:14: cannot add f32[B, 16, 64] and f32[32]: one shape must be a trailing part of the other");
  EXPECT_EQ(errorOf("output y = x / x"), "1:14: cannot divide a tensor by a tensor (only by a number)");
  EXPECT_EQ(errorOf("output y = 1 / x"), "1:14: cannot divide a number by a tensor");
  EXPECT_EQ(errorOf("output y = ids + 1"),
            "1:12: cannot add i32 tensors: arithmetic needs f32 (token ids and labels are only for token_embed and cross_entropy)");
}

} // namespace
