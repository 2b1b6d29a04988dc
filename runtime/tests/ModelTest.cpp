// Model and its executor: the flat parameter buffer, the initialisers,
// running hand-built programs on the reference kernels (forward outputs
// against the kernels called directly, gradients against the kernels'
// composition) and on both kernel sets (gradients against central finite
// differences of the forward loss; the fast kernels' outputs and gradients
// against the reference kernels'), freeing values after their last use, and
// the errors for bad inputs and programs.
#include "stringrt/Model.h"

#include "execution/Executor.h"
#include "execution/Initializers.h"
#include "ProgramBuilder.h"
#include "TestFiles.h"
#include "TestPackages.h"
#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/Safetensors.h"
#include "stringrt/reference/LayerKernels.h"
#include "stringrt/ops/PositionOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace stringrt {
namespace {

using ref::Tensor;
using test::failsWith;
using test::TempDir;

constexpr const char *kPath = "model.pkg";
constexpr double kPi = 3.14159265358979323846;

//===----------------------------------------------------------------------===//
// Building manifests by hand
//===----------------------------------------------------------------------===//

using test::f32;
using test::i32;
using test::ProgramBuilder;

ManifestParam normalParam(const std::string &name, std::vector<int64_t> shape, double std,
                          uint64_t seed, bool frozen = false) {
  ManifestParam p;
  p.name = name;
  p.shape = std::move(shape);
  p.init = ParamInit::Normal;
  p.mean = 0.0;
  p.std = std;
  p.seed = seed;
  p.frozen = frozen;
  return p;
}

ManifestParam constantParam(const std::string &name, std::vector<int64_t> shape, ParamInit init,
                            double value = 0.0, bool frozen = false) {
  ManifestParam p;
  p.name = name;
  p.shape = std::move(shape);
  p.init = init;
  p.value = value;
  p.frozen = frozen;
  return p;
}

ManifestInput input(const std::string &name, DType dtype, std::vector<int64_t> shape) {
  return {name, dtype, std::move(shape)};
}

//===----------------------------------------------------------------------===//
// A linear classifier: logits = x w + b, loss = cross_entropy(logits, label)
//===----------------------------------------------------------------------===//

constexpr int64_t kIn = 4, kClasses = 3;

Manifest linearManifest(bool frozenBias = false) {
  Manifest m;
  m.model = "linear";
  m.inputs = {input("x", DType::F32, {-1, kIn}), input("label", DType::I32, {-1})};
  ManifestParam w = normalParam("w", {kIn, kClasses}, 0.5, 11);
  ManifestParam b;
  b.name = "b";
  b.shape = {kClasses};
  b.init = ParamInit::Uniform;
  b.low = -0.3;
  b.high = 0.3;
  b.seed = 12;
  b.frozen = frozenBias;
  m.params = {w, b};

  ProgramBuilder f;
  ValueId x = f.input(f32({-1, kIn}));
  ValueId label = f.input(i32({-1}));
  ValueId wv = f.param("w", {kIn, kClasses});
  ValueId bv = f.param("b", {kClasses});
  ValueId logits = f.op1("pe.linear", {x, wv, bv}, f32({-1, kClasses}));
  ValueId loss = f.op1("pe.cross_entropy", {logits, label}, f32({}));
  f.output("loss", loss);
  f.output("logits", logits);
  f.output("weight", wv); // a parameter view as an output
  m.forward = f.program;

  ProgramBuilder g;
  x = g.input(f32({-1, kIn}));
  label = g.input(i32({-1}));
  wv = g.param("w", {kIn, kClasses});
  bv = g.param("b", {kClasses});
  logits = g.op1("pe.linear", {x, wv, bv}, f32({-1, kClasses}));
  loss = g.op1("pe.cross_entropy", {logits, label}, f32({}));
  ValueId one = g.constant(1.0);
  ValueId dlogits =
      g.op1("pe.cross_entropy_grad", {logits, label, one}, f32({-1, kClasses}));
  ValueId dw = g.op1("pe.linear_grad_weight", {x, dlogits}, f32({kIn, kClasses}));
  g.output("loss", loss);
  g.grad("w", dw);
  if (!frozenBias) {
    ValueId db = g.op1("pe.sum_to", {dlogits}, f32({kClasses}));
    g.grad("b", db);
  }
  m.gradients = g.program;
  return m;
}

struct Batch {
  Tensor<float> x;
  Tensor<int32_t> label;
  std::map<std::string, HostTensor> inputs() const {
    return {{"x", HostTensor::of(x)}, {"label", HostTensor::of(label)}};
  }
};

Batch linearBatch(int64_t batch, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> value(-1.f, 1.f);
  Batch b;
  b.x = Tensor<float>::zeros({batch, kIn});
  for (float &v : b.x.values)
    v = value(gen);
  b.label = Tensor<int32_t>::zeros({batch});
  for (int64_t i = 0; i < batch; ++i)
    b.label.values[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7 + seed) % kClasses);
  return b;
}

Tensor<float> slotTensor(const Model &model, const std::string &name) {
  const ParamSlot *slot = model.findSlot(name);
  EXPECT_NE(slot, nullptr) << name;
  const float *begin = model.parameters().data() + slot->offset;
  return Tensor<float>(slot->shape, std::vector<float>(begin, begin + slot->size));
}

TEST(ModelTest, SlotsAreTheParametersInManifestOrder) {
  Model model(linearManifest(true), kPath);
  ASSERT_EQ(model.slots().size(), 2u);
  EXPECT_EQ(model.slots()[0].name, "w");
  EXPECT_EQ(model.slots()[0].shape, (std::vector<int64_t>{kIn, kClasses}));
  EXPECT_EQ(model.slots()[0].offset, 0);
  EXPECT_EQ(model.slots()[0].size, kIn * kClasses);
  EXPECT_FALSE(model.slots()[0].frozen);
  EXPECT_EQ(model.slots()[1].name, "b");
  EXPECT_EQ(model.slots()[1].offset, kIn * kClasses);
  EXPECT_EQ(model.slots()[1].size, kClasses);
  EXPECT_TRUE(model.slots()[1].frozen);
  EXPECT_EQ(model.parameterCount(), kIn * kClasses + kClasses);
  EXPECT_EQ(model.parameters().size(), static_cast<size_t>(kIn * kClasses + kClasses));
  EXPECT_EQ(model.findSlot("nope"), nullptr);
  EXPECT_EQ(model.manifest().model, "linear");
}

