// Reference kernels add/sub/mul (trailing-suffix broadcast), scale, sum_to,
// broadcast_to, expand_axis, mean: forward on hand-computed cases; the VJPs of
// docs/autodiff.md (reduce = sum_to, mean = scale(expand_axis | broadcast_to))
// against central finite differences; float vs double.
#include "stringrt/reference/LayerKernels.h"

#include "FiniteDifference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <ostream>

namespace {

using namespace stringrt::ref;
using TD = Tensor<double>;
using Shape = std::vector<int64_t>;

//===--- add / sub / mul ---------------------------------------------------===//

TEST(BinaryKernel, HandComputedBroadcast) {
  TD a({2, 3}, {1, 2, 3, 4, 5, 6}), r({3}, {10, 20, 30});
  TD y = TD::zeros({2, 3});
  add(a.cref(), r.cref(), y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{11, 22, 33, 14, 25, 36}));
  sub(a.cref(), r.cref(), y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{-9, -18, -27, -6, -15, -24}));
  sub(r.cref(), a.cref(), y.ref()); // the lower-rank operand on the left
  EXPECT_EQ(y.values, (std::vector<double>{9, 18, 27, 6, 15, 24}));
  mul(r.cref(), a.cref(), y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{10, 40, 90, 40, 100, 180}));
  TD s({}, {2}); // a scalar is the empty suffix of any shape
  mul(a.cref(), s.cref(), y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{2, 4, 6, 8, 10, 12}));
}

TEST(BinaryKernel, RejectsNonSuffixShapes) {
  TD a = TD::zeros({2, 3}), b = TD::zeros({2}), y = TD::zeros({2, 3});
  EXPECT_THROW(add(a.cref(), b.cref(), y.ref()), stringrt::Error);
  TD c = TD::zeros({3, 3});
  EXPECT_THROW(mul(a.cref(), c.cref(), y.ref()), stringrt::Error);
  TD d = TD::zeros({3}), wrong = TD::zeros({3});
  EXPECT_THROW(sub(a.cref(), d.cref(), wrong.ref()), stringrt::Error);
}

enum class BinaryOp { Add, Sub, Mul };

void runBinary(BinaryOp op, const TD &l, const TD &r, TD &y) {
  switch (op) {
  case BinaryOp::Add:
    return add(l.cref(), r.cref(), y.ref());
  case BinaryOp::Sub:
    return sub(l.cref(), r.cref(), y.ref());
  case BinaryOp::Mul:
    return mul(l.cref(), r.cref(), y.ref());
  }
}

// reduce(t) = sum_to(t) to `shape`
TD reduceTo(const TD &t, const Shape &shape) {
  TD r = TD::zeros(shape);
  sumTo(t.cref(), r.ref());
  return r;
}

TD scaled(const TD &t, double factor) {
  TD r = TD::zeros(t.shape);
  scale(t.cref(), factor, 0.0, r.ref());
  return r;
}

TD product(const TD &a, const TD &b) {
  TD r = TD::zeros(a.shape.size() >= b.shape.size() ? a.shape : b.shape);
  mul(a.cref(), b.cref(), r.ref());
  return r;
}

struct BinaryCase {
  BinaryOp op;
  Shape lhs, rhs;
};

void PrintTo(const BinaryCase &c, std::ostream *os) {
  const char *op[] = {"add", "sub", "mul"};
  *os << op[static_cast<int>(c.op)] << " " << shapeToString(c.lhs) << " by "
      << shapeToString(c.rhs);
}

class BinaryKernelGrad : public ::testing::TestWithParam<BinaryCase> {};

// add: reduce(dy), reduce(dy); sub: reduce(dy), scale(reduce(dy), -1);
// mul: reduce(mul(dy, rhs)), reduce(mul(dy, lhs)).
TEST_P(BinaryKernelGrad, VJPMatchesFiniteDifferences) {
  const BinaryCase c = GetParam();
  const Shape out = c.lhs.size() >= c.rhs.size() ? c.lhs : c.rhs;
  TD l = fd::random(c.lhs, 51), r = fd::random(c.rhs, 52), v = fd::random(out, 53);
  auto forward = [&] {
    TD y = TD::zeros(out);
    runBinary(c.op, l, r, y);
    return y;
  };
  TD dl, dr;
  switch (c.op) {
  case BinaryOp::Add:
    dl = reduceTo(v, c.lhs);
    dr = reduceTo(v, c.rhs);
    break;
  case BinaryOp::Sub:
    dl = reduceTo(v, c.lhs);
    dr = scaled(reduceTo(v, c.rhs), -1);
    break;
  case BinaryOp::Mul:
    dl = reduceTo(product(v, r), c.lhs);
    dr = reduceTo(product(v, l), c.rhs);
    break;
  }
  EXPECT_TRUE(fd::checkVJP("d lhs", forward, l, v, dl));
  EXPECT_TRUE(fd::checkVJP("d rhs", forward, r, v, dr));
}

