// The optimizer against values computed by hand from pe.optimizer's formulas
// (PEModuleOps.td): AdamW and SGD over three steps, global-norm clipping, the
// learning-rate schedules, frozen parameters, the EMA of the weights.
#include "stringrt/Optimizer.h"

#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"
#include "training/AdamWUpdate.h"
#include "TestFiles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace stringrt {
namespace {

constexpr double kTol = 1e-6;

// Slot "w" (2 elements, trainable) then "f" (1 element, frozen).
std::vector<OptimizerSlot> twoSlots() {
  return {{"w", {2}, 0, 2, false}, {"f", {1}, 2, 1, true}};
}

ManifestOptimizer adamw() {
  ManifestOptimizer c;
  c.kind = OptimizerKind::AdamW;
  c.lr = 0.1;
  c.beta1 = 0.9;
  c.beta2 = 0.999;
  c.eps = 1e-8;
  c.weightDecay = 0.01;
  return c;
}

ManifestOptimizer sgd(double momentum, double weightDecay) {
  ManifestOptimizer c;
  c.kind = OptimizerKind::Sgd;
  c.lr = 0.1;
  c.momentum = momentum;
  c.weightDecay = weightDecay;
  return c;
}

// Gradients of w for steps 1..3; the frozen slot always gets a large one.
const float kGrads[3][2] = {{0.5f, -1.0f}, {0.25f, 0.5f}, {-1.0f, 2.0f}};

TEST(OptimizerTest, AdamWThreeSteps) {
  Optimizer opt(adamw(), twoSlots(), 3);
  std::vector<float> params = {1.0f, -2.0f, 7.0f};
  // Step 1: m = 0.1 g, v = 0.001 g^2, so m^ = g, v^ = g^2 and the update is
  // g / (|g| + eps) + wd w: w0 = 1 - 0.1 (0.99999998 + 0.01) = 0.899.
  // Step 2: m0 = 0.9 * 0.05 + 0.1 * 0.25 = 0.07, v0 = 0.999 * 0.00025 + 0.001 *
  // 0.0625 = 0.00031225; m^ = 0.07 / 0.19, v^ = 0.00031225 / 0.001999;
  // w0 = 0.899 - 0.1 (0.932183 + 0.00899) = 0.804883.
  const float expectW[3][2] = {{0.899f, -1.898f},
                               {0.804883003f, -1.86946833f},
                               {0.824713826f, -1.91333199f}};
  const float expectM[3][2] = {
      {0.05f, -0.1f}, {0.07f, -0.04f}, {-0.037f, 0.164f}};
  const float expectV[3][2] = {{0.00025f, 0.001f},
                               {0.00031225f, 0.001249f},
                               {0.00131193781f, 0.00524775125f}};
  for (int t = 0; t < 3; ++t) {
    std::vector<float> grads = {kGrads[t][0], kGrads[t][1], 100.0f};
    std::vector<float> before = grads;
    OptimizerStepInfo info = opt.step(params, grads, 10);
    EXPECT_EQ(info.step, t + 1);
    EXPECT_EQ(opt.stepCount(), t + 1);
    EXPECT_DOUBLE_EQ(info.lr, 0.1);
    EXPECT_EQ(grads, before); // Gradients are not modified.
    auto state = opt.stateBuffers();
    ASSERT_EQ(state.size(), 2u);
    EXPECT_EQ(state[0].prefix, "adam.m.");
    EXPECT_EQ(state[1].prefix, "adam.v.");
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(params[i], expectW[t][i], kTol) << "step " << t + 1;
      EXPECT_NEAR((*state[0].values)[i], expectM[t][i],
                  1e-6 * std::fabs(expectM[t][i]));
      EXPECT_NEAR((*state[1].values)[i], expectV[t][i],
                  1e-6 * std::fabs(expectV[t][i]));
    }
    // Frozen: parameter and state untouched.
    EXPECT_EQ(params[2], 7.0f);
    EXPECT_EQ((*state[0].values)[2], 0.0f);
    EXPECT_EQ((*state[1].values)[2], 0.0f);
  }
}