TEST(ModelTest, LinearForwardMatchesTheKernels) {
  Model model(linearManifest(), kPath, KernelSet::Reference);
  model.initParameters();
  for (int64_t batch : {1, 3, 5}) {
    Batch b = linearBatch(batch, 7);
    auto out = model.run("forward", b.inputs());
    ASSERT_EQ(out.size(), 3u);
    Tensor<float> w = slotTensor(model, "w"), bias = slotTensor(model, "b");
    Tensor<float> logits = Tensor<float>::zeros({batch, kClasses});
    ref::linear<float>(b.x.cref(), w.cref(), bias.cref(), logits.ref());
    Tensor<float> loss = Tensor<float>::zeros({});
    ref::crossEntropy<float>(logits.cref(), b.label.cref(), loss.ref());
    EXPECT_EQ(out.at("logits").shape, logits.shape);
    EXPECT_EQ(out.at("logits").values, logits.values);
    EXPECT_EQ(out.at("loss").shape, std::vector<int64_t>{});
    EXPECT_EQ(out.at("loss").values, loss.values);
    EXPECT_EQ(out.at("weight").values, w.values);
    // By hand: logits[0][c] = sum_i x[0][i] w[i][c] + b[c].
    for (int64_t c = 0; c < kClasses; ++c) {
      double expected = bias.values[c];
      for (int64_t i = 0; i < kIn; ++i)
        expected += double(b.x.values[i]) * w.values[i * kClasses + c];
      EXPECT_NEAR(out.at("logits").values[c], expected, 1e-6);
    }
  }
}

TEST(ModelTest, LinearGradientsMatchTheKernelComposition) {
  Model model(linearManifest(), kPath, KernelSet::Reference);
  model.initParameters();
  Batch b = linearBatch(6, 3);
  float loss = 0;
  std::vector<float> grads = {42.f};
  model.gradients(b.inputs(), loss, grads);
  ASSERT_EQ(grads.size(), static_cast<size_t>(model.parameterCount()));

  Tensor<float> w = slotTensor(model, "w"), bias = slotTensor(model, "b");
  Tensor<float> logits = Tensor<float>::zeros({6, kClasses});
  ref::linear<float>(b.x.cref(), w.cref(), bias.cref(), logits.ref());
  Tensor<float> one({}, {1.f});
  Tensor<float> dlogits = Tensor<float>::zeros({6, kClasses});
  ref::crossEntropyGrad<float>(logits.cref(), b.label.cref(), one.cref(), dlogits.ref());
  Tensor<float> dw = Tensor<float>::zeros({kIn, kClasses});
  ref::linearGradWeight<float>(b.x.cref(), dlogits.cref(), dw.ref());
  Tensor<float> db = Tensor<float>::zeros({kClasses});
  ref::sumTo<float>(dlogits.cref(), db.ref());

  EXPECT_EQ(loss, model.run("forward", b.inputs()).at("loss").values[0]);
  EXPECT_EQ(std::vector<float>(grads.begin(), grads.begin() + kIn * kClasses), dw.values);
  EXPECT_EQ(std::vector<float>(grads.begin() + kIn * kClasses, grads.end()), db.values);

  // The gradients program through run(): the same, keyed "grad:<param>".
  auto out = model.run("gradients", b.inputs());
  EXPECT_EQ(out.at("loss").values[0], loss);
  EXPECT_EQ(out.at("grad:w").values, dw.values);
  EXPECT_EQ(out.at("grad:b").values, db.values);
}

TEST(ModelTest, FrozenSlotsGetZeroGradients) {
  Model model(linearManifest(true), kPath);
  model.initParameters();
  Batch b = linearBatch(4, 9);
  float loss = 0;
  std::vector<float> grads(100, 5.f);
  model.gradients(b.inputs(), loss, grads);
  ASSERT_EQ(grads.size(), static_cast<size_t>(model.parameterCount()));
  for (int64_t i = 0; i < kClasses; ++i)
    EXPECT_EQ(grads[static_cast<size_t>(kIn * kClasses + i)], 0.f);
  double norm = 0;
  for (int64_t i = 0; i < kIn * kClasses; ++i)
    norm += std::abs(grads[static_cast<size_t>(i)]);
  EXPECT_GT(norm, 0.0);
}

//===----------------------------------------------------------------------===//
// Finite differences of the forward loss over the flat parameters
//===----------------------------------------------------------------------===//

// Every trainable element: (L(p + h e_i) - L(p - h e_i)) / 2h against the
// gradient, in float (h = 1e-2: the loss's float rounding / (2h) and the h^2
// truncation both stay near 1e-5; the errors seen are below 1e-5). Then a few
// random unit directions, where the signal is the whole gradient's.
void checkAgainstFiniteDifferences(Model &model, const std::map<std::string, HostTensor> &inputs) {
  float loss = 0;
  std::vector<float> grads;
  model.gradients(inputs, loss, grads);
  std::vector<float> &p = model.parameters();
  auto forwardLoss = [&] { return double(model.run("forward", inputs).at("loss").values[0]); };
  EXPECT_EQ(loss, forwardLoss());
  const double h = 1e-2;
  int checked = 0;
  for (const ParamSlot &slot : model.slots()) {
    for (int64_t e = 0; e < slot.size; ++e) {
      size_t i = static_cast<size_t>(slot.offset + e);
      if (slot.frozen) {
        EXPECT_EQ(grads[i], 0.f) << slot.name;
        continue;
      }
      float saved = p[i];
      p[i] = static_cast<float>(saved + h);
      double plus = forwardLoss();
      p[i] = static_cast<float>(saved - h);
      double minus = forwardLoss();
      p[i] = saved;
      double fd = (plus - minus) / (2 * h);
      EXPECT_NEAR(grads[i], fd, 5e-5 + 1e-3 * std::abs(fd)) << slot.name << "[" << e << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);

  std::mt19937 gen(5);
  std::normal_distribution<double> normal;
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<double> dir(p.size(), 0.0);
    double norm = 0;
    for (const ParamSlot &slot : model.slots())
      for (int64_t e = 0; !slot.frozen && e < slot.size; ++e) {
        double d = normal(gen);
        dir[static_cast<size_t>(slot.offset + e)] = d;
        norm += d * d;
      }
    double along = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      dir[i] /= std::sqrt(norm);
      along += dir[i] * grads[i];
    }
    std::vector<float> saved = p;
    for (size_t i = 0; i < p.size(); ++i)
      p[i] = static_cast<float>(saved[i] + h * dir[i]);
    double plus = forwardLoss();
    for (size_t i = 0; i < p.size(); ++i)
      p[i] = static_cast<float>(saved[i] - h * dir[i]);
    double minus = forwardLoss();
    p = saved;
    double fd = (plus - minus) / (2 * h);
    EXPECT_NEAR(along, fd, 1e-5 + 1e-3 * std::abs(fd)) << "direction " << trial;
  }
}

