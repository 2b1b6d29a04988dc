// Fast CPU kernels against the reference kernels, in float: random inputs on
// several shapes (odd sizes, batch 1, T = 50, D = 64, 4 heads, rel), every
// attention mask, every broadcast direction, skew and general Cayley S, each
// fast kernel run with 1 and with 4 threads (the two must agree bit for bit,
// both with the reference to rel 1e-4 / abs 1e-5).
#include "stringrt/cpu/FastKernels.h"

#include "CpuTestUtil.h"

#include "stringrt/Error.h"
#include "stringrt/ops/PositionOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace stringrt;
using namespace stringrt::cpu::testing;
using ref::AttentionMask;
using ref::Tensor;

using Outputs = std::vector<TF>;

std::string shapeName(const std::vector<int64_t> &shape) { return ref::shapeToString(shape); }

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

struct LinearCase {
  std::vector<int64_t> x; // [..., I]
  int64_t out;            // O
};

const std::vector<LinearCase> kLinearCases = {
    {{2, 3, 5}, 7},      {{1, 50, 64}, 64},  {{4, 50, 64}, 128}, {{3, 17, 33}, 19},
    {{1, 1}, 1},         {{9, 300}, 5},      {{2, 1, 70}, 257},
};

TEST(FastLinear, MatchesReferenceWithAndWithoutBias) {
  uint32_t seed = 1;
  for (const LinearCase &c : kLinearCases)
    for (bool withBias : {true, false}) {
      const int64_t I = c.x.back(), O = c.out;
      std::vector<int64_t> yShape = c.x;
      yShape.back() = O;
      const TF x = randomTensor(c.x, seed++), w = randomTensor({I, O}, seed++);
      const TF b = randomTensor({O}, seed++);
      expectFastMatchesReference("linear " + shapeName(c.x), [&](bool fast) {
        TF y = TF::zeros(yShape);
        ref::OptionalInput<float> bias;
        if (withBias)
          bias = b.cref();
        if (fast)
          cpu::linear(x.cref(), w.cref(), bias, y.ref());
        else
          ref::linear<float>(x.cref(), w.cref(), bias, y.ref());
        return Outputs{y};
      });
    }
}

TEST(FastLinear, GradientsMatchReference) {
  uint32_t seed = 100;
  for (const LinearCase &c : kLinearCases) {
    const int64_t I = c.x.back(), O = c.out;
    std::vector<int64_t> yShape = c.x;
    yShape.back() = O;
    const TF x = randomTensor(c.x, seed++), w = randomTensor({I, O}, seed++);
    const TF dy = randomTensor(yShape, seed++);
    expectFastMatchesReference("linear_grad_input " + shapeName(c.x), [&](bool fast) {
      TF dx = TF::zeros(c.x);
      if (fast)
        cpu::linearGradInput(dy.cref(), w.cref(), dx.ref());
      else
        ref::linearGradInput<float>(dy.cref(), w.cref(), dx.ref());
      return Outputs{dx};
    });
    expectFastMatchesReference("linear_grad_weight " + shapeName(c.x), [&](bool fast) {
      TF dw = TF::zeros({I, O});
      if (fast)
        cpu::linearGradWeight(x.cref(), dy.cref(), dw.ref());
      else
        ref::linearGradWeight<float>(x.cref(), dy.cref(), dw.ref());
      return Outputs{dw};
    });
  }
}

//===----------------------------------------------------------------------===//
// layer_norm, gelu
//===----------------------------------------------------------------------===//

const std::vector<std::vector<int64_t>> kRowShapes = {
    {2, 3, 5}, {1, 50, 64}, {4, 50, 64}, {7, 33}, {1, 1}, {3, 257}};

