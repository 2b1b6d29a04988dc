// Reference kernels of the hoisted and fused ops (stringrt/ops/FusedOps.h): each
// forward against the unfused ops it replaces, each backward against central
// finite differences of its forward, in double.
#include "stringrt/ops/FusedOps.h"
#include "stringrt/reference/LayerKernels.h"
#include "stringrt/ops/PositionOps.h"

#include "FiniteDifference.h"

#include <gtest/gtest.h>

namespace stringrt::ref {
namespace {

using TD = Tensor<double>;

TD cayleyWeightOf(const TD &s) {
  TD w = TD::zeros(s.shape);
  cayleyWeight<double>(s.cref(), w.ref());
  return w;
}

TEST(FusedCayley, LinearWithWeightIsCayley) {
  const TD x = fd::random({2, 5, 6}, 10), s = fd::random({6, 6}, 11, -0.3, 0.3); // not skew
  TD expected = TD::zeros(x.shape), y = TD::zeros(x.shape);
  cayley<double>(x.cref(), s.cref(), expected.ref());
  const TD w = cayleyWeightOf(s);
  linear<double>(x.cref(), w.cref(), std::nullopt, y.ref());
  EXPECT_TRUE(fd::allClose("linear(x, cayley_weight(S))", y, expected, 1e-12));
}

TEST(FusedCayley, WeightGradMatchesFiniteDifferencesAndCayleyGrad) {
  TD s = fd::random({5, 5}, 12, -0.4, 0.4);
  const TD v = fd::random({5, 5}, 13);
  TD ds = TD::zeros(s.shape);
  cayleyWeightGrad<double>(s.cref(), v.cref(), ds.ref());
  EXPECT_TRUE(fd::checkVJP("cayley_weight_grad", [&] { return cayleyWeightOf(s); }, s, v, ds));

  // Through linear: dw = X^T dY gives cayley_grad's ds.
  const TD x = fd::random({3, 4, 5}, 14), dy = fd::random({3, 4, 5}, 15);
  TD dw = TD::zeros({5, 5}), viaWeight = TD::zeros({5, 5});
  linearGradWeight<double>(x.cref(), dy.cref(), dw.ref());
  cayleyWeightGrad<double>(s.cref(), dw.cref(), viaWeight.ref());
  TD dx = TD::zeros(x.shape), direct = TD::zeros({5, 5});
  cayleyGrad<double>(x.cref(), s.cref(), dy.cref(), dx.ref(), direct.ref());
  EXPECT_TRUE(fd::allClose("cayley_weight_grad vs cayley_grad", viaWeight, direct, 1e-12));
}

TEST(FusedCayley, SingularMatrixThrows) {
  TD s = TD::zeros({2, 2});
  s.values = {-1.0, 0.0, 0.0, 0.0}; // I + S has a zero row
  TD w = TD::zeros({2, 2});
  EXPECT_THROW(cayleyWeight<double>(s.cref(), w.ref()), Error);
}

TEST(FusedEpilogue, LinearGeluIsLinearThenGelu) {
  for (bool approximate : {false, true})
    for (bool bias : {false, true}) {
      const TD x = fd::random({2, 3, 4}, 30), w = fd::random({4, 5}, 31), b = fd::random({5}, 32);
      OptionalInput<double> bRef;
      if (bias)
        bRef = b.cref();
      TD pre = TD::zeros({2, 3, 5}), y = TD::zeros({2, 3, 5});
      linearGelu<double>(x.cref(), w.cref(), bRef, approximate, y.ref(), pre.ref());
      TD l = TD::zeros({2, 3, 5}), g = TD::zeros({2, 3, 5});
      linear<double>(x.cref(), w.cref(), bRef, l.ref());
      gelu<double>(l.cref(), approximate, g.ref());
      EXPECT_TRUE(fd::allClose("linear_gelu pre", pre, l, 0.0));
      EXPECT_TRUE(fd::allClose("linear_gelu", y, g, 0.0));
    }
}

TEST(FusedEpilogue, LinearResidualIsAddOfLinear) {
  for (bool bias : {false, true}) {
    const TD r = fd::random({2, 3, 5}, 33), x = fd::random({2, 3, 4}, 34),
             w = fd::random({4, 5}, 35), b = fd::random({5}, 36);
    OptionalInput<double> bRef;
    if (bias)
      bRef = b.cref();
    TD y = TD::zeros(r.shape), l = TD::zeros(r.shape);
    linearResidual<double>(r.cref(), x.cref(), w.cref(), bRef, y.ref());
    linear<double>(x.cref(), w.cref(), bRef, l.ref());
    for (size_t i = 0; i < l.values.size(); ++i)
      l.values[i] += r.values[i];
    EXPECT_TRUE(fd::allClose("linear_residual", y, l, 1e-15));
  }
  TD bad = TD::zeros({2, 3, 4}), y = TD::zeros({2, 3, 5});
  const TD x = fd::random({2, 3, 4}, 37), w = fd::random({4, 5}, 38);
  EXPECT_THROW(linearResidual<double>(bad.cref(), x.cref(), w.cref(), std::nullopt, y.ref()),
               Error);
}

TEST(FusedEpilogue, LinearGradInputAccIsAddOfGradInput) {
  const TD prior = fd::random({2, 3, 4}, 50), dy = fd::random({2, 3, 5}, 51),
           w = fd::random({4, 5}, 52);
  TD dx = TD::zeros(prior.shape), g = TD::zeros(prior.shape);
  linearGradInputAcc<double>(prior.cref(), dy.cref(), w.cref(), dx.ref());
  linearGradInput<double>(dy.cref(), w.cref(), g.ref());
  for (size_t i = 0; i < g.values.size(); ++i)
    g.values[i] += prior.values[i];
  EXPECT_TRUE(fd::allClose("linear_grad_input_acc", dx, g, 0.0));
  TD bad = TD::zeros({2, 3, 5});
  EXPECT_THROW(linearGradInputAcc<double>(bad.cref(), dy.cref(), w.cref(), dx.ref()), Error);
}

TEST(FusedEpilogue, LayerNormGradAccIsAddOfLayerNormGrad) {
  const TD prior = fd::random({2, 3, 4}, 53), x = fd::random({2, 3, 4}, 54),
           gamma = fd::random({4}, 55), dy = fd::random({2, 3, 4}, 56);
  TD dx = TD::zeros(x.shape), dgamma = TD::zeros({4}), dbeta = TD::zeros({4});
  TD g = TD::zeros(x.shape), wantGamma = TD::zeros({4}), wantBeta = TD::zeros({4});
  layerNormGradAcc<double>(prior.cref(), x.cref(), gamma.cref(), dy.cref(), 1e-3, dx.ref(),
                           dgamma.ref(), dbeta.ref());
  layerNormGrad<double>(x.cref(), gamma.cref(), dy.cref(), 1e-3, g.ref(), wantGamma.ref(),
                        wantBeta.ref());
  for (size_t i = 0; i < g.values.size(); ++i)
    g.values[i] += prior.values[i];
  EXPECT_TRUE(fd::allClose("layer_norm_grad_acc dx", dx, g, 0.0));
  EXPECT_TRUE(fd::allClose("layer_norm_grad_acc dgamma", dgamma, wantGamma, 0.0));
  EXPECT_TRUE(fd::allClose("layer_norm_grad_acc dbeta", dbeta, wantBeta, 0.0));
  TD bad = TD::zeros({2, 3, 5});
  EXPECT_THROW(layerNormGradAcc<double>(bad.cref(), x.cref(), gamma.cref(), dy.cref(), 1e-3,
                                        dx.ref(), dgamma.ref(), dbeta.ref()),
               Error);
}

TEST(FusedKernels, FloatMatchesDouble) {
  const TD s = fd::random({6, 6}, 42, -0.3, 0.3);
  EXPECT_TRUE(fd::floatMatchesDouble("cayley_weight", [&](auto zero) {
    using T = decltype(zero);
    auto st = fd::cast<T>(s);
    Tensor<T> w = Tensor<T>::zeros(s.shape);
    cayleyWeight<T>(st.cref(), w.ref());
    return w;
  }));
}

} // namespace
} // namespace stringrt::ref
