// The reference kernels of ops/fused/RopeTable.cpp (pe.rope_table,
// pe.rope_table_grad): the table applied is pe.rope, for one and two
// position axes, and the gradient against central finite differences of the
// table, in double.
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/PositionOps.h"

#include "FiniteDifference.h"
#include "FusedRopeTestUtil.h"

#include <gtest/gtest.h>

namespace stringrt::ref {
namespace {

using TD = Tensor<double>;
using fusedtest::ropeApplyOf;
using fusedtest::ropeTableOf;

TEST(FusedRope, TableThenApplyIsRopeEveryAxisCount) {
  for (int64_t axes : {1, 2}) {
    const TD x = fd::random({2, 5, 8}, 1), pos = fd::random({5, axes}, 2, -3, 3),
             freqs = fd::random({4, axes}, 3);
    TD expected = TD::zeros(x.shape);
    rope<double>(x.cref(), pos.cref(), freqs.cref(), expected.ref());
    const TD table = ropeTableOf(pos, freqs);
    EXPECT_TRUE(fd::allClose("rope_apply(rope_table)", ropeApplyOf(x, table, false), expected,
                             1e-14));
    // inverse: the rotation by -theta.
    TD negFreqs = freqs;
    for (double &f : negFreqs.values)
      f = -f;
    rope<double>(x.cref(), pos.cref(), negFreqs.cref(), expected.ref());
    EXPECT_TRUE(fd::allClose("rope_apply inverse", ropeApplyOf(x, table, true), expected, 1e-14));
  }
}

TEST(FusedRope, TableGradMatchesFiniteDifferences) {
  const TD pos = fd::random({5, 2}, 4, -3, 3), v = fd::random({5, 4, 2}, 5);
  TD freqs = fd::random({4, 2}, 6);
  TD dfreqs = TD::zeros(freqs.shape);
  ropeTableGrad<double>(pos.cref(), freqs.cref(), v.cref(), dfreqs.ref());
  EXPECT_TRUE(fd::checkVJP(
      "rope_table_grad", [&] { return ropeTableOf(pos, freqs); }, freqs, v, dfreqs));
}

} // namespace
} // namespace stringrt::ref
