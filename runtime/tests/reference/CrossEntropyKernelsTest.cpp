// Reference cross-entropy kernels: uniform logits give log C, a hand-computed
// case, label checks, the gradient against central finite differences for
// logits of rank 1 to 3, float vs double.
#include "stringrt/reference/LayerKernels.h"

#include "FiniteDifference.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using namespace stringrt::ref;
using TD = Tensor<double>;
using Labels = Tensor<int32_t>;

double loss(const TD &logits, const Labels &labels) {
  TD l = TD::zeros({});
  crossEntropy(logits.cref(), labels.cref(), l.ref());
  return l.values[0];
}

TEST(CrossEntropyKernel, UniformLogitsGiveLogC) {
  const int64_t C = 7;
  TD logits({2, 3, C}, std::vector<double>(2 * 3 * C, 0.25));
  Labels labels({2, 3}, {0, 6, 3, 2, 2, 5});
  EXPECT_NEAR(loss(logits, labels), std::log(double(C)), 1e-15);
}

TEST(CrossEntropyKernel, HandComputed) {
  // Row 0: [0, ln 3], label 0 -> ln 4; row 1: [5, 5], label 1 -> ln 2.
  TD logits({2, 2}, {0, std::log(3.0), 5, 5});
  Labels labels({2}, {0, 1});
  EXPECT_NEAR(loss(logits, labels), (std::log(4.0) + std::log(2.0)) / 2, 1e-15);
}

TEST(CrossEntropyKernel, LargeLogitsStayFinite) {
  TD logits({1, 3}, {1e4, -1e4, 1e4 - 1});
  Labels labels({1}, {1});
  EXPECT_NEAR(loss(logits, labels), 2e4 + std::log1p(std::exp(-1.0)), 1e-9);
}

TEST(CrossEntropyKernel, RejectsBadLabels) {
  TD logits = TD::zeros({2, 3}), l = TD::zeros({}), dy({}, {1}), dl = TD::zeros({2, 3});
  for (int32_t bad : {-1, 3}) {
    Labels labels({2}, {0, bad});
    EXPECT_THROW(crossEntropy(logits.cref(), labels.cref(), l.ref()), stringrt::Error);
    EXPECT_THROW(crossEntropyGrad(logits.cref(), labels.cref(), dy.cref(), dl.ref()),
                 stringrt::Error);
  }
  Labels wrongShape({3}, {0, 0, 0});
  EXPECT_THROW(crossEntropy(logits.cref(), wrongShape.cref(), l.ref()), stringrt::Error);
  TD empty = TD::zeros({0, 3});
  Labels none({0}, {});
  EXPECT_THROW(crossEntropy(empty.cref(), none.cref(), l.ref()), stringrt::Error);
}

// dlogits = dy (softmax - onehot) / N
TEST(CrossEntropyKernel, GradientMatchesFiniteDifferences) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int32_t>>> cases = {
      {{5}, {3}}, {{3, 5}, {0, 4, 2}}, {{2, 3, 5}, {1, 1, 0, 4, 3, 2}}};
  for (const auto &[shape, ids] : cases) {
    TD logits = fd::random(shape, 401, -3, 3);
    Labels labels(std::vector<int64_t>(shape.begin(), shape.end() - 1), ids);
    TD dy({}, {1.3});
    auto forward = [&] {
      TD l = TD::zeros({});
      crossEntropy(logits.cref(), labels.cref(), l.ref());
      return l;
    };
    TD dl = TD::zeros(shape);
    crossEntropyGrad(logits.cref(), labels.cref(), dy.cref(), dl.ref());
    EXPECT_TRUE(fd::checkVJP("cross_entropy dlogits, rank " + std::to_string(shape.size()),
                             forward, logits, dy, dl));
  }
}

// Label smoothing e: loss = mean(logsumexp - (1 - e) x[label] - (e / C) sum_c x),
// PyTorch's label_smoothing (checked against torch in tests/oracle).
TEST(CrossEntropyKernel, LabelSmoothingHandComputed) {
  // Row 0: [0, ln 3], label 0: ln 4 - 0.8 * 0 - 0.1 * ln 3;
  // row 1: [5, 5], label 1: 5 + ln 2 - 0.8 * 5 - 0.1 * 10.
  TD logits({2, 2}, {0, std::log(3.0), 5, 5});
  Labels labels({2}, {0, 1});
  TD l = TD::zeros({});
  crossEntropy(logits.cref(), labels.cref(), l.ref(), 0.2);
  const double row0 = std::log(4.0) - 0.1 * std::log(3.0), row1 = std::log(2.0);
  EXPECT_NEAR(l.values[0], (row0 + row1) / 2, 1e-15);
}

TEST(CrossEntropyKernel, LabelSmoothingGradientMatchesFiniteDifferences) {
  for (double e : {0.1, 0.45, 0.9}) {
    const std::vector<int64_t> shape{2, 3, 5};
    TD logits = fd::random(shape, 403, -3, 3);
    Labels labels({2, 3}, {1, 1, 0, 4, 3, 2});
    TD dy({}, {0.7});
    auto forward = [&] {
      TD l = TD::zeros({});
      crossEntropy(logits.cref(), labels.cref(), l.ref(), e);
      return l;
    };
    TD dl = TD::zeros(shape);
    crossEntropyGrad(logits.cref(), labels.cref(), dy.cref(), dl.ref(), e);
    EXPECT_TRUE(fd::checkVJP("cross_entropy dlogits, smoothing " + std::to_string(e), forward,
                             logits, dy, dl));
  }
}

TEST(CrossEntropyKernel, ZeroSmoothingIsThePlainLossBitForBit) {
  Tensor<float> logits({3, 4}, {0.3f, -1.2f, 2.5f, 0.1f, 1.f, 1.f, -3.f, 0.5f, 7.f, 2.f, 0.f, -1.f});
  Labels labels({3}, {2, 0, 1});
  Tensor<float> plain = Tensor<float>::zeros({}), smooth = Tensor<float>::zeros({});
  crossEntropy(logits.cref(), labels.cref(), plain.ref());
  crossEntropy(logits.cref(), labels.cref(), smooth.ref(), 0.0);
  EXPECT_EQ(plain.values[0], smooth.values[0]);
}

TEST(CrossEntropyKernel, RejectsSmoothingOutsideZeroToOne) {
  TD logits = TD::zeros({2, 3}), l = TD::zeros({}), dy({}, {1}), dl = TD::zeros({2, 3});
  Labels labels({2}, {0, 1});
  for (double bad : {-0.1, 1.0, 2.0, std::nan("")}) {
    EXPECT_THROW(crossEntropy(logits.cref(), labels.cref(), l.ref(), bad), stringrt::Error);
    EXPECT_THROW(crossEntropyGrad(logits.cref(), labels.cref(), dy.cref(), dl.ref(), bad),
                 stringrt::Error);
  }
}

TEST(CrossEntropyKernelsFloat, ForwardAgreesWithDouble) {
  TD logits = fd::random({2, 3, 6}, 411, -4, 4);
  Labels labels({2, 3}, {5, 0, 2, 2, 1, 3});
  EXPECT_TRUE(fd::floatMatchesDouble("cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    auto lT = fd::cast<T>(logits);
    auto l = Tensor<T>::zeros({});
    crossEntropy(lT.cref(), labels.cref(), l.ref());
    return l;
  }));
}

} // namespace
