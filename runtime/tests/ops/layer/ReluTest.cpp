// pe.relu and pe.relu_grad (runtime/src/ops/layer/Relu.cpp), run through
// their registration as the executor runs them (OpCall.h): values by hand,
// with -0 and NaN; the gradient against central finite differences of the
// forward op; the shape contract's messages. The op's kernels are its op
// file's own: no header declares them.
#include "../../ErrorOf.h"
#include "../../OpCall.h"
#include "../../reference/FiniteDifference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace stringrt::test {
namespace {

using TF = ref::Tensor<float>;
using TD = ref::Tensor<double>;

TEST(ReluOp, ValuesAndZeroGradientAtZero) {
  const TF x({5}, {-1, 0, 2, -0.0f, std::nanf("")}), dy({5}, {5, 6, 7, 8, 9});
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "reference");
    const OpCall relu{OpCode::Relu, {x}, {{5}}};
    const std::vector<TF> y = fast ? relu.fast() : relu.reference();
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(std::vector<float>(y[0].values.begin(), y[0].values.begin() + 4),
              (std::vector<float>{0, 0, 2, 0}));
    EXPECT_TRUE(std::isnan(y[0].values[4])); // NaN propagates
    const OpCall grad{OpCode::ReluGrad, {x, dy}, {{5}}};
    const std::vector<TF> dx = fast ? grad.fast() : grad.reference();
    // x = 0 and -0 get no gradient; nor does NaN (NaN > 0 is false).
    EXPECT_EQ(dx[0].values, (std::vector<float>{0, 0, 7, 0, 0}));
  }
}

// In float (the registered kernels are the float ones): a step of 1e-3 and a
// tolerance of 1e-3, far above float rounding (about 6e-5 here).
TEST(ReluOp, GradientMatchesFiniteDifferences) {
  TD x = ref::fd::random({4, 5}, 31);
  for (double &e : x.values) // keep clear of the kink at 0
    e += e >= 0 ? 0.1 : -0.1;
  const TD v = ref::fd::random({4, 5}, 32);
  auto forward = [&] {
    return ref::fd::cast<double>(
        OpCall{OpCode::Relu, {ref::fd::cast<float>(x)}, {x.shape}}.reference()[0]);
  };
  const TD dx = ref::fd::cast<double>(
      OpCall{OpCode::ReluGrad, {ref::fd::cast<float>(x), ref::fd::cast<float>(v)}, {x.shape}}
          .reference()[0]);
  EXPECT_TRUE(ref::fd::checkVJP("relu dx", forward, x, v, dx, {1e-3, 1e-3}));
}

// The contract runs in every kernel set: alone (before a compiled kernel)
// and first in the reference kernel.
TEST(ReluOp, TheShapeContractNamesTheOperand) {
  const TF x({2, 3}, {1, -2, 3, -4, 5, -6}), dy({3, 2}, {1, 2, 3, 4, 5, 6});
  const OpCall relu{OpCode::Relu, {x}, {{3, 2}}};
  EXPECT_EQ(errorOf([&] { relu.check(); }), "relu: result: expected shape [2, 3], got [3, 2]");
  EXPECT_EQ(errorOf([&] { relu.reference(); }),
            "relu: result: expected shape [2, 3], got [3, 2]");
  const OpCall grad{OpCode::ReluGrad, {x, dy}, {{2, 3}}};
  EXPECT_EQ(errorOf([&] { grad.check(); }), "relu_grad: dy: expected shape [2, 3], got [3, 2]");
  EXPECT_EQ(errorOf([&] { grad.fast(); }), "relu_grad: dy: expected shape [2, 3], got [3, 2]");
  const OpCall good{OpCode::ReluGrad, {x, x}, {{2, 3}}};
  EXPECT_EQ(errorOf([&] { good.check(); }), "");
}

} // namespace
} // namespace stringrt::test
