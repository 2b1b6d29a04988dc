// The fast fused kernels (stringrt/ops/FusedOps.h) against their
// reference kernels, with 1 and 4 threads.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/ops/FusedOps.h"

#include "CpuTestUtil.h"
#include "stringrt/Error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace stringrt::cpu::testing {
namespace {

using Outputs = std::vector<TF>;

TEST(FastFusedEpilogue, LinearGeluAndResidualMatchReference) {
  const TF x = randomTensor({4, 50, 64}, 40), w1 = randomTensor({64, 128}, 41),
           b1 = randomTensor({128}, 42), w2 = randomTensor({128, 64}, 43),
           b2 = randomTensor({64}, 44), h = randomTensor({4, 50, 128}, 45);
  for (bool bias : {false, true}) {
    for (bool approximate : {false, true})
      expectFastMatchesReference("linear_gelu", [&](bool fast) {
        TF y = TF::zeros({4, 50, 128}), pre = TF::zeros({4, 50, 128});
        ref::OptionalInput<float> b;
        if (bias)
          b = b1.cref();
        if (fast)
          cpu::linearGelu(x.cref(), w1.cref(), b, approximate, y.ref(), pre.ref());
        else
          ref::linearGelu<float>(x.cref(), w1.cref(), b, approximate, y.ref(), pre.ref());
        return Outputs{y, pre};
      });
    expectFastMatchesReference("linear_residual", [&](bool fast) {
      TF y = TF::zeros(x.shape);
      ref::OptionalInput<float> b;
      if (bias)
        b = b2.cref();
      if (fast)
        cpu::linearResidual(x.cref(), h.cref(), w2.cref(), b, y.ref());
      else
        ref::linearResidual<float>(x.cref(), h.cref(), w2.cref(), b, y.ref());
      return Outputs{y};
    });
  }
}

// pe-fuse-residual's promise: linear_residual gives the bits of cpu::linear
// followed by cpu::add (r + (b + x W)), on the row-tile kernel's shapes (O a
// multiple of 16: partial row tiles, K up to 128) and on the others (the
// linear, then the add), with and without a bias, on 1 and 3 threads.
TEST(FastFusedLinear, ResidualIsBitForBitLinearThenAdd) {
  struct Case {
    int64_t rows, in, out;
  };
  uint32_t seed = 60;
  for (Case c : {Case{150, 64, 64}, Case{7, 128, 64}, Case{13, 5, 16}, Case{9, 8, 24}})
    for (bool bias : {false, true})
      for (int threads : {1, 3}) {
        SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.in) + "x" +
                     std::to_string(c.out) + (bias ? " bias" : "") + " threads " +
                     std::to_string(threads));
        ScopedThreads scoped(threads);
        const TF x = randomTensor({c.rows, c.in}, seed++), w = randomTensor({c.in, c.out}, seed++),
                 b = randomTensor({c.out}, seed++), r = randomTensor({c.rows, c.out}, seed++);
        ref::OptionalInput<float> bv;
        if (bias)
          bv = b.cref();
        TF fused = TF::zeros({c.rows, c.out}), l = TF::zeros({c.rows, c.out}),
           unfused = TF::zeros({c.rows, c.out});
        cpu::linearResidual(r.cref(), x.cref(), w.cref(), bv, fused.ref());
        cpu::linear(x.cref(), w.cref(), bv, l.ref());
        cpu::add(r.cref(), l.cref(), unfused.ref());
        for (int64_t i = 0; i < fused.numel(); ++i)
          ASSERT_EQ(fused.values[i], unfused.values[i]) << "element " << i;
      }
}

// pe-fuse-residual's gradient sums: linear_grad_input_acc gives the bits of
// cpu::linearGradInput followed by cpu::add (prior + dY W^T), on the
// row-tile kernel's shapes (I a multiple of 16) and on the others.
TEST(FastFusedLinear, GradInputAccIsBitForBitGradInputThenAdd) {
  struct Case {
    int64_t rows, in, out;
  };
  uint32_t seed = 90;
  for (Case c : {Case{150, 64, 64}, Case{7, 64, 128}, Case{13, 16, 5}, Case{9, 24, 8}})
    for (int threads : {1, 3}) {
      SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.in) + "x" +
                   std::to_string(c.out) + " threads " + std::to_string(threads));
      ScopedThreads scoped(threads);
      const TF dy = randomTensor({c.rows, c.out}, seed++), w = randomTensor({c.in, c.out}, seed++),
               prior = randomTensor({c.rows, c.in}, seed++);
      TF fused = TF::zeros({c.rows, c.in}), g = TF::zeros({c.rows, c.in}),
         unfused = TF::zeros({c.rows, c.in});
      cpu::linearGradInputAcc(prior.cref(), dy.cref(), w.cref(), fused.ref());
      cpu::linearGradInput(dy.cref(), w.cref(), g.ref());
      cpu::add(prior.cref(), g.cref(), unfused.ref());
      for (int64_t i = 0; i < fused.numel(); ++i)
        ASSERT_EQ(fused.values[i], unfused.values[i]) << "element " << i;
    }
}

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
