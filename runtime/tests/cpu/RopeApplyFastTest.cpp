// The fast kernels of ops/fused/RopeApply.cpp (pe.rope_apply,
// pe.rope_apply_grad_table) against their reference kernels, with 1 and 4
// threads, both directions.
#include "stringrt/ops/FusedOps.h"

#include "CpuTestUtil.h"

#include <gtest/gtest.h>

namespace stringrt::cpu::testing {
namespace {

using Outputs = std::vector<TF>;

TEST(FastFusedRope, ApplyAndTableGradMatchReference) {
  const TF x = randomTensor({3, 7, 12}, 1), dy = randomTensor({3, 7, 12}, 2),
           table = randomTensor({7, 6, 2}, 3);
  for (bool inverse : {false, true}) {
    expectFastMatchesReference("rope_apply", [&](bool fast) {
      TF y = TF::zeros(x.shape);
      if (fast)
        cpu::ropeApply(x.cref(), table.cref(), inverse, y.ref());
      else
        ref::ropeApply<float>(x.cref(), table.cref(), inverse, y.ref());
      return Outputs{y};
    });
    expectFastMatchesReference("rope_apply_grad_table", [&](bool fast) {
      TF d = TF::zeros(table.shape);
      if (fast)
        cpu::ropeApplyGradTable(x.cref(), dy.cref(), inverse, d.ref());
      else
        ref::ropeApplyGradTable<float>(x.cref(), dy.cref(), inverse, d.ref());
      return Outputs{d};
    });
  }
}

} // namespace
} // namespace stringrt::cpu::testing
