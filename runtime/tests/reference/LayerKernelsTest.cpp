// Reference kernels linear, layer_norm, gelu, dropout: forward on hand-computed
// cases and identities, backward against central finite differences (double),
// float vs double agreement of the forward kernels. (relu's tests run it
// through its registration: runtime/tests/ops/layer/ReluTest.cpp.)
#include "stringrt/reference/LayerKernels.h"

#include "FiniteDifference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

namespace {

using namespace stringrt::ref;
using TD = Tensor<double>;

//===--- linear ------------------------------------------------------------===//

TEST(LinearKernel, HandComputedWithAndWithoutBias) {
  TD x({2, 3}, {1, 2, 3, 4, 5, 6});
  TD w({3, 2}, {1, 0, 0, 1, 1, 1});
  TD b({2}, {0.5, -1});
  TD y = TD::zeros({2, 2});
  linear(x.cref(), w.cref(), b.cref(), y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{4.5, 4, 10.5, 10}));
  linear<double>(x.cref(), w.cref(), std::nullopt, y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{4, 5, 10, 11}));
}

TEST(LinearKernel, RejectsMismatchedShapes) {
  TD x = TD::zeros({2, 3}), w = TD::zeros({4, 2}), y = TD::zeros({2, 2});
  EXPECT_THROW(linear<double>(x.cref(), w.cref(), std::nullopt, y.ref()), stringrt::Error);
  TD w2 = TD::zeros({3, 2}), b = TD::zeros({3});
  EXPECT_THROW(linear(x.cref(), w2.cref(), b.cref(), y.ref()), stringrt::Error);
  TD y2 = TD::zeros({2, 3});
  EXPECT_THROW(linear<double>(x.cref(), w2.cref(), std::nullopt, y2.ref()), stringrt::Error);
}

// dx = linear_grad_input(v, w), dw = linear_grad_weight(x, v), db = sum_to(v)
// for x of rank 1, 2 and 3.
TEST(LinearKernel, GradientsMatchFiniteDifferences) {
  for (std::vector<int64_t> lead : {std::vector<int64_t>{}, {3}, {2, 3}}) {
    std::vector<int64_t> xs = lead, ys = lead;
    xs.push_back(4);
    ys.push_back(5);
    TD x = fd::random(xs, 1), w = fd::random({4, 5}, 2), b = fd::random({5}, 3);
    TD v = fd::random(ys, 4);
    auto forward = [&] {
      TD y = TD::zeros(ys);
      linear(x.cref(), w.cref(), b.cref(), y.ref());
      return y;
    };
    TD dx = TD::zeros(xs), dw = TD::zeros({4, 5}), db = TD::zeros({5});
    linearGradInput(v.cref(), w.cref(), dx.ref());
    linearGradWeight(x.cref(), v.cref(), dw.ref());
    sumTo(v.cref(), db.ref());
    const std::string rank = "rank " + std::to_string(xs.size());
    EXPECT_TRUE(fd::checkVJP("linear dx, " + rank, forward, x, v, dx));
    EXPECT_TRUE(fd::checkVJP("linear dw, " + rank, forward, w, v, dw));
    EXPECT_TRUE(fd::checkVJP("linear db, " + rank, forward, b, v, db));
  }
}

//===--- layer_norm --------------------------------------------------------===//

TEST(LayerNormKernel, HandComputed) {
  // Row [1, 3]: mu 2, var 1 -> xhat [-1, 1]; gamma [2, 3], beta [0.5, -0.5].
  TD x({1, 2}, {1, 3}), gamma({2}, {2, 3}), beta({2}, {0.5, -0.5});
  TD y = TD::zeros({1, 2});
  layerNorm(x.cref(), gamma.cref(), beta.cref(), 1e-5, y.ref());
  const double r = 1 / std::sqrt(1 + 1e-5);
  EXPECT_NEAR(y.values[0], -2 * r + 0.5, 1e-15);
  EXPECT_NEAR(y.values[1], 3 * r - 0.5, 1e-15);
}