TEST(ModelTest, LinearGradientsMatchFiniteDifferences) {
  for (KernelSet kernels : {KernelSet::Reference, KernelSet::Fast}) {
    SCOPED_TRACE(kernelSetName(kernels));
    Model model(linearManifest(), kPath, kernels);
    model.initParameters();
    Batch b = linearBatch(5, 1);
    checkAgainstFiniteDifferences(model, b.inputs());
  }
}

//===----------------------------------------------------------------------===//
// A tiny attention block with rotary positions
//===----------------------------------------------------------------------===//

constexpr int64_t kT = 4, kD = 8, kV = 5, kHeads = 2;

// e = token_embed(tokens, emb); h = layer_norm(e, gamma, beta);
// q, k, v = h wq, h wk, h wv; q, k rotated by rope (seq positions, standard
// frequencies); a = attention(q, k, v, causal); r = a + e;
// logits = gelu(r) wo; loss = cross_entropy(logits, targets).
// beta is frozen; the gradients program is the one pe-autodiff builds.
Manifest attentionManifest() {
  Manifest m;
  m.model = "tiny_attention";
  m.inputs = {input("tokens", DType::I32, {-1, kT}), input("targets", DType::I32, {-1, kT})};
  m.params = {normalParam("emb", {kV, kD}, 1.0, 1),
              constantParam("gamma", {kD}, ParamInit::Ones),
              constantParam("beta", {kD}, ParamInit::Constant, 0.1, /*frozen=*/true),
              normalParam("wq", {kD, kD}, 0.4, 2),
              normalParam("wk", {kD, kD}, 0.4, 3),
              normalParam("wv", {kD, kD}, 0.4, 4),
              normalParam("wo", {kD, kV}, 0.4, 5)};
  const std::map<std::string, AttrValue> attn = {{"heads", int64_t(kHeads)},
                                                 {"scale", 0.5},
                                                 {"mask", std::string("causal")}};
  const ProgramValue act = f32({-1, kT, kD});

  struct Forward {
    ValueId tokens, targets, emb, gamma, beta, wq, wk, wv, wo, e, h, q, k, v, pos, freqs, qr, kr,
        a, lse, r, g, logits, loss;
  };
  // The gradients program's attention also returns its log-sum-exp, which
  // attention_grad reads (as pe-autodiff builds it).
  auto forward = [&](ProgramBuilder &b, bool saveLse) {
    Forward f;
    f.tokens = b.input(i32({-1, kT}));
    f.targets = b.input(i32({-1, kT}));
    f.emb = b.param("emb", {kV, kD});
    f.gamma = b.param("gamma", {kD});
    f.beta = b.param("beta", {kD});
    f.wq = b.param("wq", {kD, kD});
    f.wk = b.param("wk", {kD, kD});
    f.wv = b.param("wv", {kD, kD});
    f.wo = b.param("wo", {kD, kV});
    f.e = b.op1("pe.token_embed", {f.tokens, f.emb}, act);
    f.h = b.op1("pe.layer_norm", {f.e, f.gamma, f.beta}, act, {{"epsilon", 1e-5}});
    f.q = b.op1("pe.linear", {f.h, f.wq}, act);
    f.k = b.op1("pe.linear", {f.h, f.wk}, act);
    f.v = b.op1("pe.linear", {f.h, f.wv}, act);
    f.pos = b.op1("pe.seq_positions", {}, f32({kT, 1}),
                  {{"length", int64_t(kT)}, {"special", int64_t(0)}});
    f.freqs = b.op1("pe.rope_freqs", {}, f32({kD / 2, 1}),
                    {{"kind", std::string("seq")},
                     {"dim", int64_t(kD)},
                     {"heads", int64_t(kHeads)},
                     {"base", 10.0}});
    f.qr = b.op1("pe.rope", {f.q, f.pos, f.freqs}, act, {{"mode", std::string("seq")}});
    f.kr = b.op1("pe.rope", {f.k, f.pos, f.freqs}, act, {{"mode", std::string("seq")}});
    if (saveLse) {
      std::vector<ValueId> out =
          b.op("pe.attention", {f.qr, f.kr, f.v}, {act, f32({-1, kHeads, kT})}, attn);
      f.a = out[0];
      f.lse = out[1];
    } else {
      f.a = b.op1("pe.attention", {f.qr, f.kr, f.v}, act, attn);
    }
    f.r = b.op1("pe.add", {f.a, f.e}, act);
    f.g = b.op1("pe.gelu", {f.r}, act, {{"approximate", false}});
    f.logits = b.op1("pe.linear", {f.g, f.wo}, f32({-1, kT, kV}));
    f.loss = b.op1("pe.cross_entropy", {f.logits, f.targets}, f32({}));
    return f;
  };

  ProgramBuilder fb;
  Forward f = forward(fb, false);
  fb.output("loss", f.loss);
  fb.output("logits", f.logits);
  m.forward = fb.program;

  ProgramBuilder gb;
  f = forward(gb, true);
  ValueId one = gb.constant(1.0);
  ValueId dlogits = gb.op1("pe.cross_entropy_grad", {f.logits, f.targets, one}, f32({-1, kT, kV}));
  ValueId dwo = gb.op1("pe.linear_grad_weight", {f.g, dlogits}, f32({kD, kV}));
  ValueId dg = gb.op1("pe.linear_grad_input", {dlogits, f.wo}, act);
  ValueId dr = gb.op1("pe.gelu_grad", {f.r, dg}, act, {{"approximate", false}});
  std::vector<ValueId> dqkv = gb.op("pe.attention_grad", {f.qr, f.kr, f.v, f.a, f.lse, dr},
                                       {act, act, act}, attn);
  ValueId negFreqs = gb.op1("pe.scale", {f.freqs}, f32({kD / 2, 1}), {{"factor", -1.0}, {"bias", 0.0}});
  ValueId dq = gb.op1("pe.rope", {dqkv[0], f.pos, negFreqs}, act, {{"mode", std::string("seq")}});
  ValueId dk = gb.op1("pe.rope", {dqkv[1], f.pos, negFreqs}, act, {{"mode", std::string("seq")}});
  ValueId dv = dqkv[2];
  ValueId dwq = gb.op1("pe.linear_grad_weight", {f.h, dq}, f32({kD, kD}));
  ValueId dwk = gb.op1("pe.linear_grad_weight", {f.h, dk}, f32({kD, kD}));
  ValueId dwv = gb.op1("pe.linear_grad_weight", {f.h, dv}, f32({kD, kD}));
  ValueId dhq = gb.op1("pe.linear_grad_input", {dq, f.wq}, act);
  ValueId dhk = gb.op1("pe.linear_grad_input", {dk, f.wk}, act);
  ValueId dhv = gb.op1("pe.linear_grad_input", {dv, f.wv}, act);
  ValueId dh = gb.op1("pe.add", {gb.op1("pe.add", {dhq, dhk}, act), dhv}, act);
  // dbeta (result 2) is not needed: beta is frozen.
  std::vector<ValueId> ln = gb.op("pe.layer_norm_grad", {f.e, f.gamma, dh},
                                  {act, f32({kD}), f32({kD})}, {{"epsilon", 1e-5}});
  ValueId de = gb.op1("pe.add", {dr, ln[0]}, act);
  ValueId demb = gb.op1("pe.token_embed_grad", {f.tokens, de}, f32({kV, kD}));
  gb.output("loss", f.loss);
  gb.grad("emb", demb);
  gb.grad("gamma", ln[1]);
  gb.grad("wq", dwq);
  gb.grad("wk", dwk);
  gb.grad("wv", dwv);
  gb.grad("wo", dwo);
  m.gradients = gb.program;
  return m;
}