std::vector<BinaryCase> binaryCases() {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {3, 4}}, {{2, 3, 4}, {4}},
      {{4}, {2, 3, 4}},       {{3, 4}, {2, 3, 4}}, {{2, 3, 4}, {}}};
  std::vector<BinaryCase> cases;
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul})
    for (const auto &[l, r] : shapes)
      cases.push_back({op, l, r});
  return cases;
}

std::string shapeName(const Shape &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

// e.g. "mul_2x3x4_by_3x4"
std::string binaryCaseName(const ::testing::TestParamInfo<BinaryCase> &info) {
  const char *op[] = {"add", "sub", "mul"};
  return std::string(op[static_cast<int>(info.param.op)]) + "_" + shapeName(info.param.lhs) +
         "_by_" + shapeName(info.param.rhs);
}

INSTANTIATE_TEST_SUITE_P(AllOpsAndBroadcasts, BinaryKernelGrad,
                         ::testing::ValuesIn(binaryCases()), binaryCaseName);

//===--- scale -------------------------------------------------------------===//

TEST(ScaleKernel, HandComputedAndVJP) {
  TD x({3}, {1, -2, 4}), y = TD::zeros({3});
  scale(x.cref(), 0.5, 1.0, y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{1.5, 0, 3}));
  TD xr = fd::random({2, 3}, 61), v = fd::random({2, 3}, 62);
  auto forward = [&] {
    TD r = TD::zeros(xr.shape);
    scale(xr.cref(), -1.75, 0.25, r.ref());
    return r;
  };
  EXPECT_TRUE(fd::checkVJP("scale dx = scale(dy, factor)", forward, xr, v, scaled(v, -1.75)));
}

//===--- sum_to / broadcast_to ---------------------------------------------===//