// With gamma = 1, beta = 0 each row has mean 0 and variance var / (var + eps).
TEST(LayerNormKernel, NormalisesEachRow) {
  const int64_t D = 7;
  TD x = fd::random({2, 3, D}, 5, -3, 5);
  TD gamma({D}, std::vector<double>(D, 1.0)), beta = TD::zeros({D});
  TD y = TD::zeros(x.shape);
  const double eps = 1e-5;
  layerNorm(x.cref(), gamma.cref(), beta.cref(), eps, y.ref());
  for (int64_t n = 0; n < 6; ++n) {
    double mx = 0, my = 0;
    for (int64_t d = 0; d < D; ++d) {
      mx += x.values[n * D + d] / D;
      my += y.values[n * D + d] / D;
    }
    double vx = 0, vy = 0;
    for (int64_t d = 0; d < D; ++d) {
      vx += (x.values[n * D + d] - mx) * (x.values[n * D + d] - mx) / D;
      vy += (y.values[n * D + d] - my) * (y.values[n * D + d] - my) / D;
    }
    EXPECT_NEAR(my, 0, 1e-14);
    EXPECT_NEAR(vy, vx / (vx + eps), 1e-12);
  }
}

TEST(LayerNormKernel, GradientsMatchFiniteDifferences) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{6}, {3, 6}, {2, 3, 6}}) {
    TD x = fd::random(shape, 11, -2, 2), gamma = fd::random({6}, 12);
    TD beta = fd::random({6}, 13), v = fd::random(shape, 14);
    const double eps = 1e-3;
    auto forward = [&] {
      TD y = TD::zeros(shape);
      layerNorm(x.cref(), gamma.cref(), beta.cref(), eps, y.ref());
      return y;
    };
    TD dx = TD::zeros(shape), dgamma = TD::zeros({6}), dbeta = TD::zeros({6});
    layerNormGrad(x.cref(), gamma.cref(), v.cref(), eps, dx.ref(), dgamma.ref(), dbeta.ref());
    const std::string rank = "rank " + std::to_string(shape.size());
    EXPECT_TRUE(fd::checkVJP("layer_norm dx, " + rank, forward, x, v, dx));
    EXPECT_TRUE(fd::checkVJP("layer_norm dgamma, " + rank, forward, gamma, v, dgamma));
    EXPECT_TRUE(fd::checkVJP("layer_norm dbeta, " + rank, forward, beta, v, dbeta));
  }
}

TEST(LayerNormKernel, RejectsBadEpsilonAndShapes) {
  TD x = TD::zeros({2, 4}), g = TD::zeros({4}), b = TD::zeros({4}), y = TD::zeros({2, 4});
  EXPECT_THROW(layerNorm(x.cref(), g.cref(), b.cref(), 0.0, y.ref()), stringrt::Error);
  TD g3 = TD::zeros({3});
  EXPECT_THROW(layerNorm(x.cref(), g3.cref(), b.cref(), 1e-5, y.ref()), stringrt::Error);
}

//===--- gelu -------------------------------------------------------------===//

TEST(GeluKernel, KnownValuesOfBothForms) {
  TD x({4}, {0, 1, -0.5, 2});
  TD y = TD::zeros({4});
  gelu(x.cref(), false, y.ref());
  EXPECT_EQ(y.values[0], 0.0);
  EXPECT_NEAR(y.values[1], 0.8413447460685429, 1e-15);
  EXPECT_NEAR(y.values[2], -0.15426876936299344, 1e-15);
  EXPECT_NEAR(y.values[3], 1.9544997361036416, 1e-15);
  gelu(x.cref(), true, y.ref());
  EXPECT_EQ(y.values[0], 0.0);
  EXPECT_NEAR(y.values[1], 0.8411919906082768, 1e-15);
  EXPECT_NEAR(y.values[2], -0.15428599017485606, 1e-15);
  EXPECT_NEAR(y.values[3], 1.954597694087775, 1e-15);
}

TEST(GeluKernel, GradientMatchesFiniteDifferencesBothForms) {
  for (bool approximate : {false, true}) {
    TD x = fd::random({3, 5}, 21, -4, 4), v = fd::random({3, 5}, 22);
    auto forward = [&] {
      TD y = TD::zeros(x.shape);
      gelu(x.cref(), approximate, y.ref());
      return y;
    };
    TD dx = TD::zeros(x.shape);
    geluGrad(x.cref(), v.cref(), approximate, dx.ref());
    EXPECT_TRUE(fd::checkVJP(approximate ? "gelu tanh dx" : "gelu erf dx", forward, x, v, dx));
  }
}

//===--- dropout -----------------------------------------------------------===//

