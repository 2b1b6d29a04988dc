// The fast kernels of ops/fused/RopeAttention.cpp (pe.rope_attention,
// pe.rope_attention_grad) against their reference kernels (their
// compositions of rope_apply's and attention's, ops/Compositions.cpp), with 1 and 4
// threads, both masks they take; an odd head width and the skip mask are
// refused.
#include "stringrt/ops/FusedOps.h"

#include "CpuTestUtil.h"
#include "stringrt/Error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace stringrt::cpu::testing {
namespace {

using Outputs = std::vector<TF>;

// The reference rope_apply of x by the table (its inverse with `inverse`).
TF rotated(const TF &x, const TF &table, bool inverse) {
  TF y = TF::zeros(x.shape);
  ref::ropeApply<float>(x.cref(), table.cref(), inverse, y.ref());
  return y;
}

TEST(FastFusedAttention, ForwardAndGradMatchReference) {
  struct Case {
    int64_t B, T, D, heads;
  };
  uint32_t seed = 10;
  for (Case c : {Case{2, 5, 8, 2}, Case{3, 50, 64, 4}, Case{1, 9, 12, 1}})
    for (AttentionMask mask : {AttentionMask::None, AttentionMask::Causal}) {
      const std::vector<int64_t> shape{c.B, c.T, c.D};
      const TF q = randomTensor(shape, seed++), k = randomTensor(shape, seed++),
               v = randomTensor(shape, seed++), dy = randomTensor(shape, seed++);
      // A genuine cos/sin table.
      TF table = TF::zeros({c.T, c.D / 2, 2});
      const TF angles = randomTensor({c.T, c.D / 2}, seed++, -6.0f, 6.0f);
      for (int64_t i = 0; i < c.T * c.D / 2; ++i) {
        table.values[2 * i] = std::cos(angles.values[i]);
        table.values[2 * i + 1] = std::sin(angles.values[i]);
      }
      const double scale = 1.0 / std::sqrt(double(c.D / c.heads));
      const std::string name = "T" + std::to_string(c.T) + " heads" + std::to_string(c.heads) +
                               (mask == AttentionMask::Causal ? " causal" : " none");
      expectFastMatchesReference("rope_attention " + name, [&](bool fast) {
        TF y = TF::zeros(shape);
        if (fast)
          cpu::ropeAttention(q.cref(), k.cref(), v.cref(), table.cref(), c.heads, scale, mask,
                             y.ref());
        else // the reference: its composition
          ref::attention<float>(rotated(q, table, false).cref(), rotated(k, table, false).cref(),
                                v.cref(), std::nullopt, c.heads, scale, mask, 0, y.ref());
        return Outputs{y};
      });
      expectFastMatchesReference("rope_attention_grad " + name, [&](bool fast) {
        TF dq = TF::zeros(shape), dk = TF::zeros(shape), dv = TF::zeros(shape);
        if (fast)
          cpu::ropeAttentionGrad(q.cref(), k.cref(), v.cref(), table.cref(), dy.cref(), c.heads,
                                 scale, mask, dq.ref(), dk.ref(), dv.ref());
        else { // the reference: its composition
          TF dqr = TF::zeros(shape), dkr = TF::zeros(shape);
          ref::attentionGrad<float>(rotated(q, table, false).cref(),
                                    rotated(k, table, false).cref(), v.cref(), dy.cref(),
                                    std::nullopt, c.heads, scale, mask, 0, dqr.ref(), dkr.ref(),
                                    dv.ref(), std::nullopt);
          dq = rotated(dqr, table, true);
          dk = rotated(dkr, table, true);
        }
        return Outputs{dq, dk, dv};
      });
    }
}

TEST(FastFusedAttention, OddHeadWidthAndSkipAreRejected) {
  const TF q = randomTensor({1, 3, 6}, 30), table = randomTensor({3, 3, 2}, 31);
  TF y = TF::zeros(q.shape);
  EXPECT_THROW(cpu::ropeAttention(q.cref(), q.cref(), q.cref(), table.cref(), 2, 1.0,
                                  AttentionMask::None, y.ref()),
               Error);
  EXPECT_THROW(cpu::ropeAttention(q.cref(), q.cref(), q.cref(), table.cref(), 1, 1.0,
                                  AttentionMask::Skip, y.ref()),
               Error);
}

} // namespace
} // namespace stringrt::cpu::testing
