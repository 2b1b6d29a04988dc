// Reference kernels linear, layer_norm, gelu, relu: forward on hand-computed
// cases and identities, backward against central finite differences (double),
// float vs double agreement of the forward kernels.
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

//===--- gelu / relu -------------------------------------------------------===//

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

TEST(ReluKernel, ValuesAndZeroGradientAtZero) {
  TD x({4}, {-1, 0, 2, -0.0}), dy({4}, {5, 6, 7, 8});
  TD y = TD::zeros({4}), dx = TD::zeros({4});
  relu(x.cref(), y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{0, 0, 2, 0}));
  reluGrad(x.cref(), dy.cref(), dx.ref());
  EXPECT_EQ(dx.values, (std::vector<double>{0, 0, 7, 0}));
  TD nan({1}, {std::nan("")}), ynan = TD::zeros({1});
  relu(nan.cref(), ynan.ref());
  EXPECT_TRUE(std::isnan(ynan.values[0]));
}

TEST(ReluKernel, GradientMatchesFiniteDifferences) {
  TD x = fd::random({4, 5}, 31);
  for (double &e : x.values) // keep clear of the kink at 0
    e += e >= 0 ? 0.1 : -0.1;
  TD v = fd::random({4, 5}, 32);
  auto forward = [&] {
    TD y = TD::zeros(x.shape);
    relu(x.cref(), y.ref());
    return y;
  };
  TD dx = TD::zeros(x.shape);
  reluGrad(x.cref(), v.cref(), dx.ref());
  EXPECT_TRUE(fd::checkVJP("relu dx", forward, x, v, dx));
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
  EXPECT_TRUE(fd::floatMatchesDouble("relu", [&](auto zero) {
    using T = decltype(zero);
    auto xT = fd::cast<T>(x);
    auto y = Tensor<T>::zeros(x.shape);
    relu(xT.cref(), y.ref());
    return y;
  }));
}

} // namespace
