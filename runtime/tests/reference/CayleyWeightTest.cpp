// The reference kernels of ops/fused/CayleyWeight.cpp (pe.cayley_weight,
// pe.cayley_weight_grad): a linear with the weight is pe.cayley, the
// gradient matches central finite differences and pe.cayley_grad through
// the linear, a singular I + S throws; float against double.
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"
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

TEST(FusedCayley, WeightFloatMatchesDouble) {
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
