// The reference kernels of ops/fused/RopeApply.cpp (pe.rope_apply,
// pe.rope_apply_grad_table): both gradients (x's is rope_apply inverse)
// against central finite differences, both directions, in double; float
// against double. That a table applied is pe.rope is RopeTableTest's.
#include "stringrt/ops/FusedOps.h"

#include "FiniteDifference.h"
#include "FusedRopeTestUtil.h"

#include <gtest/gtest.h>

namespace stringrt::ref {
namespace {

using TD = Tensor<double>;
using fusedtest::ropeApplyOf;

TEST(FusedRope, ApplyGradientsMatchFiniteDifferencesBothDirections) {
  for (bool inverse : {false, true}) {
    TD x = fd::random({3, 4, 6}, 7), table = fd::random({4, 3, 2}, 8);
    const TD v = fd::random(x.shape, 9);
    // x-gradient: the opposite rotation with the same table.
    const TD dx = ropeApplyOf(v, table, !inverse);
    EXPECT_TRUE(fd::checkVJP(
        "rope_apply dx", [&] { return ropeApplyOf(x, table, inverse); }, x, v, dx));
    TD dtable = TD::zeros(table.shape);
    ropeApplyGradTable<double>(x.cref(), v.cref(), inverse, dtable.ref());
    EXPECT_TRUE(fd::checkVJP(
        "rope_apply_grad_table", [&] { return ropeApplyOf(x, table, inverse); }, table, v,
        dtable));
  }
}

TEST(FusedRope, ApplyFloatMatchesDouble) {
  const TD x = fd::random({2, 4, 8}, 40), table = fd::random({4, 4, 2}, 41);
  EXPECT_TRUE(fd::floatMatchesDouble("rope_apply", [&](auto zero) {
    using T = decltype(zero);
    auto xt = fd::cast<T>(x), tt = fd::cast<T>(table);
    Tensor<T> y = Tensor<T>::zeros(x.shape);
    ropeApply<T>(xt.cref(), tt.cref(), false, y.ref());
    return y;
  }));
}

} // namespace
} // namespace stringrt::ref
