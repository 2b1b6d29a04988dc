// The reference kernels of ops/layer/LayerNorm.cpp: layer_norm_grad_acc
// (ODS in PEFusedOps.td) is layer_norm_grad with the prior added to dx, bit
// for bit, and its dgamma and dbeta; a prior of the wrong shape throws.
// (layer_norm's other kernels are LayerKernelsTest's.)
#include "stringrt/ops/LayerOps.h"

#include "FiniteDifference.h"

#include <gtest/gtest.h>

namespace stringrt::ref {
namespace {

using TD = Tensor<double>;

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

} // namespace
} // namespace stringrt::ref