struct TokenBatch {
  Tensor<int32_t> tokens, targets;
  std::map<std::string, HostTensor> inputs() const {
    return {{"tokens", HostTensor::of(tokens)}, {"targets", HostTensor::of(targets)}};
  }
};

TokenBatch tokenBatch(int64_t batch) {
  TokenBatch b;
  b.tokens = Tensor<int32_t>::zeros({batch, kT});
  b.targets = Tensor<int32_t>::zeros({batch, kT});
  for (int64_t i = 0; i < batch * kT; ++i) {
    b.tokens.values[static_cast<size_t>(i)] = static_cast<int32_t>((3 * i + 1) % kV);
    b.targets.values[static_cast<size_t>(i)] = static_cast<int32_t>((3 * i + 2) % kV);
  }
  return b;
}

TEST(ModelTest, AttentionForwardMatchesTheKernels) {
  Model model(attentionManifest(), kPath, KernelSet::Reference);
  model.initParameters();
  const int64_t B = 2;
  TokenBatch b = tokenBatch(B);
  auto out = model.run("forward", b.inputs());

  auto param = [&](const char *name) { return slotTensor(model, name); };
  Tensor<float> emb = param("emb"), gamma = param("gamma"), beta = param("beta");
  Tensor<float> wq = param("wq"), wk = param("wk"), wv = param("wv"), wo = param("wo");
  std::vector<int64_t> act = {B, kT, kD};
  Tensor<float> e = Tensor<float>::zeros(act), h = Tensor<float>::zeros(act);
  ref::tokenEmbed<float>(b.tokens.cref(), emb.cref(), e.ref());
  ref::layerNorm<float>(e.cref(), gamma.cref(), beta.cref(), 1e-5, h.ref());
  Tensor<float> q = Tensor<float>::zeros(act), k = Tensor<float>::zeros(act),
                v = Tensor<float>::zeros(act);
  ref::linear<float>(h.cref(), wq.cref(), std::nullopt, q.ref());
  ref::linear<float>(h.cref(), wk.cref(), std::nullopt, k.ref());
  ref::linear<float>(h.cref(), wv.cref(), std::nullopt, v.ref());
  Tensor<float> pos = Tensor<float>::zeros({kT, 1}), freqs = Tensor<float>::zeros({kD / 2, 1});
  ref::seqPositions<float>(kT, 0, pos.ref());
  ref::ropeFreqs<float>(ref::FreqsKind::Seq, kD, kHeads, 10.0, freqs.ref());
  Tensor<float> qr = Tensor<float>::zeros(act), kr = Tensor<float>::zeros(act);
  ref::rope<float>(q.cref(), pos.cref(), freqs.cref(), qr.ref());
  ref::rope<float>(k.cref(), pos.cref(), freqs.cref(), kr.ref());
  Tensor<float> a = Tensor<float>::zeros(act), r = Tensor<float>::zeros(act),
                g = Tensor<float>::zeros(act);
  ref::attention<float>(qr.cref(), kr.cref(), v.cref(), std::nullopt, kHeads, 0.5,
                        ref::AttentionMask::Causal, 0, a.ref());
  ref::add<float>(a.cref(), e.cref(), r.ref());
  ref::gelu<float>(r.cref(), false, g.ref());
  Tensor<float> logits = Tensor<float>::zeros({B, kT, kV}), loss = Tensor<float>::zeros({});
  ref::linear<float>(g.cref(), wo.cref(), std::nullopt, logits.ref());
  ref::crossEntropy<float>(logits.cref(), b.targets.cref(), loss.ref());

  EXPECT_EQ(out.at("logits").shape, (std::vector<int64_t>{B, kT, kV}));
  EXPECT_EQ(out.at("logits").values, logits.values);
  EXPECT_EQ(out.at("loss").values, loss.values);
  EXPECT_TRUE(std::isfinite(loss.values[0]));
  // Causal: the first token's logits do not depend on the later tokens.
  TokenBatch changed = b;
  changed.tokens.values[kT - 1] = (changed.tokens.values[kT - 1] + 1) % kV;
  auto out2 = model.run("forward", changed.inputs());
  for (int64_t c = 0; c < kV; ++c)
    EXPECT_EQ(out2.at("logits").values[c], out.at("logits").values[c]);
}

TEST(ModelTest, AttentionGradientsMatchFiniteDifferences) {
  for (KernelSet kernels : {KernelSet::Reference, KernelSet::Fast}) {
    SCOPED_TRACE(kernelSetName(kernels));
    Model model(attentionManifest(), kPath, kernels);
    model.initParameters();
    TokenBatch b = tokenBatch(3);
    checkAgainstFiniteDifferences(model, b.inputs());
  }
}

// ||got - want|| / max(||want||, 1e-6) over a whole tensor, in double.
double relError(const std::vector<float> &got, const std::vector<float> &want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-6);
}

