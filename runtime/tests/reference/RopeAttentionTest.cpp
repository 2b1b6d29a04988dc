// The reference kernels of ops/fused/RopeAttention.cpp (pe.rope_attention,
// pe.rope_attention_grad): the forward is rope_apply on q and k then
// attention, the gradient matches central finite differences of the
// forward, in double, masks none and causal; the skip mask is refused.
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

TEST(FusedAttention, ForwardIsRopeThenAttentionAndGradMatchesFiniteDifferences) {
  for (AttentionMask mask : {AttentionMask::None, AttentionMask::Causal}) {
    const int64_t heads = 2;
    const double scale = 0.7;
    TD q = fd::random({2, 4, 8}, 20), k = fd::random({2, 4, 8}, 21), v = fd::random({2, 4, 8}, 22);
    const TD table = ropeTableOf(fd::random({4, 2}, 23, -2, 2), fd::random({4, 2}, 24));
    auto forward = [&] {
      TD y = TD::zeros(q.shape);
      ropeAttention<double>(q.cref(), k.cref(), v.cref(), table.cref(), heads, scale, mask,
                            y.ref());
      return y;
    };
    TD unfused = TD::zeros(q.shape);
    const TD qr = ropeApplyOf(q, table, false), kr = ropeApplyOf(k, table, false);
    attention<double>(qr.cref(), kr.cref(), v.cref(), std::nullopt, heads, scale, mask, 0,
                      unfused.ref());
    EXPECT_TRUE(fd::allClose("rope_attention", forward(), unfused, 1e-14));

    const TD dy = fd::random(q.shape, 25);
    TD dq = TD::zeros(q.shape), dk = TD::zeros(q.shape), dv = TD::zeros(q.shape);
    ropeAttentionGrad<double>(q.cref(), k.cref(), v.cref(), table.cref(), dy.cref(), heads, scale,
                              mask, dq.ref(), dk.ref(), dv.ref());
    EXPECT_TRUE(fd::checkVJP("rope_attention_grad dq", forward, q, dy, dq));
    EXPECT_TRUE(fd::checkVJP("rope_attention_grad dk", forward, k, dy, dk));
    EXPECT_TRUE(fd::checkVJP("rope_attention_grad dv", forward, v, dy, dv));
  }
}

TEST(FusedAttention, SkipMaskIsRejected) {
  TD q = fd::random({1, 3, 4}, 26), y = TD::zeros({1, 3, 4});
  const TD table = fd::random({3, 2, 2}, 27);
  EXPECT_THROW(ropeAttention<double>(q.cref(), q.cref(), q.cref(), table.cref(), 1, 1.0,
                                     AttentionMask::Skip, y.ref()),
               Error);
}

// The contract's head width rule (the dialect's too): each head rotates
// whole pairs, so D / heads must be even, not D alone.
TEST(FusedAttention, OddHeadWidthIsRejected) {
  const TD q = fd::random({1, 3, 6}, 28), table = fd::random({3, 3, 2}, 29);
  TD y = TD::zeros(q.shape), dq = TD::zeros(q.shape), dk = TD::zeros(q.shape),
     dv = TD::zeros(q.shape);
  EXPECT_THROW(ropeAttention<double>(q.cref(), q.cref(), q.cref(), table.cref(), 2, 1.0,
                                     AttentionMask::None, y.ref()),
               Error);
  EXPECT_THROW(ropeAttentionGrad<double>(q.cref(), q.cref(), q.cref(), table.cref(), q.cref(), 2,
                                         1.0, AttentionMask::Causal, dq.ref(), dk.ref(), dv.ref()),
               Error);
  // heads 1: Dh = 6, accepted.
  EXPECT_NO_THROW(ropeAttention<double>(q.cref(), q.cref(), q.cref(), table.cref(), 1, 1.0,
                                        AttentionMask::None, y.ref()));
}

} // namespace
} // namespace stringrt::ref