TEST(FastLayerNorm, ForwardAndGradMatchReference) {
  uint32_t seed = 200;
  for (const auto &shape : kRowShapes) {
    const int64_t D = shape.back();
    // An offset and spread unlike N(0, 1), so that centring matters.
    const TF x = randomTensor(shape, seed++, 2.0f, 5.0f);
    const TF gamma = randomTensor({D}, seed++, 0.5f, 1.5f), beta = randomTensor({D}, seed++);
    const TF dy = randomTensor(shape, seed++);
    const double eps = 1e-5;
    expectFastMatchesReference("layer_norm " + shapeName(shape), [&](bool fast) {
      TF y = TF::zeros(shape);
      if (fast)
        cpu::layerNorm(x.cref(), gamma.cref(), beta.cref(), eps, y.ref());
      else
        ref::layerNorm<float>(x.cref(), gamma.cref(), beta.cref(), eps, y.ref());
      return Outputs{y};
    });
    expectFastMatchesReference("layer_norm_grad " + shapeName(shape), [&](bool fast) {
      TF dx = TF::zeros(shape), dgamma = TF::zeros({D}), dbeta = TF::zeros({D});
      if (fast)
        cpu::layerNormGrad(x.cref(), gamma.cref(), dy.cref(), eps, dx.ref(), dgamma.ref(),
                           dbeta.ref());
      else
        ref::layerNormGrad<float>(x.cref(), gamma.cref(), dy.cref(), eps, dx.ref(), dgamma.ref(),
                                  dbeta.ref());
      return Outputs{dx, dgamma, dbeta};
    });
  }
}

