// Fused ops by composition (runtime/src/ops/Compositions.h): each row of
// the table, run by the generic reference kernel on random inputs, gives
// the bits of its library ops' reference kernels called one after the
// other (the oracle here, written out per op), for each form of the op
// (bias or not, gelu forms, masks, lse or not); its results come out whole
// from buffers full of NaN; the reference set runs the rows (linear_residual
// keeps its own kernel, within an ulp); the fused op's contract runs
// first; malformed rows are refused.
#include "../src/ops/Compositions.h"
#include "ErrorOf.h"
#include "OpCall.h"

#include "stringrt/Error.h"
#include "stringrt/KernelSet.h"
#include "stringrt/OpSchema.h"
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace stringrt {
namespace {

using ref::AttentionMask;
using test::errorOf;
using TF = ref::Tensor<float>;
using Shape = std::vector<int64_t>;

TF randomTensor(const Shape &shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  TF t = TF::zeros(shape);
  for (float &x : t.values)
    x = dist(rng);
  return t;
}

// A genuine cos/sin table [T, P, 2].
TF ropeTable(int64_t T, int64_t P, uint32_t seed) {
  const TF angles = randomTensor({T, P}, seed, -6.0f, 6.0f);
  TF table = TF::zeros({T, P, 2});
  for (int64_t i = 0; i < T * P; ++i) {
    table.values[2 * i] = std::cos(angles.values[i]);
    table.values[2 * i + 1] = std::sin(angles.values[i]);
  }
  return table;
}

// One op on the given operands, its results (first filled with NaN), run by
// an adapter.
using OneOp = test::OpCall;

// Every form of every composed op, with random inputs.
std::vector<OneOp> cases() {
  std::vector<OneOp> all;
  uint32_t seed = 100;
  const Shape x{2, 3, 4}, y{2, 3, 5};
  for (bool bias : {false, true}) {
    for (bool approximate : {false, true}) {
      OneOp c{OpCode::LinearGelu,
              {randomTensor(x, seed++), randomTensor({4, 5}, seed++)},
              {y, y},
              {{"approximate", approximate}},
              std::string("linear_gelu") + (bias ? " bias" : "") + (approximate ? " tanh" : "")};
      if (bias)
        c.operands.push_back(randomTensor({5}, seed++));
      if (!approximate)
        c.attrs.clear(); // the ODS default
      all.push_back(std::move(c));
    }
    OneOp r{OpCode::LinearResidual,
            {randomTensor(y, seed++), randomTensor(x, seed++), randomTensor({4, 5}, seed++)},
            {y},
            {},
            std::string("linear_residual") + (bias ? " bias" : "")};
    if (bias)
      r.operands.push_back(randomTensor({5}, seed++));
    all.push_back(std::move(r));
  }
  all.push_back({OpCode::LinearGradInputAcc,
                 {randomTensor(x, seed++), randomTensor(y, seed++), randomTensor({4, 5}, seed++)},
                 {x},
                 {},
                 "linear_grad_input_acc"});
  for (bool epsilon : {false, true}) {
    const Shape n{2, 3, 8};
    OneOp c{OpCode::LayerNormGradAcc,
            {randomTensor(n, seed++), randomTensor(n, seed++), randomTensor({8}, seed++),
             randomTensor(n, seed++)},
            {n, {8}, {8}},
            {},
            std::string("layer_norm_grad_acc") + (epsilon ? " epsilon" : "")};
    if (epsilon)
      c.attrs["epsilon"] = 1e-3;
    all.push_back(std::move(c));
  }
  const Shape q{2, 4, 8};
  for (const char *mask : {"none", "causal"}) {
    const std::map<std::string, AttrValue> attrs = {
        {"heads", int64_t(2)}, {"scale", 0.7}, {"mask", std::string(mask)}};
    for (bool lse : {false, true}) {
      OneOp c{OpCode::RopeAttention,
              {randomTensor(q, seed++), randomTensor(q, seed++), randomTensor(q, seed++),
               ropeTable(4, 4, seed++)},
              {q},
              attrs,
              std::string("rope_attention ") + mask + (lse ? " lse" : "")};
      if (lse)
        c.results.push_back({2, 2, 4});
      all.push_back(std::move(c));
    }
    all.push_back({OpCode::RopeAttentionGrad,
                   {randomTensor(q, seed++), randomTensor(q, seed++), randomTensor(q, seed++),
                    ropeTable(4, 4, seed++), randomTensor(q, seed++),
                    randomTensor({2, 2, 4}, seed++), randomTensor(q, seed++)},
                   {q, q, q},
                   attrs,
                   std::string("rope_attention_grad ") + mask});
  }
  return all;
}

using ref::OptionalInput;
using ref::OptionalOutput;

OptionalInput<float> optionalOperand(const OneOp &c, size_t k) {
  if (k < c.operands.size())
    return c.operands[k].cref();
  return std::nullopt;
}

AttentionMask maskOf(const OneOp &c) {
  return std::get<std::string>(c.attrs.at("mask")) == "causal" ? AttentionMask::Causal
                                                               : AttentionMask::None;
}

// The oracle: the op's library kernels called one after the other, in
// float, as docs/dialect.md states the op.
std::vector<TF> oracle(const OneOp &c) {
  const std::vector<TF> &in = c.operands;
  std::vector<TF> out;
  for (const Shape &shape : c.results)
    out.push_back(TF::zeros(shape));
  auto add = [](const TF &lhs, const TF &rhs, TF &sum) {
    for (size_t i = 0; i < sum.values.size(); ++i)
      sum.values[i] = lhs.values[i] + rhs.values[i];
  };
  switch (c.code) {
  case OpCode::LinearGelu: {
    const bool approximate = c.attrs.count("approximate") != 0;
    ref::linear<float>(in[0].cref(), in[1].cref(), optionalOperand(c, 2), out[1].ref());
    ref::gelu<float>(out[1].cref(), approximate, out[0].ref());
    break;
  }
  case OpCode::LinearResidual: {
    TF l = TF::zeros(c.results[0]);
    ref::linear<float>(in[1].cref(), in[2].cref(), optionalOperand(c, 3), l.ref());
    add(in[0], l, out[0]);
    break;
  }
  case OpCode::LinearGradInputAcc: {
    TF g = TF::zeros(c.results[0]);
    ref::linearGradInput<float>(in[1].cref(), in[2].cref(), g.ref());
    add(in[0], g, out[0]);
    break;
  }
  case OpCode::LayerNormGradAcc: {
    const double epsilon =
        c.attrs.count("epsilon") ? std::get<double>(c.attrs.at("epsilon")) : 1e-5;
    TF g = TF::zeros(c.results[0]);
    ref::layerNormGrad<float>(in[1].cref(), in[2].cref(), in[3].cref(), epsilon, g.ref(),
                              out[1].ref(), out[2].ref());
    add(in[0], g, out[0]);
    break;
  }
  case OpCode::RopeAttention: {
    TF qr = TF::zeros(in[0].shape), kr = TF::zeros(in[1].shape);
    ref::ropeApply<float>(in[0].cref(), in[3].cref(), false, qr.ref());
    ref::ropeApply<float>(in[1].cref(), in[3].cref(), false, kr.ref());
    OptionalOutput<float> lse;
    if (out.size() > 1)
      lse = out[1].ref();
    ref::attention<float>(qr.cref(), kr.cref(), in[2].cref(), std::nullopt, 2, 0.7, maskOf(c), 0,
                          out[0].ref(), lse);
    break;
  }
  case OpCode::RopeAttentionGrad: {
    TF qr = TF::zeros(in[0].shape), kr = TF::zeros(in[1].shape);
    ref::ropeApply<float>(in[0].cref(), in[3].cref(), false, qr.ref());
    ref::ropeApply<float>(in[1].cref(), in[3].cref(), false, kr.ref());
    TF dqr = TF::zeros(in[0].shape), dkr = TF::zeros(in[1].shape);
    ref::attentionGrad<float>(qr.cref(), kr.cref(), in[2].cref(), in[6].cref(), std::nullopt, 2,
                              0.7, maskOf(c), 0, dqr.ref(), dkr.ref(), out[2].ref(),
                              std::nullopt);
    ref::ropeApply<float>(dqr.cref(), in[3].cref(), true, out[0].ref());
    ref::ropeApply<float>(dkr.cref(), in[3].cref(), true, out[1].ref());
    break;
  }
  default:
    ADD_FAILURE() << "no oracle for " << opName(c.code);
  }
  return out;
}

bool sameBits(const TF &a, const TF &b) {
  return a.shape == b.shape &&
         std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) == 0;
}

TEST(FusedByComposition, EachCompositionIsItsLibraryOpsKernelsBitForBit) {
  std::vector<bool> covered(kOpCodeCount, false);
  for (const OneOp &c : cases()) {
    SCOPED_TRACE(c.name);
    ASSERT_NE(ops::findComposition(c.code), nullptr);
    covered[static_cast<size_t>(c.code)] = true;
    const std::vector<TF> got = c.run(ops::runComposition), want = oracle(c);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(sameBits(got[k], want[k])) << "result #" << k;
  }
  for (const ops::Composition &composition : ops::compositions())
    EXPECT_TRUE(covered[static_cast<size_t>(composition.op)]) << opName(composition.op);
}

// The reference set runs each composition, but those of the ops that keep
// their own kernel (linear_residual: one rounding where the composition
// has two), which stay within an ulp of it.
TEST(FusedByComposition, TheReferenceSetRunsTheCompositions) {
  for (const ops::Composition &composition : ops::compositions()) {
    SCOPED_TRACE(opName(composition.op));
    const detail::OpSpec *spec = detail::opTable(KernelSet::Reference).find(composition.op);
    ASSERT_NE(spec, nullptr);
    EXPECT_EQ(spec->run == ops::runComposition, !composition.ownReferenceKernel);
  }
  for (const OneOp &c : cases()) {
    if (!ops::findComposition(c.code)->ownReferenceKernel)
      continue;
    SCOPED_TRACE(c.name);
    const std::vector<TF> got = c.run(ops::opLibrary().find(c.code)->reference),
                          want = c.run(ops::runComposition);
    for (size_t k = 0; k < got.size(); ++k) {
      double worst = 0;
      for (size_t i = 0; i < got[k].values.size(); ++i)
        worst = std::max(worst, std::fabs(double(got[k].values[i]) - want[k].values[i]) /
                                    std::max(1.0, std::fabs(double(want[k].values[i]))));
      EXPECT_LE(worst, 1e-6) << "result #" << k;
    }
  }
}

// The fused op's contract runs before the steps: a shape or attribute the
// steps alone would take (add broadcasts a [4] prior) or refuse with a
// step's message is refused with the fused op's.
TEST(FusedByComposition, TheFusedOpsContractComesFirst) {
  auto reference = [](OpCode code) { return ops::opLibrary().find(code)->reference; };
  const OneOp acc{OpCode::LinearGradInputAcc,
                  {randomTensor({4}, 1), randomTensor({2, 5}, 2), randomTensor({4, 5}, 3)},
                  {{2, 4}},
                  {},
                  "linear_grad_input_acc"};
  EXPECT_EQ(errorOf([&] { acc.run(reference(acc.code)); }),
            "linear_grad_input_acc: prior: expected shape [2, 4], got [4]");
  const OneOp norm{OpCode::LayerNormGradAcc,
                   {randomTensor({2, 5}, 11), randomTensor({2, 4}, 12), randomTensor({4}, 13),
                    randomTensor({2, 4}, 14)},
                   {{2, 4}, {4}, {4}},
                   {},
                   "layer_norm_grad_acc"};
  EXPECT_EQ(errorOf([&] { norm.run(reference(norm.code)); }),
            "layer_norm_grad_acc: prior: expected shape [2, 4], got [2, 5]");
  const std::map<std::string, AttrValue> skip = {
      {"heads", int64_t(1)}, {"scale", 1.0}, {"mask", std::string("skip")}};
  const OneOp skipped{OpCode::RopeAttention,
                      {randomTensor({1, 3, 4}, 4), randomTensor({1, 3, 4}, 5),
                       randomTensor({1, 3, 4}, 6), ropeTable(3, 2, 7)},
                      {{1, 3, 4}},
                      skip,
                      "rope_attention skip"};
  EXPECT_EQ(errorOf([&] { skipped.run(reference(skipped.code)); }),
            "pe.rope_attention: mask 'skip' is not supported (use pe.attention)");
  // D / heads must be even (each head rotates whole pairs), not D alone.
  const std::map<std::string, AttrValue> twoHeads = {
      {"heads", int64_t(2)}, {"scale", 1.0}, {"mask", std::string("none")}};
  const TF q = randomTensor({1, 3, 6}, 8), table = ropeTable(3, 3, 9);
  const OneOp odd{OpCode::RopeAttention, {q, q, q, table}, {{1, 3, 6}}, twoHeads, "odd"};
  EXPECT_EQ(errorOf([&] { odd.run(reference(odd.code)); }),
            "rope_attention: the head width must be even (interleaved pairs), got 3");
  const OneOp oddGrad{OpCode::RopeAttentionGrad,
                      {q, q, q, table, q, randomTensor({1, 2, 3}, 10), q},
                      {{1, 3, 6}, {1, 3, 6}, {1, 3, 6}},
                      twoHeads,
                      "odd grad"};
  EXPECT_EQ(errorOf([&] { oddGrad.run(reference(oddGrad.code)); }),
            "rope_attention_grad: the head width must be even (interleaved pairs), got 3");
  OneOp oneHead = odd;
  oneHead.attrs["heads"] = int64_t(1); // Dh = 6: accepted
  EXPECT_EQ(errorOf([&] { oneHead.run(reference(oneHead.code)); }), "");
}

TEST(FusedByComposition, TheTableIsWellFormed) {
  for (const ops::Composition &composition : ops::compositions())
    EXPECT_NO_THROW(ops::checkComposition(composition)) << opName(composition.op);
}

TEST(FusedByComposition, MalformedCompositionsAreRefused) {
  using ops::Slot;
  const Slot x{Slot::Operand, 0}, w{Slot::Operand, 1}, y{Slot::Result, 0}, pre{Slot::Result, 1},
      t{Slot::Temp, 0};
  auto check = [](ops::Composition composition) {
    return errorOf([&] { ops::checkComposition(composition); });
  };
  const std::string prefix = "composition of 'pe.linear_gelu': ";
  EXPECT_EQ(check({OpCode::LinearGelu, {}, {{OpCode::Linear, {x}, {pre}, {}}}}),
            prefix + "step 'pe.linear' has 1 operands");
  EXPECT_EQ(check({OpCode::LinearGelu, {}, {{OpCode::Gelu, {x}, {y, pre}, {}}}}),
            prefix + "step 'pe.gelu' has 2 results");
  EXPECT_EQ(check({OpCode::LinearGelu, {y}, {{OpCode::Gelu, {t}, {y}, {}}}}),
            prefix + "step 'pe.gelu' reads temporary #0 before it is written");
  EXPECT_EQ(check({OpCode::LinearGelu, {}, {{OpCode::Gelu, {pre}, {y}, {}}}}),
            prefix + "step 'pe.gelu' reads result #1 before it is written");
  EXPECT_EQ(check({OpCode::LinearGelu, {}, {{OpCode::Gelu, {x}, {w}, {}}}}),
            prefix + "step 'pe.gelu' writes operand #1");
  EXPECT_EQ(check({OpCode::LinearGelu,
                   {},
                   {{OpCode::Gelu, {x}, {y}, {}}, {OpCode::Gelu, {x}, {y}, {}}}}),
            prefix + "result #0 is written twice");
  EXPECT_EQ(check({OpCode::LinearGelu, {}, {{OpCode::Gelu, {x}, {y}, {}}}}),
            prefix + "result #1 is never written");
  EXPECT_EQ(check({OpCode::LinearGelu, {}, {{OpCode::Gelu, {x}, {y}, {{"epsilon", 1.0}}}}}),
            prefix + "step 'pe.gelu' has no attribute 'epsilon'");
  EXPECT_EQ(check({OpCode::LinearGelu,
                   {x},
                   {{OpCode::LayerNormGrad, {x, w, x}, {t, y, pre}, {{"epsilon", {}}}}}}),
            prefix + "step 'pe.layer_norm_grad' takes the fused op's attribute 'epsilon', "
                     "which it has not");
  EXPECT_EQ(check({OpCode::LinearGelu, {Slot{Slot::Operand, 3}}, {}}),
            prefix + "the temporaries' shape: value #3 does not exist");
}

TEST(FusedByComposition, AnOpWithoutACompositionIsRefused) {
  const OneOp gelu{OpCode::Gelu, {randomTensor({3}, 1)}, {{3}}, {}, "gelu"};
  EXPECT_EQ(errorOf([&] { gelu.run(ops::runComposition); }),
            "pe.gelu: has no composition of library ops to run");
}

} // namespace
} // namespace stringrt