TEST(SumToKernel, HandComputed) {
  TD x({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  EXPECT_EQ(reduceTo(x, {2, 3}).values, (std::vector<double>{8, 10, 12, 14, 16, 18}));
  EXPECT_EQ(reduceTo(x, {3}).values, (std::vector<double>{22, 26, 30}));
  EXPECT_EQ(reduceTo(x, {}).values, (std::vector<double>{78}));
  EXPECT_EQ(reduceTo(x, x.shape).values, x.values); // L = []: the identity
  TD bad = TD::zeros({2});
  EXPECT_THROW(sumTo(x.cref(), bad.ref()), stringrt::Error);
}

TEST(BroadcastToKernel, HandComputed) {
  TD x({2}, {1, 2}), y = TD::zeros({3, 2});
  broadcastTo(x.cref(), y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{1, 2, 1, 2, 1, 2}));
  TD s({}, {7}), ys = TD::zeros({2, 2});
  broadcastTo(s.cref(), ys.ref());
  EXPECT_EQ(ys.values, (std::vector<double>{7, 7, 7, 7}));
  TD bad = TD::zeros({2, 3});
  EXPECT_THROW(broadcastTo(x.cref(), bad.ref()), stringrt::Error);
}

// sum_to and broadcast_to are each other's VJP.
TEST(SumToKernel, SumToAndBroadcastToAreAdjoint) {
  for (Shape small : {Shape{}, Shape{4}, Shape{3, 4}, Shape{2, 3, 4}}) {
    const Shape big = {2, 3, 4};
    TD x = fd::random(big, 71), vs = fd::random(small, 72);
    auto sumForward = [&] { return reduceTo(x, small); };
    TD gx = TD::zeros(big);
    broadcastTo(vs.cref(), gx.ref());
    EXPECT_TRUE(fd::checkVJP("sum_to dx = broadcast_to(dy)", sumForward, x, vs, gx));

    TD s = fd::random(small, 73), vb = fd::random(big, 74);
    auto broadcastForward = [&] {
      TD y = TD::zeros(big);
      broadcastTo(s.cref(), y.ref());
      return y;
    };
    EXPECT_TRUE(fd::checkVJP("broadcast_to dx = sum_to(dy)", broadcastForward, s, vb,
                             reduceTo(vb, small)));
  }
}

//===--- expand_axis / mean ------------------------------------------------===//

TD expanded(const TD &x, int64_t axis, int64_t size) {
  Shape shape = x.shape;
  if (axis >= 0 && axis <= static_cast<int64_t>(shape.size())) // else the kernel throws
    shape.insert(shape.begin() + axis, size);
  TD y = TD::zeros(shape);
  expandAxis(x.cref(), axis, size, y.ref());
  return y;
}

TD meanOf(const TD &x, std::optional<int64_t> axis) {
  Shape shape;
  if (axis) {
    shape = x.shape;
    if (*axis >= 0 && *axis < static_cast<int64_t>(shape.size())) // else the kernel throws
      shape.erase(shape.begin() + *axis);
  }
  TD y = TD::zeros(shape);
  mean(x.cref(), axis, y.ref());
  return y;
}

TEST(ExpandAxisKernel, HandComputed) {
  TD x({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(expanded(x, 0, 2).values, (std::vector<double>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(expanded(x, 1, 2).values, (std::vector<double>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(expanded(x, 2, 2).values, (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}));
  EXPECT_THROW(expanded(x, 3, 2), stringrt::Error);
  EXPECT_THROW(expanded(x, 1, 0), stringrt::Error);
}

TEST(MeanKernel, HandComputed) {
  TD x({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(meanOf(x, 0).values, (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(meanOf(x, 1).values, (std::vector<double>{2, 5}));
  EXPECT_EQ(meanOf(x, std::nullopt).values, (std::vector<double>{3.5}));
  EXPECT_THROW(meanOf(x, 2), stringrt::Error);
}

// mean axis: dx = scale(expand_axis(dy, axis, n), 1/n);
// mean all:  dx = scale(broadcast_to(dy), 1/numel);
// expand_axis itself: dx = n * mean(dy, axis).
TEST(MeanKernel, VJPMatchesFiniteDifferences) {
  TD x = fd::random({2, 3, 4}, 81);
  for (int64_t axis = 0; axis < 3; ++axis) {
    const int64_t n = x.shape[axis];
    TD v = fd::random(meanOf(x, axis).shape, 82 + axis);
    auto forward = [&] { return meanOf(x, axis); };
    EXPECT_TRUE(fd::checkVJP("mean axis " + std::to_string(axis), forward, x, v,
                             scaled(expanded(v, axis, n), 1.0 / n)));

    TD s = fd::random(v.shape, 90 + axis), ve = fd::random(x.shape, 93 + axis);
    auto expandForward = [&] { return expanded(s, axis, n); };
    EXPECT_TRUE(fd::checkVJP("expand_axis " + std::to_string(axis), expandForward, s, ve,
                             scaled(meanOf(ve, axis), double(n))));
  }
  TD v({}, {0.7});
  TD dx = TD::zeros(x.shape);
  broadcastTo(v.cref(), dx.ref());
  auto forward = [&] { return meanOf(x, std::nullopt); };
  EXPECT_TRUE(fd::checkVJP("mean all", forward, x, v, scaled(dx, 1.0 / 24)));
}

//===--- float vs double ---------------------------------------------------===//

TEST(ElementwiseKernelsFloat, ForwardAgreesWithDouble) {
  TD a = fd::random({2, 3, 4}, 101, -3, 3), b = fd::random({3, 4}, 102, -3, 3);
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul})
    EXPECT_TRUE(fd::floatMatchesDouble("binary", [&](auto zero) {
      using T = decltype(zero);
      auto aT = fd::cast<T>(a), bT = fd::cast<T>(b);
      auto y = Tensor<T>::zeros(a.shape);
      if (op == BinaryOp::Add)
        add(aT.cref(), bT.cref(), y.ref());
      else if (op == BinaryOp::Sub)
        sub(bT.cref(), aT.cref(), y.ref());
      else
        mul(aT.cref(), bT.cref(), y.ref());
      return y;
    }));
  EXPECT_TRUE(fd::floatMatchesDouble("scale", [&](auto zero) {
    using T = decltype(zero);
    auto aT = fd::cast<T>(a);
    auto y = Tensor<T>::zeros(a.shape);
    scale(aT.cref(), 0.3, -1.1, y.ref());
    return y;
  }));
  EXPECT_TRUE(fd::floatMatchesDouble("sum_to", [&](auto zero) {
    using T = decltype(zero);
    auto aT = fd::cast<T>(a);
    auto y = Tensor<T>::zeros({4});
    sumTo(aT.cref(), y.ref());
    return y;
  }));
  EXPECT_TRUE(fd::floatMatchesDouble("broadcast_to", [&](auto zero) {
    using T = decltype(zero);
    auto bT = fd::cast<T>(b);
    auto y = Tensor<T>::zeros({2, 3, 4});
    broadcastTo(bT.cref(), y.ref());
    return y;
  }));
  EXPECT_TRUE(fd::floatMatchesDouble("expand_axis", [&](auto zero) {
    using T = decltype(zero);
    auto bT = fd::cast<T>(b);
    auto y = Tensor<T>::zeros({3, 5, 4});
    expandAxis(bT.cref(), 1, 5, y.ref());
    return y;
  }));
  for (std::optional<int64_t> axis : {std::optional<int64_t>(1), std::optional<int64_t>()})
    EXPECT_TRUE(fd::floatMatchesDouble("mean", [&](auto zero) {
      using T = decltype(zero);
      auto aT = fd::cast<T>(a);
      auto y = Tensor<T>::zeros(axis ? Shape{2, 4} : Shape{});
      mean(aT.cref(), axis, y.ref());
      return y;
    }));
}

} // namespace