TEST(FastGelu, ForwardAndGradMatchReferenceBothForms) {
  uint32_t seed = 300;
  // The last shape is past the elementwise grain: several chunks.
  for (const std::vector<int64_t> &shape : std::vector<std::vector<int64_t>>{{3, 5}, {1, 50, 64}, {4, 50, 256}})
    for (bool approximate : {false, true}) {
      const TF x = randomTensor(shape, seed++, -6.0f, 6.0f), dy = randomTensor(shape, seed++);
      const std::string form = approximate ? " tanh " : " erf ";
      expectFastMatchesReference("gelu" + form + shapeName(shape), [&](bool fast) {
        TF y = TF::zeros(shape);
        if (fast)
          cpu::gelu(x.cref(), approximate, y.ref());
        else
          ref::gelu<float>(x.cref(), approximate, y.ref());
        return Outputs{y};
      });
      expectFastMatchesReference("gelu_grad" + form + shapeName(shape), [&](bool fast) {
        TF dx = TF::zeros(shape);
        if (fast)
          cpu::geluGrad(x.cref(), dy.cref(), approximate, dx.ref());
        else
          ref::geluGrad<float>(x.cref(), dy.cref(), approximate, dx.ref());
        return Outputs{dx};
      });
    }
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

struct AttentionCase {
  int64_t B, T, D, heads;
  bool withRel;
};

const std::vector<AttentionCase> kAttentionCases = {
    {1, 50, 64, 4, false}, {3, 50, 64, 4, false}, {2, 7, 12, 3, false}, {2, 5, 6, 1, false},
    {5, 1, 8, 2, false},   {2, 7, 12, 3, true},   {1, 50, 64, 4, true},
    {3, 9, 16, 2, true},   {2, 1, 4, 1, true},
    // rel at head dims 16 and 32 (blocks of 4 tasks, RelativeAttention.cpp),
    // with tasks left over after the blocks and without.
    {3, 9, 48, 3, true},   {2, 6, 64, 2, true},   {3, 5, 64, 2, true},
    // More tasks than a chunk of the gradient's row pass (32), with a tail.
    {17, 5, 32, 2, true},  {35, 3, 32, 1, true},
};

struct MaskCase {
  AttentionMask mask;
  int64_t skipBase;
  const char *name;
};

const std::vector<MaskCase> kMasks = {{AttentionMask::None, 0, "none"},
                                      {AttentionMask::Causal, 0, "causal"},
                                      {AttentionMask::Skip, 0, "skip0"},
                                      {AttentionMask::Skip, 1, "skip1"},
                                      {AttentionMask::Skip, 3, "skip3"}};

std::string attentionName(const AttentionCase &c, const MaskCase &m, double scale) {
  return "B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " D" + std::to_string(c.D) +
         " heads" + std::to_string(c.heads) + (c.withRel ? " rel " : " ") + m.name + " scale " +
         std::to_string(scale);
}

TEST(FastAttention, ForwardMatchesReferenceEveryMask) {
  uint32_t seed = 400;
  for (const AttentionCase &c : kAttentionCases)
    for (const MaskCase &m : kMasks) {
      const int64_t Dh = c.D / c.heads;
      const std::vector<int64_t> shape{c.B, c.T, c.D};
      const TF q = randomTensor(shape, seed++), k = randomTensor(shape, seed++),
               v = randomTensor(shape, seed++);
      const TF rel = randomTensor({c.T, c.T, Dh, Dh}, seed++);
      // 1/sqrt(Dh), and a large scale for peaked softmax rows.
      for (double scale : {1.0 / std::sqrt(double(Dh)), 4.0})
        expectFastMatchesReference("attention " + attentionName(c, m, scale), [&](bool fast) {
          TF y = TF::zeros(shape);
          ref::OptionalInput<float> r;
          if (c.withRel)
            r = rel.cref();
          if (fast)
            cpu::attention(q.cref(), k.cref(), v.cref(), r, c.heads, scale, m.mask, m.skipBase,
                           y.ref());
          else
            ref::attention<float>(q.cref(), k.cref(), v.cref(), r, c.heads, scale, m.mask,
                                  m.skipBase, y.ref());
          return Outputs{y};
        });
    }
}

TEST(FastAttention, GradMatchesReferenceEveryMask) {
  uint32_t seed = 500;
  for (const AttentionCase &c : kAttentionCases)
    for (const MaskCase &m : kMasks) {
      const int64_t Dh = c.D / c.heads;
      const std::vector<int64_t> shape{c.B, c.T, c.D};
      const TF q = randomTensor(shape, seed++), k = randomTensor(shape, seed++),
               v = randomTensor(shape, seed++), dy = randomTensor(shape, seed++);
      const TF rel = randomTensor({c.T, c.T, Dh, Dh}, seed++);
      for (double scale : {1.0 / std::sqrt(double(Dh)), 4.0})
        expectFastMatchesReference("attention_grad " + attentionName(c, m, scale), [&](bool fast) {
          TF dq = TF::zeros(shape), dk = TF::zeros(shape), dv = TF::zeros(shape);
          TF drel = TF::zeros(c.withRel ? rel.shape : std::vector<int64_t>{0});
          ref::OptionalInput<float> r;
          ref::OptionalOutput<float> dr;
          if (c.withRel) {
            r = rel.cref();
            dr = drel.ref();
          }
          if (fast)
            cpu::attentionGrad(q.cref(), k.cref(), v.cref(), dy.cref(), r, c.heads, scale, m.mask,
                               m.skipBase, dq.ref(), dk.ref(), dv.ref(), dr);
          else
            ref::attentionGrad<float>(q.cref(), k.cref(), v.cref(), dy.cref(), r, c.heads, scale,
                                      m.mask, m.skipBase, dq.ref(), dk.ref(), dv.ref(), dr);
          return Outputs{dq, dk, dv, drel};
        });
    }
}

// Outputs are fully overwritten: garbage (NaN) in y / dq / dk / dv / drel
// before the call never survives, for the gather (skip) and GEMM paths alike.
TEST(FastAttention, OverwritesEveryOutput) {
  const std::vector<int64_t> shape{2, 6, 8};
  const TF q = randomTensor(shape, 1), k = randomTensor(shape, 2), v = randomTensor(shape, 3),
           dy = randomTensor(shape, 4);
  const TF rel = randomTensor({6, 6, 4, 4}, 5);
  const float nan = std::nanf("");
  for (const MaskCase &m : kMasks)
    for (bool withRel : {false, true}) {
      SCOPED_TRACE(std::string(m.name) + (withRel ? " rel" : ""));
      ref::OptionalInput<float> r;
      if (withRel)
        r = rel.cref();
      TF y(shape, std::vector<float>(96, nan));
      cpu::attention(q.cref(), k.cref(), v.cref(), r, 2, 0.5, m.mask, m.skipBase, y.ref());
      TF dq(shape, std::vector<float>(96, nan)), dk = dq, dv = dq;
      TF drel({6, 6, 4, 4}, std::vector<float>(576, nan));
      ref::OptionalOutput<float> dr;
      if (withRel)
        dr = drel.ref();
      cpu::attentionGrad(q.cref(), k.cref(), v.cref(), dy.cref(), r, 2, 0.5, m.mask, m.skipBase,
                         dq.ref(), dk.ref(), dv.ref(), dr);
      std::vector<const TF *> outputs{&y, &dq, &dk, &dv};
      if (withRel)
        outputs.push_back(&drel);
      for (const TF *t : outputs)
        for (float value : t->values) {
          ASSERT_FALSE(std::isnan(value));
        }
    }
}

//===----------------------------------------------------------------------===//
// rope
//===----------------------------------------------------------------------===//

struct RopeCase {
  std::vector<int64_t> x; // [..., T, D]
  int64_t axes;
};

const std::vector<RopeCase> kRopeCases = {
    {{2, 50, 64}, 1}, {{1, 50, 64}, 1}, {{3, 9, 16}, 2}, {{5, 2}, 1}, {{2, 3, 7, 10}, 2}};

TEST(FastRope, ForwardAndInputGradMatchReference) {
  uint32_t seed = 600;
  for (const RopeCase &c : kRopeCases) {
    const int64_t T = c.x[c.x.size() - 2], pairs = c.x.back() / 2;
    const TF x = randomTensor(c.x, seed++), dy = randomTensor(c.x, seed++);
    const TF pos = randomTensor({T, c.axes}, seed++, 0.0f, 50.0f);
    const TF freqs = randomTensor({pairs, c.axes}, seed++, 0.0f, 1.0f);
    TF negFreqs = freqs;
    for (float &f : negFreqs.values)
      f = -f;
    expectFastMatchesReference("rope " + shapeName(c.x), [&](bool fast) {
      TF y = TF::zeros(c.x);
      if (fast)
        cpu::rope(x.cref(), pos.cref(), freqs.cref(), y.ref());
      else
        ref::rope<float>(x.cref(), pos.cref(), freqs.cref(), y.ref());
      return Outputs{y};
    });
    // The x-gradient is rope by the opposite angle (docs/autodiff.md).
    expectFastMatchesReference("rope_grad_input " + shapeName(c.x), [&](bool fast) {
      TF dx = TF::zeros(c.x);
      if (fast)
        cpu::ropeGradInput(dy.cref(), pos.cref(), freqs.cref(), dx.ref());
      else
        ref::rope<float>(dy.cref(), pos.cref(), negFreqs.cref(), dx.ref());
      return Outputs{dx};
    });
  }
}

// ropeGradInput is the adjoint of rope: <rope(x), dy> = <x, ropeGradInput(dy)>.
TEST(FastRope, InputGradIsTheAdjoint) {
  const std::vector<int64_t> shape{2, 50, 64};
  const TF x = randomTensor(shape, 1), dy = randomTensor(shape, 2);
  const TF pos = randomTensor({50, 1}, 3, 0.0f, 50.0f), freqs = randomTensor({32, 1}, 4);
  TF y = TF::zeros(shape), dx = TF::zeros(shape);
  cpu::rope(x.cref(), pos.cref(), freqs.cref(), y.ref());
  cpu::ropeGradInput(dy.cref(), pos.cref(), freqs.cref(), dx.ref());
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < x.values.size(); ++i) {
    lhs += double(y.values[i]) * dy.values[i];
    rhs += double(x.values[i]) * dx.values[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-3);
}

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

TEST(FastCrossEntropy, LossAndGradMatchReference) {
  uint32_t seed = 700;
  const std::vector<std::vector<int64_t>> shapes = {{2, 50, 11}, {1, 10}, {7, 1000}, {3, 5, 1}};
  for (double smoothing : {0.0, 0.1, 0.7})
  for (const auto &shape : shapes) {
    const std::string name = shapeName(shape) + " smoothing " + std::to_string(smoothing);
    const int64_t C = shape.back();
    const std::vector<int64_t> labelShape(shape.begin(), shape.end() - 1);
    const TF logits = randomTensor(shape, seed++, -8.0f, 8.0f);
    const auto labels = randomIds(labelShape, static_cast<int32_t>(C), seed++);
    const TF dy({}, {0.75f});
    expectFastMatchesReference("cross_entropy " + name, [&](bool fast) {
      TF loss = TF::zeros({});
      if (fast)
        cpu::crossEntropy(logits.cref(), labels.cref(), loss.ref(), smoothing);
      else
        ref::crossEntropy<float>(logits.cref(), labels.cref(), loss.ref(), smoothing);
      return Outputs{loss};
    });
    expectFastMatchesReference("cross_entropy_grad " + name, [&](bool fast) {
      TF dlogits = TF::zeros(shape);
      if (fast)
        cpu::crossEntropyGrad(logits.cref(), labels.cref(), dy.cref(), dlogits.ref(), smoothing);
      else
        ref::crossEntropyGrad<float>(logits.cref(), labels.cref(), dy.cref(), dlogits.ref(),
                                     smoothing);
      return Outputs{dlogits};
    });
  }
}

//===----------------------------------------------------------------------===//
// patch_embed, token_embed
//===----------------------------------------------------------------------===//

struct PatchCase {
  std::vector<int64_t> image; // [B, C, H, W]
  int64_t patch, D;
};

TEST(FastPatchEmbed, ForwardAndGradMatchReference) {
  uint32_t seed = 800;
  const std::vector<PatchCase> cases = {
      {{2, 3, 8, 8}, 4, 16}, {{1, 1, 28, 28}, 7, 64}, {{3, 2, 6, 9}, 3, 5}, {{4, 1, 28, 28}, 4, 64}};
  for (const PatchCase &c : cases) {
    const int64_t B = c.image[0], K = c.image[1] * c.patch * c.patch;
    const int64_t patches = (c.image[2] / c.patch) * (c.image[3] / c.patch);
    const TF image = randomTensor(c.image, seed++), w = randomTensor({K, c.D}, seed++);
    const TF bias = randomTensor({c.D}, seed++), dy = randomTensor({B, patches, c.D}, seed++);
    expectFastMatchesReference("patch_embed " + shapeName(c.image), [&](bool fast) {
      TF y = TF::zeros({B, patches, c.D});
      if (fast)
        cpu::patchEmbed(image.cref(), w.cref(), bias.cref(), c.patch, y.ref());
      else
        ref::patchEmbed<float>(image.cref(), w.cref(), bias.cref(), c.patch, y.ref());
      return Outputs{y};
    });
    expectFastMatchesReference("patch_embed_grad " + shapeName(c.image), [&](bool fast) {
      TF dw = TF::zeros({K, c.D}), db = TF::zeros({c.D});
      if (fast)
        cpu::patchEmbedGrad(image.cref(), dy.cref(), c.patch, dw.ref(), db.ref());
      else
        ref::patchEmbedGrad<float>(image.cref(), dy.cref(), c.patch, dw.ref(), db.ref());
      return Outputs{dw, db};
    });
  }
}

TEST(FastTokenEmbed, ForwardAndGradMatchReference) {
  uint32_t seed = 900;
  struct Case {
    int64_t B, T, V, D;
  };
  // V > B T leaves rows without any token (their gradient must be 0).
  for (const Case &c : std::vector<Case>{{2, 50, 37, 64}, {1, 1, 1, 3}, {3, 7, 100, 5}, {8, 50, 65, 64}}) {
    const auto ids = randomIds({c.B, c.T}, static_cast<int32_t>(c.V), seed++);
    const TF table = randomTensor({c.V, c.D}, seed++), dy = randomTensor({c.B, c.T, c.D}, seed++);
    const std::string name = "V" + std::to_string(c.V) + " " + shapeName({c.B, c.T, c.D});
    expectFastMatchesReference("token_embed " + name, [&](bool fast) {
      TF y = TF::zeros({c.B, c.T, c.D});
      if (fast)
        cpu::tokenEmbed(ids.cref(), table.cref(), y.ref());
      else
        ref::tokenEmbed<float>(ids.cref(), table.cref(), y.ref());
      return Outputs{y};
    });
    expectFastMatchesReference("token_embed_grad " + name, [&](bool fast) {
      TF dtable = TF::zeros({c.V, c.D});
      if (fast)
        cpu::tokenEmbedGrad(ids.cref(), dy.cref(), dtable.ref());
      else
        ref::tokenEmbedGrad<float>(ids.cref(), dy.cref(), dtable.ref());
      return Outputs{dtable};
    });
  }
}

//===----------------------------------------------------------------------===//
// Elementwise: add / sub / mul (broadcast both ways), scale, sum_to, spd_gate.
// Outputs start as NaN: every kernel must overwrite all of them.
//===----------------------------------------------------------------------===//

TF nanTensor(std::vector<int64_t> shape) {
  TF t = TF::zeros(std::move(shape));
  std::fill(t.values.begin(), t.values.end(), std::numeric_limits<float>::quiet_NaN());
  return t;
}

struct BroadcastCase {
  std::vector<int64_t> big, small;
};

const std::vector<BroadcastCase> kBroadcastCases = {
    {{2, 3, 5}, {2, 3, 5}}, {{4, 50, 64}, {64}},     {{4, 50, 64}, {50, 64}},
    {{3, 17, 33}, {}},      {{1, 1}, {1}},           {{128, 50, 64}, {128, 50, 64}},
    {{7, 300}, {300}},      {{2, 0, 4}, {4}},
};

TEST(FastElementwise, BinaryOpsMatchReferenceBitForBit) {
  uint32_t seed = 1000;
  for (const BroadcastCase &c : kBroadcastCases)
    for (bool smallLeft : {false, true}) {
      const TF big = randomTensor(c.big, seed++), small = randomTensor(c.small, seed++);
      const TF &lhs = smallLeft ? small : big, &rhs = smallLeft ? big : small;
      const std::string name = shapeName(lhs.shape) + " " + shapeName(rhs.shape);
      for (const char *op : {"add", "sub", "mul"}) {
        auto run = [&](bool fast) {
          TF y = nanTensor(c.big);
          const std::string o = op;
          if (o == "add")
            fast ? cpu::add(lhs.cref(), rhs.cref(), y.ref())
                 : ref::add<float>(lhs.cref(), rhs.cref(), y.ref());
          else if (o == "sub")
            fast ? cpu::sub(lhs.cref(), rhs.cref(), y.ref())
                 : ref::sub<float>(lhs.cref(), rhs.cref(), y.ref());
          else
            fast ? cpu::mul(lhs.cref(), rhs.cref(), y.ref())
                 : ref::mul<float>(lhs.cref(), rhs.cref(), y.ref());
          return Outputs{y};
        };
        expectFastMatchesReference(std::string(op) + " " + name, run);
        // Exactly the reference's values (a float op is the rounded double op).
        ScopedThreads threads(4);
        EXPECT_EQ(run(true)[0].values, run(false)[0].values) << op << " " << name;
      }
    }
}

TEST(FastElementwise, DropoutIsTheReferencesBitForBitOnEveryThreadCount) {
  uint32_t seed = 1100;
  // Odd rows (a last block of 1-3 elements), batch 1, a micro-batch offset.
  const std::vector<std::vector<int64_t>> shapes = {{3, 5}, {1, 50, 64}, {4, 17, 33}, {7, 1},
                                                     {5, 9001}}; // several chunks a thread
  for (const auto &shape : shapes)
    for (bool perSample : {false, true}) {
      const TF x = randomTensor(shape, seed++);
      const StepKey key{(uint64_t(1) << 36) + 3, 12, 5};
      auto run = [&](bool fast) {
        TF y = nanTensor(shape);
        fast ? cpu::dropout(x.cref(), 0.35, perSample, 4, key, y.ref())
             : ref::dropout<float>(x.cref(), 0.35, perSample, 4, key, y.ref());
        return Outputs{y};
      };
      const std::string name = shapeName(shape) + (perSample ? " per sample" : "");
      const Outputs want = run(false);
      for (int threads : {1, 2, 4}) {
        ScopedThreads scoped(threads);
        EXPECT_EQ(run(true)[0].values, want[0].values) << name << ", " << threads << " threads";
      }
    }
  TF x = randomTensor({2, 3}, 1), y = nanTensor({2, 3});
  EXPECT_THROW(cpu::dropout(x.cref(), 1.0, false, 0, {}, y.ref()), Error);
  EXPECT_THROW(cpu::dropout(x.cref(), 0.5, false, -1, {}, y.ref()), Error);
  EXPECT_THROW(cpu::dropout(x.cref(), 0.5, false, 0, {0, int64_t(1) << 32, 0}, y.ref()), Error);
}

TEST(FastElementwise, ScaleSumToAndSpdGateMatchReference) {
  uint32_t seed = 1100;
  for (const BroadcastCase &c : kBroadcastCases) {
    const TF x = randomTensor(c.big, seed++);
    const std::string name = shapeName(c.big) + " -> " + shapeName(c.small);
    expectFastMatchesReference("scale " + name, [&](bool fast) {
      TF y = nanTensor(c.big);
      fast ? cpu::scale(x.cref(), -0.37, 0.25, y.ref())
           : ref::scale<float>(x.cref(), -0.37, 0.25, y.ref());
      return Outputs{y};
    });
    auto sumTo = [&](bool fast) {
      TF y = nanTensor(c.small);
      fast ? cpu::sumTo(x.cref(), y.ref()) : ref::sumTo<float>(x.cref(), y.ref());
      return Outputs{y};
    };
    expectFastMatchesReference("sum_to " + name, sumTo);
    {
      ScopedThreads threads(4); // the reference's summation order: bit for bit
      EXPECT_EQ(sumTo(true)[0].values, sumTo(false)[0].values) << name;
    }
    if (c.small.empty())
      continue; // spd_gate's gamma has rank >= 1
    const TF gamma = randomTensor(c.small, seed++), dy = randomTensor(c.big, seed++);
    expectFastMatchesReference("spd_gate " + name, [&](bool fast) {
      TF y = nanTensor(c.big);
      fast ? cpu::spdGate(x.cref(), gamma.cref(), y.ref())
           : ref::spdGate<float>(x.cref(), gamma.cref(), y.ref());
      return Outputs{y};
    });
    expectFastMatchesReference("spd_gate_grad " + name, [&](bool fast) {
      TF dx = nanTensor(c.big), dgamma = nanTensor(c.small);
      fast ? cpu::spdGateGrad(x.cref(), gamma.cref(), dy.cref(), dx.ref(), dgamma.ref())
           : ref::spdGateGrad<float>(x.cref(), gamma.cref(), dy.cref(), dx.ref(), dgamma.ref());
      return Outputs{dx, dgamma};
    });
  }
}

//===----------------------------------------------------------------------===//
// Cayley: skew and general S, token counts across cayley_grad's blocks.
//===----------------------------------------------------------------------===//

// S = c (A - A^T) (skew) or c A (general), A uniform in [-1, 1).
TF cayleyS(int64_t d, bool skewS, float c, uint32_t seed) {
  TF a = randomTensor({d, d}, seed);
  TF s = TF::zeros({d, d});
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j)
      s.values[i * d + j] =
          skewS ? c * (a.values[i * d + j] - a.values[j * d + i]) : c * a.values[i * d + j];
  return s;
}

