// pe.rope_attention and pe.rope_attention_grad have no reference kernels of
// their own: their reference kernels are their compositions
// (runtime/src/ops/Compositions.cpp; ComposedOpsTest.cpp checks, in float,
// that the rows give these steps' bits). Here, in double, the gradient's
// composition (attention_grad of the rotated q and k, dq and dk turned back
// by rope_apply's inverse) matches central finite differences of the
// forward's (attention of the rotated q and k), masks none and causal.
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"

#include "FiniteDifference.h"
#include "FusedRopeTestUtil.h"

#include <gtest/gtest.h>

namespace stringrt::ref {
namespace {

using TD = Tensor<double>;
using fusedtest::ropeApplyOf;
using fusedtest::ropeTableOf;

TEST(FusedAttention, TheGradientsCompositionMatchesFiniteDifferencesOfTheForwards) {
  for (AttentionMask mask : {AttentionMask::None, AttentionMask::Causal}) {
    const int64_t heads = 2;
    const double scale = 0.7;
    TD q = fd::random({2, 4, 8}, 20), k = fd::random({2, 4, 8}, 21), v = fd::random({2, 4, 8}, 22);
    const TD table = ropeTableOf(fd::random({4, 2}, 23, -2, 2), fd::random({4, 2}, 24));
    // rope_attention's row: attention(rope_apply(q), rope_apply(k), v).
    auto forward = [&] {
      TD y = TD::zeros(q.shape);
      attention<double>(ropeApplyOf(q, table, false).cref(), ropeApplyOf(k, table, false).cref(),
                        v.cref(), std::nullopt, heads, scale, mask, 0, y.ref());
      return y;
    };
    // rope_attention_grad's row.
    const TD dy = fd::random(q.shape, 25);
    const TD qr = ropeApplyOf(q, table, false), kr = ropeApplyOf(k, table, false);
    TD dqr = TD::zeros(q.shape), dkr = TD::zeros(q.shape), dv = TD::zeros(q.shape);
    attentionGrad<double>(qr.cref(), kr.cref(), v.cref(), dy.cref(), std::nullopt, heads, scale,
                          mask, 0, dqr.ref(), dkr.ref(), dv.ref(), std::nullopt);
    const TD dq = ropeApplyOf(dqr, table, true), dk = ropeApplyOf(dkr, table, true);
    EXPECT_TRUE(fd::checkVJP("rope_attention_grad dq", forward, q, dy, dq));
    EXPECT_TRUE(fd::checkVJP("rope_attention_grad dk", forward, k, dy, dk));
    EXPECT_TRUE(fd::checkVJP("rope_attention_grad dv", forward, v, dy, dv));
  }
}

} // namespace
} // namespace stringrt::ref
