// The fast kernel of ops/fused/LinearGelu.cpp (pe.linear_gelu) against its
// reference kernel (its composition: linear's, then gelu's), with 1 and 4 threads, with and without a bias, both
// gelu forms.
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"

#include "CpuTestUtil.h"

#include <gtest/gtest.h>

namespace stringrt::cpu::testing {
namespace {

using Outputs = std::vector<TF>;

TEST(FastFusedEpilogue, LinearGeluMatchesReference) {
  const TF x = randomTensor({4, 50, 64}, 40), w1 = randomTensor({64, 128}, 41),
           b1 = randomTensor({128}, 42);
  for (bool bias : {false, true})
    for (bool approximate : {false, true})
      expectFastMatchesReference("linear_gelu", [&](bool fast) {
        TF y = TF::zeros({4, 50, 128}), pre = TF::zeros({4, 50, 128});
        ref::OptionalInput<float> b;
        if (bias)
          b = b1.cref();
        if (fast)
          cpu::linearGelu(x.cref(), w1.cref(), b, approximate, y.ref(), pre.ref());
        else { // the reference: its composition
          ref::linear<float>(x.cref(), w1.cref(), b, pre.ref());
          ref::gelu<float>(pre.cref(), approximate, y.ref());
        }
        return Outputs{y, pre};
      });
}

} // namespace
} // namespace stringrt::cpu::testing
