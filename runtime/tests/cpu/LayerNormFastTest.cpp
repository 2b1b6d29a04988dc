// The fast kernels of ops/layer/LayerNorm.cpp: layer_norm_grad_acc (ODS in
// PEFusedOps.td) bit for bit cpu::layerNormGrad then cpu::add, and its
// dgamma and dbeta; a prior of the wrong shape throws.
#include "stringrt/Error.h"
#include "stringrt/ops/LayerOps.h"

#include "CpuTestUtil.h"

#include <gtest/gtest.h>

namespace stringrt::cpu::testing {
namespace {

// pe-fuse-residual's residual-stream sums: layer_norm_grad_acc gives the
// bits of cpu::layerNormGrad followed by cpu::add, and its dgamma and dbeta.
TEST(FastFusedNorm, LayerNormGradAccIsBitForBitGradThenAdd) {
  uint32_t seed = 120;
  for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 50, 64}, {7, 21}, {5}})
    for (int threads : {1, 3}) {
      SCOPED_TRACE("D " + std::to_string(shape.back()) + ", threads " + std::to_string(threads));
      ScopedThreads scoped(threads);
      const int64_t D = shape.back();
      const TF x = randomTensor(shape, seed++), dy = randomTensor(shape, seed++),
               prior = randomTensor(shape, seed++), gamma = randomTensor({D}, seed++);
      TF fused = TF::zeros(shape), g = TF::zeros(shape), unfused = TF::zeros(shape);
      TF dgamma = TF::zeros({D}), dbeta = TF::zeros({D}), wantGamma = TF::zeros({D}),
         wantBeta = TF::zeros({D});
      cpu::layerNormGradAcc(prior.cref(), x.cref(), gamma.cref(), dy.cref(), 1e-5, fused.ref(),
                            dgamma.ref(), dbeta.ref());
      cpu::layerNormGrad(x.cref(), gamma.cref(), dy.cref(), 1e-5, g.ref(), wantGamma.ref(),
                         wantBeta.ref());
      cpu::add(prior.cref(), g.cref(), unfused.ref());
      EXPECT_EQ(fused.values, unfused.values);
      EXPECT_EQ(dgamma.values, wantGamma.values);
      EXPECT_EQ(dbeta.values, wantBeta.values);
    }
  const TF x = randomTensor({2, 8}, 1), gamma = randomTensor({8}, 2), bad = randomTensor({2, 7}, 3);
  TF dx = TF::zeros({2, 8}), dgamma = TF::zeros({8}), dbeta = TF::zeros({8});
  EXPECT_THROW(cpu::layerNormGradAcc(bad.cref(), x.cref(), gamma.cref(), x.cref(), 1e-5, dx.ref(),
                                     dgamma.ref(), dbeta.ref()),
               Error);
}

} // namespace
} // namespace stringrt::cpu::testing