TEST(FastCayley, ForwardAndGradMatchReference) {
  uint32_t seed = 1200;
  const std::vector<std::vector<int64_t>> shapes = {
      {2, 3, 5}, {1, 1}, {4, 50, 64}, {300, 17}, {2, 600, 8}, {3, 7, 128}, {0, 6}};
  for (const auto &shape : shapes)
    for (bool skewS : {true, false}) {
      const int64_t d = shape.back();
      // Entries ~0.1 / sqrt(d) (a model's scale) and ~1 / sqrt(d) (far from I).
      for (float c : {0.1f, 1.0f}) {
        const TF s = cayleyS(d, skewS, c / std::sqrt(float(d)), seed++);
        const TF x = randomTensor(shape, seed++), dy = randomTensor(shape, seed++);
        const std::string name = shapeName(shape) + (skewS ? " skew" : " general") +
                                 " c=" + std::to_string(c);
        expectFastMatchesReference("cayley " + name, [&](bool fast) {
          TF y = nanTensor(shape);
          fast ? cpu::cayley(x.cref(), s.cref(), y.ref())
               : ref::cayley<float>(x.cref(), s.cref(), y.ref());
          return Outputs{y};
        });
        expectFastMatchesReference("cayley_grad " + name, [&](bool fast) {
          TF dx = nanTensor(shape), ds = nanTensor({d, d});
          fast ? cpu::cayleyGrad(x.cref(), s.cref(), dy.cref(), dx.ref(), ds.ref())
               : ref::cayleyGrad<float>(x.cref(), s.cref(), dy.cref(), dx.ref(), ds.ref());
          return Outputs{dx, ds};
        });
      }
    }
}

