// The fast kernel of ops/fused/LinearResidual.cpp (pe.linear_residual)
// against its reference kernel, with 1 and 4 threads, and bit for bit
// against cpu::linear then cpu::add.
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"

#include "CpuTestUtil.h"

#include <gtest/gtest.h>

namespace stringrt::cpu::testing {
namespace {

using Outputs = std::vector<TF>;

TEST(FastFusedEpilogue, LinearResidualMatchesReference) {
  const TF x = randomTensor({4, 50, 64}, 40), w2 = randomTensor({128, 64}, 43),
           b2 = randomTensor({64}, 44), h = randomTensor({4, 50, 128}, 45);
  for (bool bias : {false, true})
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

} // namespace
} // namespace stringrt::cpu::testing