// The same program on both kernel sets, from the same parameters: every
// forward output, the loss and every parameter's gradient agree to 1e-4
// (norm-wise per tensor).
void checkKernelSetsAgree(const Manifest &manifest,
                          const std::map<std::string, HostTensor> &inputs) {
  Model reference(manifest, kPath, KernelSet::Reference);
  Model fast(manifest, kPath);
  EXPECT_EQ(reference.kernels(), KernelSet::Reference);
  EXPECT_EQ(fast.kernels(), KernelSet::Fast); // the default
  reference.initParameters();
  fast.initParameters();
  ASSERT_EQ(fast.parameters(), reference.parameters());
  auto want = reference.run("forward", inputs);
  auto got = fast.run("forward", inputs);
  ASSERT_EQ(got.size(), want.size());
  for (const auto &[name, tensor] : want) {
    EXPECT_EQ(got.at(name).shape, tensor.shape) << name;
    EXPECT_LE(relError(got.at(name).values, tensor.values), 1e-4) << name;
  }
  float wantLoss = 0, gotLoss = 0;
  std::vector<float> wantGrads, gotGrads;
  reference.gradients(inputs, wantLoss, wantGrads);
  fast.gradients(inputs, gotLoss, gotGrads);
  EXPECT_NEAR(gotLoss, wantLoss, 1e-5 * std::abs(wantLoss));
  ASSERT_EQ(gotGrads.size(), wantGrads.size());
  int nonzero = 0;
  for (const ParamSlot &slot : reference.slots()) {
    auto begin = static_cast<std::ptrdiff_t>(slot.offset);
    auto end = begin + static_cast<std::ptrdiff_t>(slot.size);
    std::vector<float> w(wantGrads.begin() + begin, wantGrads.begin() + end);
    std::vector<float> g(gotGrads.begin() + begin, gotGrads.begin() + end);
    EXPECT_LE(relError(g, w), 1e-4) << slot.name;
    nonzero += std::any_of(w.begin(), w.end(), [](float v) { return v != 0.f; });
  }
  EXPECT_GT(nonzero, 0);
  // Again, on buffers the Model's pool recycles (stale data, not zeros): the
  // same numbers exactly.
  for (Model *model : {&reference, &fast}) {
    float loss = 0;
    std::vector<float> grads;
    model->gradients(inputs, loss, grads);
    EXPECT_EQ(loss, model == &fast ? gotLoss : wantLoss) << kernelSetName(model->kernels());
    EXPECT_EQ(grads, model == &fast ? gotGrads : wantGrads) << kernelSetName(model->kernels());
    auto again = model->run("forward", inputs);
    for (const auto &[name, tensor] : model == &fast ? got : want)
      EXPECT_EQ(again.at(name).values, tensor.values) << name;
  }
}

TEST(ModelTest, FastAndReferenceKernelsAgree) {
  for (int64_t batch : {1, 3, 8}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    checkKernelSetsAgree(linearManifest(), linearBatch(batch, 4).inputs());
    checkKernelSetsAgree(linearManifest(true), linearBatch(batch, 5).inputs());
    checkKernelSetsAgree(attentionManifest(), tokenBatch(batch).inputs());
  }
}

TEST(ModelTest, TheBatchSizeComesFromTheInputs) {
  Model model(attentionManifest(), kPath, KernelSet::Reference);
  model.initParameters();
  TokenBatch one = tokenBatch(1), three = tokenBatch(3);
  // Sample 0 of every batch is the same sequence: the same logits.
  auto a = model.run("forward", one.inputs());
  auto c = model.run("forward", three.inputs());
  EXPECT_EQ(c.at("logits").shape, (std::vector<int64_t>{3, kT, kV}));
  for (int64_t i = 0; i < kT * kV; ++i)
    EXPECT_EQ(a.at("logits").values[i], c.at("logits").values[i]);
}

//===----------------------------------------------------------------------===//
// Through the package file: JSON manifest, Package::load, Model
//===----------------------------------------------------------------------===//

// A linear classifier of 2 features into 2 classes with b frozen.
std::string linearJson() {
  return R"({
  "model": "json_linear",
  "inputs": [{"name": "x", "dtype": "f32", "shape": [-1, 2]},
             {"name": "label", "dtype": "i32", "shape": [-1]}],
  "params": [{"name": "w", "shape": [2, 2], "frozen": false, "init": "constant", "value": 0.5},
             {"name": "b", "shape": [2], "frozen": true, "init": "zeros"}],
  "optimizer": {"kind": "sgd", "lr": 0.1, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                "weight_decay": 0.0, "momentum": 0.0, "clip_norm": 0.0,
                "schedule": "constant", "warmup_steps": 0, "min_lr": 0.0},
  "programs": {"forward": )" +
         test::linearForwardProgram(2, 2) + R"(, "gradients": )" +
         test::linearGradientsProgram(2, 2, /*biasGrad=*/false) + "}}";
}

TEST(ModelTest, RunsAPackageFile) {
  TempDir dir;
  std::string path = dir.file("linear.pkg");
  test::writePackageFile(path, linearJson());
  Model model(Package::load(path));
  model.initParameters();
  EXPECT_EQ(model.parameters(), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f, 0.f, 0.f}));
  // w = 0.5 everywhere: both logits equal, so the loss is ln 2 and
  // dlogits = (softmax - onehot) / N = +-1/4 per sample.
  Tensor<float> x({2, 2}, {1.f, 2.f, -1.f, 3.f});
  Tensor<int32_t> label({2}, {0, 1});
  std::map<std::string, HostTensor> inputs = {{"x", HostTensor::of(x)},
                                              {"label", HostTensor::of(label)}};
  auto out = model.run("forward", inputs);
  EXPECT_NEAR(out.at("loss").values[0], std::log(2.0), 1e-6);
  EXPECT_EQ(out.at("logits").values, (std::vector<float>{1.5f, 1.5f, 1.f, 1.f}));
  float loss = 0;
  std::vector<float> grads;
  model.gradients(inputs, loss, grads);
  // dw[i][c] = sum_n x[n][i] dlogits[n][c]; dlogits = [[-1/4, 1/4], [1/4, -1/4]].
  std::vector<float> expected = {-0.25f - 0.25f, 0.25f + 0.25f, -0.5f + 0.75f, 0.5f - 0.75f,
                                 0.f, 0.f};
  ASSERT_EQ(grads.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(grads[i], expected[i], 1e-6) << i;
  // Errors name the package.
  EXPECT_TRUE(failsWith([&] { model.run("forward", {{"x", HostTensor::of(x)}}); }, path,
                        {"missing input 'label'"}));
}

//===----------------------------------------------------------------------===//
// Initialisers
//===----------------------------------------------------------------------===//

TEST(ModelTest, SplitMix64IsVignas) {
  // The generator seeded with 0 outputs splitmix64(0), splitmix64(gamma), ...
  EXPECT_EQ(detail::splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(detail::splitmix64(0x9E3779B97F4A7C15ull), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(detail::splitmix64(2 * 0x9E3779B97F4A7C15ull), 0x06C45D188009454Full);
}

TEST(ModelTest, UnitUniformIsCounterBased) {
  uint64_t seed = 123;
  double u = detail::unitUniform(seed, 7);
  EXPECT_EQ(u, static_cast<double>(detail::splitmix64(seed ^ detail::splitmix64(7)) >> 11) *
                   std::ldexp(1.0, -53));
  EXPECT_EQ(u, detail::unitUniform(seed, 7));
  EXPECT_NE(u, detail::unitUniform(seed, 8));
  EXPECT_NE(u, detail::unitUniform(seed + 1, 7));
  for (uint64_t e = 0; e < 1000; ++e) {
    double v = detail::unitUniform(seed, e);
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
  }
}

TEST(ModelTest, UniformInitialiser) {
  const int64_t n = 10000;
  std::vector<float> a(n), b(n), c(n), prefix(10);
  detail::fillUniform(a.data(), n, -2.0, 3.0, 42);
  detail::fillUniform(b.data(), n, -2.0, 3.0, 42);
  detail::fillUniform(c.data(), n, -2.0, 3.0, 43);
  detail::fillUniform(prefix.data(), 10, -2.0, 3.0, 42);
  EXPECT_EQ(a, b); // same seed, same values
  EXPECT_NE(a, c); // another seed
  // Element e depends only on (seed, e): a shorter parameter is a prefix.
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), a.begin()));
  EXPECT_NE(a[0], a[1]);
  double sum = 0;
  for (int64_t e = 0; e < n; ++e) {
    EXPECT_GE(a[e], -2.f);
    EXPECT_LE(a[e], 3.f);
    EXPECT_EQ(a[e], static_cast<float>(-2.0 + 5.0 * detail::unitUniform(42, e)));
    sum += a[e];
  }
  EXPECT_NEAR(sum / n, 0.5, 0.06); // sd of the mean: 5 / sqrt(12 n) = 0.0144
}