TEST(FastCayley, SingularAndMisshapenOperandsThrowLikeTheReference) {
  const int64_t d = 4;
  TF minusI = TF::zeros({d, d}); // I + S = 0
  for (int64_t i = 0; i < d; ++i)
    minusI.values[i * d + i] = -1.0f;
  const TF x = randomTensor({3, d}, 1);
  TF y = TF::zeros({3, d}), ds = TF::zeros({d, d});
  for (bool fast : {true, false}) {
    try {
      fast ? cpu::cayley(x.cref(), minusI.cref(), y.ref())
           : ref::cayley<float>(x.cref(), minusI.cref(), y.ref());
      ADD_FAILURE() << "no error";
    } catch (const Error &e) {
      EXPECT_STREQ(e.what(), "cayley: I + S (4x4) is singular") << fast;
    }
    try {
      fast ? cpu::cayleyGrad(x.cref(), minusI.cref(), x.cref(), y.ref(), ds.ref())
           : ref::cayleyGrad<float>(x.cref(), minusI.cref(), x.cref(), y.ref(), ds.ref());
      ADD_FAILURE() << "no error";
    } catch (const Error &e) {
      EXPECT_STREQ(e.what(), "cayley_grad: I + S (4x4) is singular") << fast;
    }
  }
  const TF s5 = randomTensor({5, 5}, 2);
  EXPECT_THROW(cpu::cayley(x.cref(), s5.cref(), y.ref()), Error);
  EXPECT_THROW(cpu::cayleyGrad(x.cref(), s5.cref(), x.cref(), y.ref(), ds.ref()), Error);
  EXPECT_THROW(cpu::add(x.cref(), randomTensor({3}, 3).cref(), y.ref()), Error);
  EXPECT_THROW(cpu::sumTo(x.cref(), TF::zeros({3}).ref()), Error);
  EXPECT_THROW(cpu::spdGate(x.cref(), randomTensor({3}, 4).cref(), y.ref()), Error);
}

