// The finite-difference checker itself: accepts a correct gradient, rejects a
// slightly wrong one (so the kernel tests cannot pass vacuously).
#include "FiniteDifference.h"

#include <gtest/gtest.h>

namespace {

using namespace stringrt::ref;
using TD = Tensor<double>;

// forward(x) = x^3 elementwise, so J^T v = 3 x^2 v.
TEST(KernelFiniteDifference, AcceptsCorrectAndRejectsWrongGradients) {
  TD x = fd::random({3, 4}, 1), v = fd::random({3, 4}, 2);
  auto forward = [&] {
    TD y = TD::zeros(x.shape);
    for (size_t i = 0; i < x.values.size(); ++i)
      y.values[i] = x.values[i] * x.values[i] * x.values[i];
    return y;
  };
  TD grad = TD::zeros(x.shape);
  for (size_t i = 0; i < x.values.size(); ++i)
    grad.values[i] = 3 * x.values[i] * x.values[i] * v.values[i];
  const TD before = x;
  EXPECT_TRUE(fd::checkVJP("x^3", forward, x, v, grad));
  EXPECT_EQ(x.values, before.values); // x restored exactly
  EXPECT_TRUE(fd::checkDirectional("x^3", [&] { return fd::dot(v, forward()); }, x, grad,
                                   fd::random(x.shape, 3)));

  TD wrong = grad;
  wrong.values[5] += 1e-4;
  EXPECT_FALSE(fd::checkVJP("x^3 (wrong)", forward, x, v, wrong));
  EXPECT_FALSE(fd::checkDirectional("x^3 (wrong)", [&] { return fd::dot(v, forward()); }, x,
                                    wrong, TD({3, 4}, std::vector<double>(12, 1.0))));
  TD badShape = TD::zeros({12});
  EXPECT_FALSE(fd::checkVJP("shape", forward, x, v, badShape));
}

TEST(KernelFiniteDifference, AllCloseUsesRelativeTolerance) {
  TD a({2}, {1000.0, 0.5}), b({2}, {1000.009, 0.500009});
  EXPECT_TRUE(fd::allClose("close", a, b, 1e-5));
  TD c({2}, {1000.02, 0.5});
  EXPECT_FALSE(fd::allClose("far", a, c, 1e-5));
}

} // namespace