TEST(ModelTest, NormalInitialiser) {
  const int64_t n = 10000;
  std::vector<float> a(n), b(n), c(n);
  detail::fillNormal(a.data(), n, 1.5, 0.25, 7);
  detail::fillNormal(b.data(), n, 1.5, 0.25, 7);
  detail::fillNormal(c.data(), n, 1.5, 0.25, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a[0], a[1]);
  // Element 3: Box-Muller (cosine branch) on u(seed, 6) and u(seed, 7).
  double u1 = detail::unitUniform(7, 6), u2 = detail::unitUniform(7, 7);
  EXPECT_EQ(a[3], static_cast<float>(1.5 + 0.25 * std::sqrt(-2 * std::log(u1)) *
                                                 std::cos(2 * kPi * u2)));
  double sum = 0, sq = 0;
  for (float v : a) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
  }
  double mean = sum / n;
  for (float v : a)
    sq += (v - mean) * (v - mean);
  double sd = std::sqrt(sq / (n - 1));
  EXPECT_NEAR(mean, 1.5, 0.01);  // 4 standard errors (0.25 / 100)
  EXPECT_NEAR(sd, 0.25, 0.0125); // 5%; its standard error is 0.7%
  int within = 0;
  for (float v : a)
    within += std::abs(v - 1.5) < 0.25;
  EXPECT_NEAR(within / double(n), 0.6827, 0.02);
}

TEST(ModelTest, InitParametersRunsEveryInitialiser) {
  TempDir dir;
  std::string file = dir.file("w.safetensors");
  std::vector<float> loaded = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  writeSafetensors(file, {{"wl", DType::F32, {2, 3}, loaded.data()}});

  Manifest m = linearManifest();
  ManifestParam load = constantParam("l", {2, 3}, ParamInit::Load);
  load.file = file;
  load.tensor = "wl";
  m.params.push_back(load);
  m.params.push_back(constantParam("z", {2}, ParamInit::Zeros));
  m.params.push_back(constantParam("o", {2}, ParamInit::Ones));
  m.params.push_back(constantParam("c", {3}, ParamInit::Constant, -0.75));
  m.params.push_back(normalParam("n2", {2, 2}, 0.5, 11)); // w's seed and std: w's first values
  Model model(m, kPath);
  std::fill(model.parameters().begin(), model.parameters().end(), 9.f);
  model.initParameters();

  std::vector<float> w(kIn * kClasses), b(kClasses);
  detail::fillNormal(w.data(), kIn * kClasses, 0.0, 0.5, 11);
  detail::fillUniform(b.data(), kClasses, -0.3, 0.3, 12);
  EXPECT_EQ(slotTensor(model, "w").values, w);
  EXPECT_EQ(slotTensor(model, "b").values, b);
  EXPECT_EQ(slotTensor(model, "l").values, loaded);
  EXPECT_EQ(slotTensor(model, "z").values, (std::vector<float>{0.f, 0.f}));
  EXPECT_EQ(slotTensor(model, "o").values, (std::vector<float>{1.f, 1.f}));
  EXPECT_EQ(slotTensor(model, "c").values, (std::vector<float>{-0.75f, -0.75f, -0.75f}));
  EXPECT_EQ(slotTensor(model, "n2").values, std::vector<float>(w.begin(), w.begin() + 4));
  std::vector<float> before = model.parameters();
  model.initParameters();
  EXPECT_EQ(model.parameters(), before); // reproducible
}

// An init seed draws the random initialisers anew from
// runInitSeed(seed, initSeed) and leaves the others alone; 0 is the package.
TEST(ModelTest, AnInitSeedRedrawsOnlyTheRandomInitialisers) {
  Manifest m = linearManifest(); // w: normal(std 0.5, seed 11); b: uniform(+-0.3, seed 12)
  m.params.push_back(constantParam("c", {3}, ParamInit::Constant, -0.75));
  Model model(m, kPath);
  model.initParameters();
  const std::vector<float> package = model.parameters();
  model.initParameters(0);
  EXPECT_EQ(model.parameters(), package);

  model.initParameters(7);
  EXPECT_EQ(detail::runInitSeed(11, 0), 11u);
  EXPECT_EQ(detail::runInitSeed(11, 7), detail::splitmix64(11 ^ detail::splitmix64(7)));
  std::vector<float> w(kIn * kClasses), b(kClasses);
  detail::fillNormal(w.data(), kIn * kClasses, 0.0, 0.5, detail::runInitSeed(11, 7));
  detail::fillUniform(b.data(), kClasses, -0.3, 0.3, detail::runInitSeed(12, 7));
  EXPECT_EQ(slotTensor(model, "w").values, w);
  EXPECT_EQ(slotTensor(model, "b").values, b);
  EXPECT_EQ(slotTensor(model, "c").values, (std::vector<float>{-0.75f, -0.75f, -0.75f}));
  EXPECT_NE(model.parameters(), package);
  const std::vector<float> seven = model.parameters();
  model.initParameters(8);
  EXPECT_NE(model.parameters(), seven);
  model.initParameters(7);
  EXPECT_EQ(model.parameters(), seven); // reproducible
}

