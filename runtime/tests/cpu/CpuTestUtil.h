// Helpers for the fast CPU kernel tests: random float tensors, tolerance
// comparisons, and running a kernel under a given pool size.
#pragma once

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/reference/Tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace stringrt::cpu::testing {

using TF = ref::Tensor<float>;

// Values uniform in [lo, hi), deterministic in `seed`.
inline TF randomTensor(std::vector<int64_t> shape, uint32_t seed, float lo = -1.0f,
                       float hi = 1.0f) {
  TF t = TF::zeros(std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float &v : t.values)
    v = dist(gen);
  return t;
}

// Integers uniform in [0, n), deterministic in `seed`.
inline ref::Tensor<int32_t> randomIds(std::vector<int64_t> shape, int32_t n, uint32_t seed) {
  ref::Tensor<int32_t> t = ref::Tensor<int32_t>::zeros(std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, n - 1);
  for (int32_t &v : t.values)
    v = dist(gen);
  return t;
}

// Same shape and |a - b| <= atol + rtol |b| everywhere (b the expected
// values). NaN anywhere fails.
inline ::testing::AssertionResult near(const std::string &name, const TF &a, const TF &b,
                                       double rtol, double atol) {
  if (a.shape != b.shape)
    return ::testing::AssertionFailure() << name << ": shape " << ref::shapeToString(a.shape)
                                         << " != " << ref::shapeToString(b.shape);
  for (size_t i = 0; i < a.values.size(); ++i) {
    const double x = a.values[i], y = b.values[i];
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y)))
      return ::testing::AssertionFailure() << name << ": [" << i << "] " << x << " vs expected "
                                           << y << " (rtol " << rtol << ", atol " << atol << ")";
  }
  return ::testing::AssertionSuccess();
}

// Bit-for-bit equality (what every thread count must give).
inline ::testing::AssertionResult sameBits(const std::string &name, const TF &a, const TF &b) {
  if (a.shape != b.shape)
    return ::testing::AssertionFailure() << name << ": shape " << ref::shapeToString(a.shape)
                                         << " != " << ref::shapeToString(b.shape);
  for (size_t i = 0; i < a.values.size(); ++i)
    if (std::memcmp(&a.values[i], &b.values[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure()
             << name << ": [" << i << "] " << std::setprecision(9) << a.values[i] << " vs "
             << b.values[i] << " (not the same bits)";
  return ::testing::AssertionSuccess();
}

// The fast-vs-reference tolerance (float sums in different orders).
inline ::testing::AssertionResult matchesReference(const std::string &name, const TF &fast,
                                                   const TF &reference) {
  return near(name, fast, reference, 1e-4, 1e-5);
}

// Sets the pool size for a scope, restoring the previous one after.
class ScopedThreads {
public:
  explicit ScopedThreads(int n) : previous_(numThreads()) { setNumThreads(n); }
  ~ScopedThreads() { setNumThreads(previous_); }
  ScopedThreads(const ScopedThreads &) = delete;
  ScopedThreads &operator=(const ScopedThreads &) = delete;

private:
  int previous_;
};

// Checks a fast kernel against its reference: run(true) runs the fast
// kernel, run(false) the reference one, each returning the outputs in the
// same order. The fast outputs with 1 and with 4 threads must both match the
// reference, and each other bit for bit (Gemm.h, ThreadPool.h: results never
// depend on the thread count).
template <typename Run> void expectFastMatchesReference(const std::string &name, Run run) {
  const std::vector<TF> reference = run(false);
  std::vector<TF> fast1, fast4;
  {
    ScopedThreads threads(1);
    fast1 = run(true);
  }
  {
    ScopedThreads threads(4);
    fast4 = run(true);
  }
  ASSERT_EQ(fast1.size(), reference.size());
  ASSERT_EQ(fast4.size(), reference.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    const std::string what = name + " output " + std::to_string(i);
    EXPECT_TRUE(matchesReference(what, fast1[i], reference[i]));
    EXPECT_TRUE(sameBits(what + " (4 threads vs 1)", fast4[i], fast1[i]));
  }
}

} // namespace stringrt::cpu::testing
