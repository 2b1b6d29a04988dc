// The reference kernel of ops/fused/LinearGelu.cpp (pe.linear_gelu): the
// bits of pe.linear then pe.gelu, with and without a bias, both gelu forms.
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"

#include "FiniteDifference.h"

#include <gtest/gtest.h>

namespace stringrt::ref {
namespace {

using TD = Tensor<double>;

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

} // namespace
} // namespace stringrt::ref