TEST(ModelTest, LoadChecksTheTensor) {
  TempDir dir;
  std::string file = dir.file("w.safetensors");
  std::vector<float> values(6, 1.f);
  std::vector<int32_t> ints(6, 1);
  writeSafetensors(file, {{"wl", DType::F32, {2, 3}, values.data()},
                          {"ints", DType::I32, {2, 3}, ints.data()}});
  auto modelLoading = [&](const std::string &tensor, std::vector<int64_t> shape) {
    Manifest m = linearManifest();
    ManifestParam load = constantParam("l", std::move(shape), ParamInit::Load);
    load.file = file;
    load.tensor = tensor;
    m.params.push_back(load);
    return Model(m, kPath);
  };
  Model wrongShape = modelLoading("wl", {3, 2});
  EXPECT_TRUE(failsWith([&] { wrongShape.initParameters(); }, file,
                        {"'wl'", "[2, 3]", "parameter 'l'", "[3, 2]"}));
  Model missing = modelLoading("nope", {2, 3});
  EXPECT_TRUE(failsWith([&] { missing.initParameters(); }, file, {"no tensor 'nope'"}));
  Model wrongType = modelLoading("ints", {2, 3});
  EXPECT_TRUE(failsWith([&] { wrongType.initParameters(); }, file, {"'ints' is I32", "F32"}));
  Manifest m = linearManifest();
  ManifestParam load = constantParam("l", {2, 3}, ParamInit::Load);
  load.file = dir.file("absent.safetensors");
  load.tensor = "wl";
  m.params.push_back(load);
  Model absent(m, kPath);
  EXPECT_THROW(absent.initParameters(), Error);
}

//===----------------------------------------------------------------------===//
// Input errors
//===----------------------------------------------------------------------===//

TEST(ModelTest, InputErrors) {
  Model model(linearManifest(), kPath);
  model.initParameters();
  Batch b = linearBatch(3, 2);
  Tensor<float> labelsAsFloat = Tensor<float>::zeros({3});
  Tensor<int32_t> xAsInt = Tensor<int32_t>::zeros({3, kIn});
  Tensor<float> wide = Tensor<float>::zeros({3, kIn + 1});
  Tensor<float> flat = Tensor<float>::zeros({3 * kIn});
  Tensor<int32_t> twoLabels = Tensor<int32_t>::zeros({2});
  Tensor<float> empty = Tensor<float>::zeros({0, kIn});
  Tensor<int32_t> noLabels = Tensor<int32_t>::zeros({0});

  auto with = [&](const std::string &name, HostTensor t) {
    auto inputs = b.inputs();
    inputs[name] = t;
    return inputs;
  };
  auto run = [&](std::map<std::string, HostTensor> inputs) {
    return [&model, inputs] { model.run("forward", inputs); };
  };
  EXPECT_TRUE(failsWith(run(with("y", HostTensor::of(b.x))), kPath,
                        {"unknown input 'y'", "x, label"}));
  auto noLabel = b.inputs();
  noLabel.erase("label");
  EXPECT_TRUE(failsWith(run(noLabel), kPath, {"missing input 'label'"}));
  EXPECT_TRUE(failsWith(run(with("label", HostTensor::of(labelsAsFloat))), kPath,
                        {"input 'label' must be i32, got f32"}));
  EXPECT_TRUE(failsWith(run(with("x", HostTensor::of(xAsInt))), kPath,
                        {"input 'x' must be f32, got i32"}));
  EXPECT_TRUE(failsWith(run(with("x", HostTensor::of(wide))), kPath,
                        {"input 'x' must have shape [-1, 4]", "got [3, 5]"}));
  EXPECT_TRUE(failsWith(run(with("x", HostTensor::of(flat))), kPath,
                        {"input 'x' must have shape [-1, 4]", "got [12]"}));
  EXPECT_TRUE(failsWith(run(with("label", HostTensor::of(twoLabels))), kPath,
                        {"inputs disagree on the batch size", "'x' has 3", "'label' has 2"}));
  EXPECT_TRUE(failsWith(run({{"x", HostTensor::of(empty)}, {"label", HostTensor::of(noLabels)}}),
                        kPath, {"batch size must be at least 1"}));
  EXPECT_TRUE(failsWith(run(with("x", HostTensor(static_cast<const float *>(nullptr), {3, kIn}))),
                        kPath, {"input 'x' has no data"}));
  float loss;
  std::vector<float> grads;
  EXPECT_TRUE(failsWith([&] { model.gradients(with("label", HostTensor::of(twoLabels)), loss, grads); },
                        kPath, {"inputs disagree on the batch size"}));
  EXPECT_TRUE(failsWith([&] { model.run("backward", b.inputs()); }, kPath,
                        {"no program 'backward'"}));
}

TEST(ModelTest, KernelErrorsNameTheOp) {
  Model model(linearManifest(), kPath);
  model.initParameters();
  Batch b = linearBatch(2, 2);
  b.label.values[1] = kClasses; // out of range
  EXPECT_TRUE(failsWith([&] { model.run("forward", b.inputs()); }, kPath,
                        {"program 'forward', op #3 (pe.cross_entropy)"}));
}

TEST(ModelTest, AResizedParameterBufferIsAnError) {
  Model model(linearManifest(), kPath);
  model.parameters().push_back(1.f);
  Batch b = linearBatch(2, 2);
  EXPECT_TRUE(failsWith([&] { model.run("forward", b.inputs()); }, kPath,
                        {"the parameter buffer has 16 elements, the model 15"}));
}

//===----------------------------------------------------------------------===//
// Program errors (caught at construction)
//===----------------------------------------------------------------------===//

TEST(ModelTest, MalformedProgramsAreRejected) {
  {
    Manifest m = linearManifest();
    m.forward.ops[2].op = "pe.frobnicate";
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"program 'forward', op #2 (pe.frobnicate)", "no such op"}));
  }
  {
    Manifest m = linearManifest();
    std::swap(m.forward.ops[2], m.forward.ops[3]); // cross_entropy before linear
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath, {"used before it is defined"}));
  }
  {
    Manifest m = linearManifest();
    m.forward.ops[2].operands.push_back(0); // linear with 4 operands
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"takes 2 to 3 operands, got 4"}));
  }
  {
    Manifest m = linearManifest();
    m.forward.ops[0].attrs["param"] = std::string("nope");
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath, {"no parameter 'nope'"}));
  }
  {
    Manifest m = linearManifest();
    m.params[0].shape = {kIn, kClasses + 1}; // get_param's type no longer matches
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"parameter 'w' is f32 [4, 4], the result is f32 [4, 3]"}));
  }
  {
    Manifest m = linearManifest();
    m.gradients.outputs[1].grad = "b";
    m.gradients.outputs.pop_back(); // "grad:b" twice otherwise; now b's grad has w's shape
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"the gradient of 'b' is f32 [4, 3]"}));
  }
  {
    Manifest m = linearManifest(true);
    m.params[1].frozen = false;
    m.params[0].frozen = true; // w is frozen but has a gradient
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath,
                          {"parameter 'w' is frozen but has a gradient"}));
  }
  {
    Manifest m = linearManifest();
    m.forward.outputs[1].value = 99;
    EXPECT_TRUE(failsWith([&] { Model model(m, kPath); }, kPath, {"output 'logits'", "99"}));
  }
}

//===----------------------------------------------------------------------===//
// The executor: freeing after the last use, attributes, constants
//===----------------------------------------------------------------------===//