TEST(OptimizerTest, SgdMomentumWeightDecayThreeSteps) {
  Optimizer opt(sgd(0.9, 0.1), twoSlots(), 3);
  std::vector<float> params = {1.0f, -2.0f, 7.0f};
  // u = 0.9 u + g + 0.1 w, w -= 0.1 u.
  // Step 1: u0 = 0.5 + 0.1 = 0.6, w0 = 0.94; u1 = -1 - 0.2 = -1.2, w1 = -1.88.
  // Step 2: u0 = 0.54 + 0.25 + 0.094 = 0.884, w0 = 0.8516;
  //         u1 = -1.08 + 0.5 - 0.188 = -0.768, w1 = -1.8032.
  // Step 3: u0 = 0.7956 - 1 + 0.08516 = -0.11924, w0 = 0.863524;
  //         u1 = -0.6912 + 2 - 0.18032 = 1.12848, w1 = -1.916048.
  const float expectW[3][2] = {
      {0.94f, -1.88f}, {0.8516f, -1.8032f}, {0.863524f, -1.916048f}};
  const float expectU[3][2] = {
      {0.6f, -1.2f}, {0.884f, -0.768f}, {-0.11924f, 1.12848f}};
  for (int t = 0; t < 3; ++t) {
    std::vector<float> grads = {kGrads[t][0], kGrads[t][1], -5.0f};
    opt.step(params, grads, 3);
    auto state = opt.stateBuffers();
    ASSERT_EQ(state.size(), 1u);
    EXPECT_EQ(state[0].prefix, "sgd.u.");
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(params[i], expectW[t][i], kTol) << "step " << t + 1;
      EXPECT_NEAR((*state[0].values)[i], expectU[t][i], kTol);
    }
    EXPECT_EQ(params[2], 7.0f);
    EXPECT_EQ((*state[0].values)[2], 0.0f);
  }
}

TEST(OptimizerTest, PlainSgdIsGradientDescent) {
  Optimizer opt(sgd(0.0, 0.0), {{"w", {2}, 0, 2, false}}, 2);
  std::vector<float> params = {1.0f, 2.0f};
  opt.step(params, {0.5f, -0.5f}, 1);
  EXPECT_FLOAT_EQ(params[0], 0.95f);
  EXPECT_FLOAT_EQ(params[1], 2.05f);
}

TEST(OptimizerTest, GlobalNormClipping) {
  ManifestOptimizer c = sgd(0.0, 0.0);
  c.lr = 1.0;
  c.clipNorm = 1.0;
  // Two trainable slots (norm over both: sqrt(3^2 + 4^2) = 5) and a frozen
  // one whose gradient does not count.
  std::vector<OptimizerSlot> slots = {{"a", {1}, 0, 1, false},
                                      {"b", {1}, 1, 1, false},
                                      {"f", {1}, 2, 1, true}};
  Optimizer opt(c, slots, 3);
  std::vector<float> params = {0.0f, 0.0f, 1.0f};
  OptimizerStepInfo info = opt.step(params, {3.0f, 4.0f, 1000.0f}, 10);
  EXPECT_DOUBLE_EQ(info.gradNorm, 5.0);
  EXPECT_DOUBLE_EQ(info.clipScale, 0.2);
  EXPECT_FLOAT_EQ(params[0], -0.6f);
  EXPECT_FLOAT_EQ(params[1], -0.8f);
  EXPECT_EQ(params[2], 1.0f);

  // A norm below the threshold is left alone.
  info = opt.step(params, {0.3f, 0.4f, 1000.0f}, 10);
  EXPECT_NEAR(info.gradNorm, 0.5, 1e-7);
  EXPECT_DOUBLE_EQ(info.clipScale, 1.0);
  EXPECT_NEAR(params[0], -0.9f, kTol);
  EXPECT_NEAR(params[1], -1.2f, kTol);
}

TEST(OptimizerTest, ClippingAppliesBeforeAdamMoments) {
  ManifestOptimizer c = adamw();
  c.weightDecay = 0.0;
  c.clipNorm = 0.5;
  Optimizer opt(c, {{"w", {2}, 0, 2, false}}, 2);
  std::vector<float> params = {0.0f, 0.0f};
  opt.step(params, {3.0f, 4.0f}, 10);
  // g is scaled by 0.1 to (0.3, 0.4); m = 0.1 g.
  auto state = opt.stateBuffers();
  EXPECT_NEAR((*state[0].values)[0], 0.03f, 1e-8);
  EXPECT_NEAR((*state[0].values)[1], 0.04f, 1e-8);
  EXPECT_NEAR((*state[1].values)[1], 0.001 * 0.16, 1e-10);
}

