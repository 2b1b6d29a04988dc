// The reference kernels of ops/layer/Linear.cpp: linear_grad_input_acc
// (ODS in PEFusedOps.td) is linear_grad_input plus the prior, bit for bit;
// a prior of the wrong shape throws. (linear's other kernels are
// LayerKernelsTest's.)
#include "stringrt/ops/LayerOps.h"

#include "FiniteDifference.h"

#include <gtest/gtest.h>

namespace stringrt::ref {
namespace {

using TD = Tensor<double>;

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

} // namespace
} // namespace stringrt::ref