//===----------------------------------------------------------------------===//
// Errors: the reference kernels' checks, before any work.
//===----------------------------------------------------------------------===//

TEST(FastKernelErrors, ShapeAttributeAndRangeViolationsThrow) {
  const TF x = randomTensor({2, 3, 4}, 1), w = randomTensor({5, 6}, 2);
  TF y = TF::zeros({2, 3, 6});
  EXPECT_THROW(cpu::linear(x.cref(), w.cref(), std::nullopt, y.ref()), Error);
  EXPECT_THROW(cpu::linearGradWeight(x.cref(), y.cref(), TF::zeros({4, 5}).ref()), Error);

  const TF gamma = randomTensor({4}, 3);
  TF out = TF::zeros({2, 3, 4});
  EXPECT_THROW(cpu::layerNorm(x.cref(), gamma.cref(), gamma.cref(), 0.0, out.ref()), Error);
  EXPECT_THROW(cpu::gelu(x.cref(), false, TF::zeros({2, 3}).ref()), Error);

  // heads must divide D; skip_base >= 0 with skip; drel exactly with rel.
  EXPECT_THROW(cpu::attention(x.cref(), x.cref(), x.cref(), std::nullopt, 3, 1.0,
                              AttentionMask::None, 0, out.ref()),
               Error);
  EXPECT_THROW(cpu::attention(x.cref(), x.cref(), x.cref(), std::nullopt, 2, 1.0,
                              AttentionMask::Skip, -1, out.ref()),
               Error);
  const TF rel = randomTensor({3, 3, 2, 2}, 4);
  TF dq = TF::zeros({2, 3, 4}), dk = dq, dv = dq;
  EXPECT_THROW(cpu::attentionGrad(x.cref(), x.cref(), x.cref(), x.cref(), rel.cref(), 2, 1.0,
                                  AttentionMask::None, 0, dq.ref(), dk.ref(), dv.ref(),
                                  std::nullopt),
               Error);

  const TF pos = randomTensor({3, 1}, 5), badFreqs = randomTensor({3, 1}, 6);
  EXPECT_THROW(cpu::rope(x.cref(), pos.cref(), badFreqs.cref(), out.ref()), Error);

  const TF logits = randomTensor({2, 3}, 7);
  const Tensor<int32_t> badLabels({2}, {0, 3});
  TF loss = TF::zeros({});
  EXPECT_THROW(cpu::crossEntropy(logits.cref(), badLabels.cref(), loss.ref()), Error);
  const Tensor<int32_t> goodLabels({2}, {0, 2});
  EXPECT_THROW(cpu::crossEntropy(logits.cref(), goodLabels.cref(), loss.ref(), 1.0), Error);
  EXPECT_THROW(cpu::crossEntropy(logits.cref(), goodLabels.cref(), loss.ref(), -0.5), Error);

  const Tensor<int32_t> badIds({1, 2}, {0, -1});
  TF embedded = TF::zeros({1, 2, 6});
  EXPECT_THROW(cpu::tokenEmbed(badIds.cref(), w.cref(), embedded.ref()), Error);

  const TF image = randomTensor({1, 1, 5, 5}, 8);
  TF patches = TF::zeros({1, 1, 6});
  EXPECT_THROW(cpu::patchEmbed(image.cref(), randomTensor({4, 6}, 9).cref(),
                               randomTensor({6}, 10).cref(), 2, patches.ref()),
               Error);
}

} // namespace