TEST(OptimizerTest, GlobalNorm) {
  EXPECT_DOUBLE_EQ(globalNorm(std::vector<float>{3.0f, 4.0f}), 5.0);
  EXPECT_DOUBLE_EQ(globalNorm(std::vector<float>{}), 0.0);
  EXPECT_DOUBLE_EQ(globalNorm(std::vector<float>{-2.0f, 0.0f, 0.0f}), 2.0);
}

TEST(OptimizerTest, ConstantSchedule) {
  ManifestOptimizer c;
  c.lr = 0.25;
  EXPECT_DOUBLE_EQ(learningRate(c, 1, 100), 0.25);
  EXPECT_DOUBLE_EQ(learningRate(c, 100, 100), 0.25);
  EXPECT_DOUBLE_EQ(learningRate(c, 500, 100), 0.25);
}

TEST(OptimizerTest, WarmupCosineSchedule) {
  ManifestOptimizer c;
  c.lr = 1.0;
  c.minLr = 0.1;
  c.schedule = LrSchedule::WarmupCosine;
  c.warmupSteps = 10;
  const int64_t n = 110;
  // Warmup: lr t / warmup.
  EXPECT_DOUBLE_EQ(learningRate(c, 1, n), 0.1);
  EXPECT_DOUBLE_EQ(learningRate(c, 5, n), 0.5);
  EXPECT_DOUBLE_EQ(learningRate(c, 10, n), 1.0);
  // Middle of the cosine: min_lr + (lr - min_lr) / 2.
  EXPECT_NEAR(learningRate(c, 60, n), 0.55, 1e-12);
  // A quarter in: min_lr + 0.9 (1 + cos(pi / 4)) / 2.
  EXPECT_NEAR(learningRate(c, 35, n),
              0.1 + 0.9 * (1 + std::cos(3.14159265358979323846 / 4)) / 2, 1e-12);
  // End of the run, and beyond it.
  EXPECT_NEAR(learningRate(c, n, n), 0.1, 1e-12);
  EXPECT_NEAR(learningRate(c, n + 50, n), 0.1, 1e-12);

  // No warmup: step 1 of 2 is the middle.
  c.warmupSteps = 0;
  EXPECT_NEAR(learningRate(c, 1, 2), 0.55, 1e-12);
  EXPECT_NEAR(learningRate(c, 2, 2), 0.1, 1e-12);
  // A run shorter than its warmup ends in warmup.
  c.warmupSteps = 100;
  EXPECT_DOUBLE_EQ(learningRate(c, 20, 20), 0.2);

  EXPECT_THROW(learningRate(c, 0, 20), Error);
  EXPECT_THROW(learningRate(c, 1, 0), Error);
}

TEST(OptimizerTest, ScheduleDrivesSteps) {
  ManifestOptimizer c = sgd(0.0, 0.0);
  c.lr = 1.0;
  c.schedule = LrSchedule::WarmupCosine;
  c.warmupSteps = 2;
  Optimizer opt(c, {{"w", {1}, 0, 1, false}}, 1);
  std::vector<float> params = {0.0f};
  EXPECT_DOUBLE_EQ(opt.step(params, {1.0f}, 4).lr, 0.5);
  EXPECT_FLOAT_EQ(params[0], -0.5f);
  EXPECT_DOUBLE_EQ(opt.step(params, {1.0f}, 4).lr, 1.0);
  EXPECT_NEAR(opt.step(params, {1.0f}, 4).lr, 0.5, 1e-12);
  EXPECT_NEAR(opt.step(params, {1.0f}, 4).lr, 0.0, 1e-12);
  // Resuming sets the step count the schedule continues from.
  opt.setStepCount(1);
  EXPECT_DOUBLE_EQ(opt.step(params, {0.0f}, 4).lr, 1.0);
  EXPECT_THROW(opt.setStepCount(-1), Error);
}