TEST(ModelTest, ValuesAreFreedAfterTheirLastUse) {
  // x -> relu -> scale -> relu -> scale -> mean: at most two activations live.
  const int64_t width = 1000;
  ProgramBuilder b;
  ValueId x = b.input(f32({-1, width}));
  ValueId y1 = b.op1("pe.relu", {x}, f32({-1, width}));
  ValueId y2 = b.op1("pe.scale", {y1}, f32({-1, width}), {{"factor", 2.0}, {"bias", 1.0}});
  ValueId y3 = b.op1("pe.relu", {y2}, f32({-1, width}));
  ValueId y4 = b.op1("pe.scale", {y3}, f32({-1, width}), {{"factor", 0.5}, {"bias", 0.0}});
  ValueId loss = b.op1("pe.mean", {y4}, f32({}));
  b.output("loss", loss);
  detail::Executor exec(b.program, "forward", {});
  ASSERT_EQ(exec.freeAfter().size(), 5u);
  EXPECT_EQ(exec.freeAfter()[0], std::vector<ValueId>{x});
  EXPECT_EQ(exec.freeAfter()[1], std::vector<ValueId>{y1});
  EXPECT_EQ(exec.freeAfter()[4], std::vector<ValueId>{y4});

  const int64_t batch = 8;
  std::vector<float> in(batch * width);
  std::iota(in.begin(), in.end(), -100.f);
  detail::RunStats stats;
  auto out = exec.run({HostTensor(in.data(), {batch, width})}, batch, nullptr, &stats);
  const int64_t act = batch * width * 4;
  EXPECT_EQ(stats.totalBytes, 4 * act + 4);
  EXPECT_EQ(stats.peakBytes, 2 * act);
  double expected = 0;
  for (float v : in)
    expected += 0.5 * std::max(0.0, 2.0 * std::max(0.0f, v) + 1.0);
  expected /= static_cast<double>(in.size());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0].values[0], expected, 1e-3);
}

TEST(ModelTest, UnusedResultsAreFreedRightAway) {
  ProgramBuilder b;
  ValueId x = b.input(f32({-1, 3, 4}));
  ValueId g = b.constant(1.0, {4});
  std::vector<ValueId> ln = b.op("pe.layer_norm_grad", {x, g, x},
                                 {f32({-1, 3, 4}), f32({4}), f32({4})}, {{"epsilon", 1e-5}});
  ValueId loss = b.op1("pe.mean", {ln[1]}, f32({}));
  b.output("loss", loss);
  detail::Executor exec(b.program, "forward", {});
  // After layer_norm_grad: x and g (last read), dx and dbeta (never read).
  std::vector<ValueId> freed = exec.freeAfter()[1];
  std::sort(freed.begin(), freed.end());
  EXPECT_EQ(freed, (std::vector<ValueId>{x, g, ln[0], ln[2]}));
}

TEST(ModelTest, ConstantsAndConstantTables) {
  ProgramBuilder b;
  ValueId c = b.constant(2.5, {2, 3});
  ValueId pos = b.op1("pe.grid_positions", {}, f32({5, 2}),
                      {{"rows", int64_t(2)}, {"cols", int64_t(2)}, {"special", int64_t(1)}});
  ValueId sin = b.op1("pe.sinusoidal", {}, f32({3, 4}),
                      {{"length", int64_t(3)}, {"dim", int64_t(4)}, {"base", 10000.0}});
  ValueId loss = b.op1("pe.mean", {c}, f32({}));
  b.output("loss", loss);
  b.output("c", c);
  b.output("pos", pos);
  b.output("sin", sin);
  Manifest m;
  m.forward = b.program;
  m.gradients = b.program;
  Model model(m);
  auto out = model.run("forward", {});
  EXPECT_EQ(out.at("loss").values, std::vector<float>{2.5f});
  EXPECT_EQ(out.at("c").values, std::vector<float>(6, 2.5f));
  EXPECT_EQ(out.at("c").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out.at("pos").values,
            (std::vector<float>{0, 0, 0, 0, 1, 0, 0, 1, 1, 1}));
  Tensor<float> sinRef = Tensor<float>::zeros({3, 4});
  ref::sinusoidal<float>(3, 4, 10000.0, sinRef.ref());
  EXPECT_EQ(out.at("sin").values, sinRef.values);
}

TEST(ModelTest, MeanGradOverTheBatch) {
  // loss = mean(x * w) over everything (batch included): dw = mean_b x.
  ProgramBuilder b;
  ValueId x = b.input(f32({-1, 3}));
  ValueId w = b.param("w", {3});
  ValueId y = b.op1("pe.mul", {x, w}, f32({-1, 3}));
  ValueId m0 = b.op1("pe.mean", {y}, f32({3}), {{"axis", int64_t(0)}});
  ValueId loss = b.op1("pe.mean", {m0}, f32({}));
  ValueId one = b.constant(1.0);
  ValueId dm0 = b.op1("pe.mean_grad", {m0, one}, f32({3}));
  ValueId dy = b.op1("pe.mean_grad", {y, dm0}, f32({-1, 3}), {{"axis", int64_t(0)}});
  ValueId dprod = b.op1("pe.mul", {dy, x}, f32({-1, 3}));
  ValueId dw = b.op1("pe.sum_to", {dprod}, f32({3}));
  b.output("loss", loss);
  b.grad("w", dw);
  Manifest m;
  m.inputs = {input("x", DType::F32, {-1, 3})};
  m.params = {constantParam("w", {3}, ParamInit::Constant, 2.0)};
  m.forward = b.program;
  m.gradients = b.program;
  Model model(m, kPath);
  model.initParameters();
  Tensor<float> xs({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  float loss0 = 0;
  std::vector<float> grads;
  model.gradients({{"x", HostTensor::of(xs)}}, loss0, grads);
  EXPECT_FLOAT_EQ(loss0, 2.f * 6.5f);
  // dw[c] = mean over b of x[b][c] / 3.
  EXPECT_FLOAT_EQ(grads[0], 5.5f / 3);
  EXPECT_FLOAT_EQ(grads[1], 6.5f / 3);
  EXPECT_FLOAT_EQ(grads[2], 7.5f / 3);
}

TEST(ModelTest, AttentionAttributeErrors) {
  Manifest m = attentionManifest();
  for (ProgramOp &op : m.forward.ops)
    if (op.op == "pe.attention")
      op.attrs["skip_base"] = int64_t(1); // only with mask skip
  Model model(m, kPath);
  model.initParameters();
  TokenBatch b = tokenBatch(1);
  EXPECT_TRUE(failsWith([&] { model.run("forward", b.inputs()); }, kPath,
                        {"pe.attention", "skip_base goes with mask skip"}));
}

} // namespace
} // namespace stringrt
