// The identity pe-fold-transform relies on, on the reference kernels:
// cayley(linear(h, W, b), S) == linear(h, cayley(W, S), cayley(b, S)), with
// pe.cayley applied to a rank-2 weight [I, O] and a rank-1 bias [O]; and the
// Cayley gradients at those ranks against central finite differences.
#include "FiniteDifference.h"
#include "PositionTestUtil.h"

#include "stringrt/reference/LayerKernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace stringrt::ref {
namespace {

using namespace postest;
using fd::checkVJP;
using fd::random;

D linearOf(const D &x, const D &w, const D &b) {
  std::vector<int64_t> shape = x.shape;
  shape.back() = w.shape[1];
  D y = D::zeros(shape);
  linear<double>(x.cref(), w.cref(), b.cref(), y.ref());
  return y;
}

TEST(CayleyFold, TransformOfAProjectionIsAProjectionWithTransformedWeights) {
  const int64_t in = 5, out = 6;
  const D h = random({2, 3, in}, 11);
  const D w = random({in, out}, 12);
  const D b = random({out}, 13);
  const D s = skewOf(random({out * (out - 1) / 2}, 14, -0.8, 0.8), out);

  const D transformed = cayleyOf(linearOf(h, w, b), s);
  const D folded = linearOf(h, cayleyOf(w, s), cayleyOf(b, s));
  EXPECT_LE(maxAbsDiff(folded, transformed), 1e-12 * std::max(1.0, maxAbs(transformed)));
}

TEST(CayleyFold, GradientsOfARankTwoWeightAndARankOneBias) {
  const int64_t out = 5;
  uint32_t seed = 21;
  for (std::vector<int64_t> shape : {std::vector<int64_t>{4, out}, std::vector<int64_t>{out}}) {
    D s = skewOf(random({out * (out - 1) / 2}, seed++, -1.0, 1.0), out);
    D x = random(shape, seed++);
    const D v = random(shape, seed++);
    auto forward = [&] { return cayleyOf(x, s); };
    auto [dx, ds] = cayleyGradOf(x, s, v);
    const std::string name = "cayley " + shapeToString(shape);
    EXPECT_TRUE(checkVJP(name + " dx", forward, x, v, dx));
    EXPECT_TRUE(checkVJP(name + " ds", forward, s, v, ds));
  }
}

} // namespace
} // namespace stringrt::ref
