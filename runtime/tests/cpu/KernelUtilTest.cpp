// The private helpers of the fast kernels (src/cpu/KernelUtil.h).
#include "KernelUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

using stringrt::cpu::util::columnSums;
using stringrt::cpu::util::fastExp;
using stringrt::cpu::util::sumFloats;

// Within 4 ulp (float) of exp on the softmax range and a bit past 0.
TEST(CpuFastExp, MatchesExpToAFewUlp) {
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 88.0f * static_cast<float>(i) / 200000.0f;
    const double expected = std::exp(static_cast<double>(x));
    ASSERT_NEAR(fastExp(x), expected, 4.0 * 1.2e-7 * expected) << "x = " << x;
  }
  EXPECT_EQ(fastExp(0.0f), 1.0f);
}

TEST(CpuFastExp, ClampsFarNegativeArgumentsAndKeepsNaN) {
  const double floor = std::exp(static_cast<double>(-87.3f));
  for (float x : {-87.5f, -1e30f, -INFINITY})
    EXPECT_NEAR(fastExp(x), floor, 4.0 * 1.2e-7 * floor) << "x = " << x;
  EXPECT_TRUE(std::isnan(fastExp(NAN)));
}

TEST(CpuSumFloats, SumsEveryLengthExactlyOnSmallIntegers) {
  for (int64_t n = 0; n < 40; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      x[i] = static_cast<float>(i + 1);
    EXPECT_EQ(sumFloats(x.data(), n), static_cast<float>(n * (n + 1) / 2)) << "n = " << n;
  }
}

TEST(CpuColumnSums, SumsEveryColumnInDouble) {
  const int64_t N = 1000, D = 37;
  std::vector<float> x(static_cast<size_t>(N * D));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d)
      x[n * D + d] = static_cast<float>(d) + 0.001f * static_cast<float>(n % 7);
  std::vector<float> out(static_cast<size_t>(D));
  columnSums(x.data(), N, D, out.data());
  for (int64_t d = 0; d < D; ++d) {
    double expected = 0;
    for (int64_t n = 0; n < N; ++n)
      expected += x[n * D + d];
    EXPECT_FLOAT_EQ(out[d], static_cast<float>(expected));
  }
}

} // namespace
