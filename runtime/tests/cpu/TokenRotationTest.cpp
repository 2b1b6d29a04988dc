// The fast apply_rotation and its gradient (ops/position/ApplyRotation.cpp)
// against the reference kernels, at vit_generators' factorised shape
// (B 8, T 50, D 64, 4 heads of 16) and odd ones, 1 and 4 threads (the same
// bits), and against central differences of the reference in double.
#include "stringrt/cpu/FastKernels.h"

#include "CpuTestUtil.h"

#include "stringrt/Error.h"
#include "stringrt/ops/PositionOps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace stringrt;
using namespace stringrt::cpu::testing;
using TD = ref::Tensor<double>;
using Outputs = std::vector<TF>;

struct Case {
  int64_t B, T, D, heads;
};

const std::vector<Case> kCases = {{8, 50, 64, 4}, {3, 7, 12, 3}, {1, 1, 5, 1}, {2, 9, 64, 2}};

TEST(FastApplyRotation, ForwardAndGradMatchReference) {
  uint32_t seed = 4700;
  for (const Case &c : kCases) {
    const int64_t dh = c.D / c.heads;
    const TF x = randomTensor({c.B, c.T, c.D}, seed++), dy = randomTensor({c.B, c.T, c.D}, seed++);
    const TF rot = randomTensor({c.T, dh, dh}, seed++);
    const std::string name = "B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " D" +
                             std::to_string(c.D) + " heads" + std::to_string(c.heads);
    expectFastMatchesReference("apply_rotation " + name, [&](bool fast) {
      TF y = TF::zeros(x.shape), dx = TF::zeros(x.shape), dr = TF::zeros(rot.shape);
      if (fast) {
        cpu::applyRotation(x.cref(), rot.cref(), c.heads, y.ref());
        cpu::applyRotationGrad(x.cref(), rot.cref(), dy.cref(), c.heads, dx.ref(), dr.ref());
      } else {
        ref::applyRotation<float>(x.cref(), rot.cref(), c.heads, y.ref());
        ref::applyRotationGrad<float>(x.cref(), rot.cref(), dy.cref(), c.heads, dx.ref(),
                                      dr.ref());
      }
      return Outputs{y, dx, dr};
    });
  }
}

// sum(dy * apply_rotation(x, R)) by central differences in double against
// the fast gradients (dx and dR).
TEST(FastApplyRotation, GradientMatchesFiniteDifferences) {
  const int64_t B = 2, T = 3, D = 6, heads = 2, dh = 3;
  const TF x = randomTensor({B, T, D}, 1), dy = randomTensor({B, T, D}, 2);
  const TF rot = randomTensor({T, dh, dh}, 3);
  TF dx = TF::zeros(x.shape), dr = TF::zeros(rot.shape);
  cpu::applyRotationGrad(x.cref(), rot.cref(), dy.cref(), heads, dx.ref(), dr.ref());
  auto toDouble = [](const TF &t) {
    TD d = TD::zeros(t.shape);
    for (size_t i = 0; i < t.values.size(); ++i)
      d.values[i] = t.values[i];
    return d;
  };
  const TD dyd = toDouble(dy);
  auto loss = [&](const TD &xd, const TD &rd) {
    TD y = TD::zeros(xd.shape);
    ref::applyRotation<double>(xd.cref(), rd.cref(), heads, y.ref());
    double sum = 0.0;
    for (size_t i = 0; i < y.values.size(); ++i)
      sum += dyd.values[i] * y.values[i];
    return sum;
  };
  const double h = 1e-6;
  for (size_t e = 0; e < x.values.size(); ++e) {
    TD plus = toDouble(x), minus = toDouble(x);
    plus.values[e] += h;
    minus.values[e] -= h;
    const double fd = (loss(plus, toDouble(rot)) - loss(minus, toDouble(rot))) / (2 * h);
    EXPECT_NEAR(dx.values[e], fd, 1e-5) << "dx " << e;
  }
  for (size_t e = 0; e < rot.values.size(); ++e) {
    TD plus = toDouble(rot), minus = toDouble(rot);
    plus.values[e] += h;
    minus.values[e] -= h;
    const double fd = (loss(toDouble(x), plus) - loss(toDouble(x), minus)) / (2 * h);
    EXPECT_NEAR(dr.values[e], fd, 1e-5) << "dR " << e;
  }
}

TEST(FastApplyRotation, MisshapenOperandsThrowLikeTheReference) {
  const TF x = randomTensor({2, 3, 6}, 1);
  TF y = TF::zeros(x.shape), dr = TF::zeros({3, 3, 3});
  EXPECT_THROW(cpu::applyRotation(x.cref(), randomTensor({3, 3, 3}, 2).cref(), 4, y.ref()),
               Error); // 4 does not divide 6
  EXPECT_THROW(cpu::applyRotation(x.cref(), randomTensor({3, 2, 2}, 2).cref(), 2, y.ref()),
               Error); // Dh is 3
  EXPECT_THROW(cpu::applyRotationGrad(x.cref(), dr.cref(), randomTensor({2, 3, 5}, 3).cref(), 2,
                                      y.ref(), dr.ref()),
               Error);
}

} // namespace