TD dropped(const TD &x, double p, bool perSample, int64_t stream, const stringrt::StepKey &key) {
  TD y = TD::zeros(x.shape);
  dropout(x.cref(), p, perSample, stream, key, y.ref());
  return y;
}

TEST(DropoutKernel, KeepsWithProbabilityOneMinusPAndRescales) {
  TD x = fd::random({64, 10, 25}, 51, 1, 2); // no zeros: a zero output means dropped
  const stringrt::StepKey key{3, 17, 0};
  for (double p : {0.1, 0.5, 0.9}) {
    TD y = dropped(x, p, false, 0, key);
    int64_t kept = 0;
    for (size_t i = 0; i < y.values.size(); ++i) {
      if (y.values[i] == 0)
        continue;
      ++kept;
      EXPECT_EQ(y.values[i], x.values[i] * (1.0 / (1.0 - p)));
    }
    const double n = double(y.values.size()), q = 1 - p;
    EXPECT_NEAR(double(kept) / n, q, 5 * std::sqrt(q * p / n)) << p; // 5 sigma
  }
  // p = 0 keeps everything, unscaled.
  EXPECT_EQ(dropped(x, 0, false, 0, key).values, x.values);
}

TEST(DropoutKernel, DropPathKeepsOrDropsWholeSamples) {
  TD x = fd::random({400, 3, 4}, 52, 1, 2);
  TD y = dropped(x, 0.3, true, 5, {9, 2, 0});
  int64_t kept = 0;
  for (int64_t b = 0; b < 400; ++b) {
    int64_t nonzero = 0;
    for (int64_t i = 0; i < 12; ++i)
      nonzero += y.values[size_t(b * 12 + i)] != 0;
    EXPECT_TRUE(nonzero == 0 || nonzero == 12) << b;
    kept += nonzero == 12;
  }
  EXPECT_NEAR(double(kept) / 400, 0.7, 5 * std::sqrt(0.21 / 400));
  // The draw of a sample is dropout's draw for its element 0.
  TD one = fd::random({400, 1}, 53, 1, 2);
  TD perElement = dropped(one, 0.3, false, 5, {9, 2, 0});
  for (int64_t b = 0; b < 400; ++b)
    EXPECT_EQ(perElement.values[size_t(b)] != 0, y.values[size_t(b * 12)] != 0) << b;
}

TEST(DropoutKernel, MaskIsAFunctionOfSeedStepSampleAndStream) {
  TD x = fd::random({6, 40}, 54, 1, 2);
  const stringrt::StepKey key{(uint64_t(1) << 40) + 7, 11, 0};
  TD y = dropped(x, 0.5, false, 2, key);
  EXPECT_EQ(dropped(x, 0.5, false, 2, key).values, y.values); // recomputed, same bits
  // Another seed (its high word alone), step or stream: another mask.
  EXPECT_NE(dropped(x, 0.5, false, 2, {7, 11, 0}).values, y.values);
  EXPECT_NE(dropped(x, 0.5, false, 2, {key.seed, 12, 0}).values, y.values);
  EXPECT_NE(dropped(x, 0.5, false, 3, key).values, y.values);
  // Rows [2, 5) as a micro-batch starting at sample 2 draw the whole batch's rows.
  TD rows({3, 40}, std::vector<double>(x.values.begin() + 80, x.values.begin() + 200));
  TD part = dropped(rows, 0.5, false, 2, {key.seed, 11, 2});
  EXPECT_EQ(part.values, std::vector<double>(y.values.begin() + 80, y.values.begin() + 200));
}

TEST(DropoutKernel, IsItsOwnVJPAgainstFiniteDifferences) {
  for (bool perSample : {false, true}) {
    TD x = fd::random({5, 3, 4}, 55), v = fd::random({5, 3, 4}, 56);
    const stringrt::StepKey key{1, 4, 3};
    auto forward = [&] { return dropped(x, 0.4, perSample, 1, key); };
    TD dx = dropped(v, 0.4, perSample, 1, key);
    EXPECT_TRUE(fd::checkVJP(perSample ? "drop_path dx" : "dropout dx", forward, x, v, dx));
  }
}

