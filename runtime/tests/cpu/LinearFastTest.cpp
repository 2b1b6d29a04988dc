// The fast kernels of ops/layer/Linear.cpp: linear_grad_input_acc (ODS in
// PEFusedOps.td) bit for bit cpu::linearGradInput then cpu::add.
#include "stringrt/ops/LayerOps.h"

#include "CpuTestUtil.h"

#include <gtest/gtest.h>

namespace stringrt::cpu::testing {
namespace {

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

} // namespace
} // namespace stringrt::cpu::testing