TEST(OptimizerTest, FrozenOnlyModelNeverChanges) {
  Optimizer opt(adamw(), {{"f", {2}, 0, 2, true}}, 2);
  std::vector<float> params = {1.0f, 2.0f};
  OptimizerStepInfo info = opt.step(params, {5.0f, 5.0f}, 1);
  EXPECT_EQ(params, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_DOUBLE_EQ(info.gradNorm, 0.0);
}

// ema_decay d: e = w after step 1, then e = d e + (1 - d) w; frozen slots
// are the parameters themselves; the state buffer "ema." is checkpointed.
TEST(OptimizerTest, EmaOfTheWeights) {
  ManifestOptimizer c = sgd(0.9, 0.1);
  c.emaDecay = 0.75;
  Optimizer opt(c, twoSlots(), 3);
  ASSERT_TRUE(opt.hasEma());
  std::vector<float> params = {1.0f, -2.0f, 7.0f};
  EXPECT_EQ(opt.emaParameters(params), params); // before any step
  // The weights after each step: SgdMomentumWeightDecayThreeSteps's.
  const double w[3][2] = {{0.94, -1.88}, {0.8516, -1.8032}, {0.863524, -1.916048}};
  double e[2] = {w[0][0], w[0][1]};
  for (int t = 0; t < 3; ++t) {
    std::vector<float> grads = {kGrads[t][0], kGrads[t][1], -5.0f};
    opt.step(params, grads, 3);
    if (t > 0)
      for (int i = 0; i < 2; ++i)
        e[i] = 0.75 * e[i] + 0.25 * w[t][i];
    std::vector<float> ema = opt.emaParameters(params);
    for (int i = 0; i < 2; ++i)
      EXPECT_NEAR(ema[i], e[i], kTol) << "step " << t + 1;
    EXPECT_EQ(ema[2], 7.0f); // frozen: the parameter
  }
  auto state = opt.stateBuffers();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[1].prefix, "ema.");
  EXPECT_NEAR((*state[1].values)[0], e[0], kTol);
  // The weights themselves are untouched by the EMA: the plain run's.
  EXPECT_NEAR(params[0], w[2][0], kTol);

  Optimizer plain(sgd(0.9, 0.1), twoSlots(), 3);
  EXPECT_FALSE(plain.hasEma());
  EXPECT_EQ(plain.stateBuffers().size(), 1u);
  EXPECT_THROW(plain.emaParameters(params), Error);
  EXPECT_THROW(opt.emaParameters({1.0f}), Error);
}

// Large slots are updated in parallel chunks over the CPU pool (runs of
// adjacent trainable slots merged, frozen ones skipped): every thread count
// gives the same bits, the frozen slot keeps its values, and the trainable
// ones follow AdamW's formula (AdamWThreeSteps) and the EMA's.
TEST(OptimizerTest, AnyThreadCountGivesTheSameBits) {
  // a [0, 50000) trainable, f [50000, 51000) frozen, then b and c adjacent.
  const std::vector<OptimizerSlot> slots = {{"a", {50000}, 0, 50000, false},
                                            {"f", {1000}, 50000, 1000, true},
                                            {"b", {40000}, 51000, 40000, false},
                                            {"c", {30000}, 91000, 30000, false}};
  const size_t n = 121000;
  ManifestOptimizer c = adamw();
  c.lr = 1e-3;
  c.clipNorm = 0; // the formula below has no clipping
  c.emaDecay = 0.9;
  auto initial = [&] {
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i)
      w[i] = std::sin(0.001f * static_cast<float>(i));
    return w;
  };
  auto grads = [&](int t) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i)
      g[i] = std::cos(0.002f * static_cast<float>(i) + static_cast<float>(t));
    return g;
  };
  struct Result {
    std::vector<float> params, m, v, ema;
  };
  auto run = [&](int threads) {
    cpu::setNumThreads(threads);
    Optimizer opt(c, slots, n);
    std::vector<float> params = initial();
    for (int t = 0; t < 3; ++t)
      opt.step(params, grads(t), 3);
    auto state = opt.stateBuffers();
    return Result{params, *state[0].values, *state[1].values, opt.emaParameters(params)};
  };
  auto sameBits = [](const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  const int original = cpu::numThreads();
  const Result one = run(1);
  for (int threads : {2, 4, 7}) {
    const Result r = run(threads);
    EXPECT_TRUE(sameBits(r.params, one.params)) << threads << " threads";
    EXPECT_TRUE(sameBits(r.m, one.m)) << threads << " threads";
    EXPECT_TRUE(sameBits(r.v, one.v)) << threads << " threads";
    EXPECT_TRUE(sameBits(r.ema, one.ema)) << threads << " threads";
  }
  cpu::setNumThreads(original);

  // By hand, in double: AdamW's moments and update, the EMA.
  const std::vector<float> w0 = initial();
  for (size_t i : {size_t{0}, size_t{31337}, size_t{49999}, size_t{51000}, size_t{90999},
                   size_t{91000}, size_t{120999}}) {
    double w = w0[i], m = 0, v = 0, e = 0;
    for (int t = 0; t < 3; ++t) {
      const double g = grads(t)[i];
      m = 0.9 * m + 0.1 * g;
      v = 0.999 * v + 0.001 * g * g;
      const double mHat = m / (1 - std::pow(0.9, t + 1)), vHat = v / (1 - std::pow(0.999, t + 1));
      w -= 1e-3 * (mHat / (std::sqrt(vHat) + 1e-8) + 0.01 * w);
      e = t == 0 ? w : 0.9 * e + 0.1 * w;
    }
    EXPECT_NEAR(one.params[i], w, 1e-6) << "element " << i;
    EXPECT_NEAR(one.m[i], m, 1e-6) << "element " << i;
    EXPECT_NEAR(one.ema[i], e, 1e-6) << "element " << i;
  }
  for (size_t i = 50000; i < 51000; ++i)
    ASSERT_EQ(one.params[i], w0[i]) << "frozen element " << i;
}