// The integer form of the keep test (dropoutThreshold, what the fast CPU
// kernel and the GPU compare with) is the float one at every word that
// matters: the words on either side of each threshold, for drop
// probabilities that are and are not multiples of 2^-24, and the ends.
TEST(DropoutKernel, IntegerThresholdIsTheFloatTestAtItsBoundary) {
  for (double p : {0.0, 0.1, 0.25, 0.3, 0.5, 1.0 / 3.0, 0.9, 0.999999, 1.0 - 0x1p-24,
                   0x1p-25, 3 * 0x1p-24}) {
    const uint32_t t = stringrt::dropoutThreshold(p);
    EXPECT_LE(t, 1u << 24) << p;
    for (int64_t top = int64_t(t) - 2; top <= int64_t(t) + 2; ++top) {
      if (top < 0 || top >= (int64_t(1) << 24))
        continue;
      for (uint32_t low : {0u, 0x7fu, 0xffu}) {
        const uint32_t word = uint32_t(top) << 8 | low;
        EXPECT_EQ(stringrt::dropoutKeepsAbove(word, t), stringrt::dropoutKeeps(word, p))
            << "p " << p << " word " << word;
      }
    }
    for (uint32_t word : {0u, 0xffffffffu})
      EXPECT_EQ(stringrt::dropoutKeepsAbove(word, t), stringrt::dropoutKeeps(word, p))
          << "p " << p << " word " << word;
  }
}

TEST(DropoutKernel, RejectsArgumentsOutsideTheMaskFormula) {
  TD x = fd::random({2, 3}, 57), y = TD::zeros({2, 3}), bad = TD::zeros({3, 2});
  const stringrt::StepKey key;
  auto fails = [&](double p, int64_t stream, stringrt::StepKey k, TD &out) {
    try {
      dropout(x.cref(), p, false, stream, k, out.ref());
    } catch (const stringrt::Error &) {
      return true;
    }
    return false;
  };
  EXPECT_FALSE(fails(0.5, 0, key, y));
  EXPECT_TRUE(fails(1.0, 0, key, y));
  EXPECT_TRUE(fails(-0.1, 0, key, y));
  EXPECT_TRUE(fails(std::nan(""), 0, key, y));
  EXPECT_TRUE(fails(0.5, -1, key, y));
  EXPECT_TRUE(fails(0.5, int64_t(1) << 31, key, y));
  EXPECT_TRUE(fails(0.5, 0, {0, int64_t(1) << 32, 0}, y));
  EXPECT_TRUE(fails(0.5, 0, {0, -1, 0}, y));
  EXPECT_TRUE(fails(0.5, 0, {0, 0, (int64_t(1) << 32) - 1}, y)); // sample 2^32 - 1 + 1
  EXPECT_TRUE(fails(0.5, 0, key, bad));
  TD scalar({}, {1.0}), scalarOut({}, {0.0});
  EXPECT_THROW(dropout(scalar.cref(), 0.5, false, 0, key, scalarOut.ref()), stringrt::Error);
}

//===--- float vs double ---------------------------------------------------===//

TEST(LayerKernelsFloat, ForwardAgreesWithDouble) {
  TD x = fd::random({2, 3, 8}, 41, -3, 3), w = fd::random({8, 5}, 42), b = fd::random({5}, 43);
  TD gamma = fd::random({8}, 44), beta = fd::random({8}, 45);
  EXPECT_TRUE(fd::floatMatchesDouble("linear", [&](auto zero) {
    using T = decltype(zero);
    auto xT = fd::cast<T>(x), wT = fd::cast<T>(w), bT = fd::cast<T>(b);
    auto y = Tensor<T>::zeros({2, 3, 5});
    linear(xT.cref(), wT.cref(), bT.cref(), y.ref());
    return y;
  }));
  EXPECT_TRUE(fd::floatMatchesDouble("layer_norm", [&](auto zero) {
    using T = decltype(zero);
    auto xT = fd::cast<T>(x), gT = fd::cast<T>(gamma), bT = fd::cast<T>(beta);
    auto y = Tensor<T>::zeros(x.shape);
    layerNorm(xT.cref(), gT.cref(), bT.cref(), 1e-5, y.ref());
    return y;
  }));
  for (bool approximate : {false, true})
    EXPECT_TRUE(fd::floatMatchesDouble(approximate ? "gelu tanh" : "gelu erf", [&](auto zero) {
      using T = decltype(zero);
      auto xT = fd::cast<T>(x);
      auto y = Tensor<T>::zeros(x.shape);
      gelu(xT.cref(), approximate, y.ref());
      return y;
    }));
}

} // namespace
