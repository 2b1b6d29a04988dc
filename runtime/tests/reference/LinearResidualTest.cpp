// The reference kernel of ops/fused/LinearResidual.cpp (pe.linear_residual):
// pe.linear plus the residual, with and without a bias; a residual of the
// wrong shape throws.
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"

#include "FiniteDifference.h"

#include <gtest/gtest.h>

namespace stringrt::ref {
namespace {

using TD = Tensor<double>;

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

} // namespace
} // namespace stringrt::ref