// The AVX2 update (four elements at a time, on CPUs that have it) against
// the element-at-a-time loop: the same bits, for ranges whose ends are not
// multiples of four, with and without clipping, early and late steps.
TEST(OptimizerTest, VectorAdamWUpdateIsBitForBitTheScalarLoop) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t n = 1003;
  std::vector<float> grads(n), params(n), m(n), v(n);
  for (size_t i = 0; i < n; ++i) {
    grads[i] = normal(rng) * (i % 7 == 0 ? 1e-6f : 1.0f);
    params[i] = normal(rng);
    m[i] = 0.1f * normal(rng);
    v[i] = i % 11 == 0 ? 0.0f : std::fabs(0.01f * normal(rng));
  }
  for (double step : {1.0, 2.0, 500.0})
    for (double clip : {1.0, 0.37}) {
      SCOPED_TRACE("step " + std::to_string(step) + ", clip " + std::to_string(clip));
      const detail::AdamWConstants c{2e-3, 0.05, clip, 0.9, 0.999, 1e-8,
                                     1.0 - std::pow(0.9, step), 1.0 - std::pow(0.999, step)};
      std::vector<float> p1 = params, m1 = m, v1 = v, p2 = params, m2 = m, v2 = v;
      detail::adamwUpdate(c, grads.data(), p1.data(), m1.data(), v1.data(), 3, n);
      detail::adamwUpdateScalar(c, grads.data(), p2.data(), m2.data(), v2.data(), 3, n);
      EXPECT_EQ(0, std::memcmp(p1.data(), p2.data(), n * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(m1.data(), m2.data(), n * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(v1.data(), v2.data(), n * sizeof(float)));
      EXPECT_EQ(p1[0], params[0]); // outside the range: untouched
      EXPECT_NE(p1[n - 1], params[n - 1]);
    }
}

// ZeRO-1's pieces (stringrt/Distributed.h): shards of the state in order,
// each continuing the squared norm of the one before and then stepping its
// elements with the whole sum, take step()'s bits: the parameters, the state
// and the EMA, with a frozen slot between trainable ones, shard boundaries
// inside slots, an empty shard and clipping in effect.
TEST(OptimizerTest, ShardsInOrderTakeTheWholeStep) {
  const std::vector<OptimizerSlot> slots = {
      {"a", {5}, 0, 5, false}, {"f", {3}, 5, 3, true}, {"c", {9}, 8, 9, false}};
  const std::vector<size_t> cuts = {0, 3, 6, 6, 11, 17};
  for (ManifestOptimizer c : {adamw(), sgd(0.9, 0.01)}) {
    SCOPED_TRACE(c.kind == OptimizerKind::AdamW ? "adamw" : "sgd");
    c.clipNorm = 0.5;
    c.emaDecay = 0.9;
    Optimizer whole(c, slots, 17);
    std::vector<Optimizer> shards;
    for (size_t k = 0; k + 1 < cuts.size(); ++k)
      shards.push_back(whole.shard(cuts[k], cuts[k + 1]));
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> params(17);
    for (float &p : params)
      p = normal(rng);
    std::vector<float> sharded = params;
    for (int step = 0; step < 3; ++step) {
      std::vector<float> grads(17);
      for (float &g : grads)
        g = normal(rng);
      const OptimizerStepInfo want = whole.step(params, grads, 10);
      double sum = 0;
      for (size_t k = 0; k < shards.size(); ++k)
        sum = shards[k].squaredNorm(grads.data() + cuts[k], sum);
      for (size_t k = 0; k < shards.size(); ++k) {
        const OptimizerStepInfo got =
            shards[k].stepShard(sharded, grads.data() + cuts[k], sum, 10);
        EXPECT_EQ(got.gradNorm, want.gradNorm);
        EXPECT_EQ(got.clipScale, want.clipScale);
        EXPECT_EQ(got.lr, want.lr);
        EXPECT_EQ(shards[k].stepCount(), whole.stepCount());
      }
      EXPECT_LT(want.clipScale, 1.0);
      EXPECT_EQ(sharded, params) << "step " << step + 1;
    }
    const auto buffers = whole.stateBuffers();
    for (size_t b = 0; b < buffers.size(); ++b) {
      std::vector<float> joined;
      for (const Optimizer &shard : shards) {
        const std::vector<float> &part = *shard.stateBuffers()[b].values;
        EXPECT_EQ(part.size(), shard.stateEnd() - shard.stateBegin());
        joined.insert(joined.end(), part.begin(), part.end());
      }
      EXPECT_EQ(joined, *buffers[b].values) << buffers[b].prefix;
    }
    const std::vector<float> ema = whole.emaParameters(params);
    for (size_t k = 0; k < shards.size(); ++k) {
      const std::vector<float> mine = shards[k].emaParameters(params);
      for (size_t i = 0; i < 17; ++i)
        EXPECT_EQ(mine[i], i >= cuts[k] && i < cuts[k + 1] ? ema[i] : params[i]) << i;
    }
  }

  Optimizer whole(adamw(), slots, 17);
  Optimizer shard = whole.shard(3, 6);
  std::vector<float> params(17, 1.0f), grads(17, 1.0f);
  EXPECT_TRUE(test::failsWith([&] { shard.step(params, grads, 1); }, "",
                              {"holds the state of elements [3, 6) of 17: its step needs the "
                               "whole gradient's norm"}));
  EXPECT_TRUE(test::failsWith([&] { shard.shard(2, 6); }, "",
                              {"[2, 6), but this optimizer holds [3, 6)"}));
  EXPECT_TRUE(shard.shard(0, 0).hasEma() == whole.hasEma());
  const Optimizer reversed(adamw(), {{"c", {2}, 2, 2, false}, {"a", {2}, 0, 2, false}}, 4);
  EXPECT_TRUE(test::failsWith([&] { reversed.shard(0, 2); }, "",
                              {"slot 'a' lies before slot 'c'"}));
}

TEST(OptimizerTest, RejectsBadConfigurationAndBuffers) {
  ManifestOptimizer c = adamw();
  c.lr = 0.0;
  EXPECT_THROW(Optimizer(c, {}, 0), Error);
  c = adamw();
  c.beta1 = 1.0;
  EXPECT_THROW(Optimizer(c, {}, 0), Error);
  c = adamw();
  c.minLr = 1.0;
  EXPECT_THROW(Optimizer(c, {}, 0), Error);
  c = sgd(1.0, 0.0);
  EXPECT_THROW(Optimizer(c, {}, 0), Error);
  for (double ema : {1.0, -0.5, std::nan("")}) {
    c = adamw();
    c.emaDecay = ema;
    EXPECT_THROW(Optimizer(c, {}, 0), Error);
  }
  // Slots outside the buffer, or overlapping.
  EXPECT_THROW(Optimizer(adamw(), {{"w", {4}, 0, 4, false}}, 3), Error);
  EXPECT_THROW(Optimizer(adamw(),
                         {{"a", {2}, 0, 2, false}, {"b", {2}, 1, 2, false}}, 3),
               Error);
  Optimizer opt(adamw(), {{"w", {2}, 0, 2, false}}, 2);
  std::vector<float> params = {0.0f, 0.0f};
  EXPECT_THROW(opt.step(params, {1.0f}, 1), Error);
  EXPECT_EQ(opt.stepCount(), 0);
}

} // namespace
} // namespace stringrt
