// Central finite differences for checking backward (VJP) reference kernels
// against their forward kernels, in double precision.
//
//   checkGradient(name, loss, x, grad):  loss() -> double reads the current
//       values of x; for every element i,
//         fd_i = (loss(x + h e_i) - loss(x - h e_i)) / (2h)
//       must match grad_i within rtol * max(1, |grad_i|).
//   checkVJP(name, forward, x, v, grad):  forward() -> Tensor<double> reads x;
//       the loss is <v, forward()>, so grad must be J^T v (the VJP of the
//       forward kernel at x with cotangent v).
//   checkDirectional(name, loss, x, grad, dir):  one directional derivative,
//       (loss(x + h d) - loss(x - h d)) / (2h) against <grad, d>.
//   allClose(name, a, b, rtol):  |a - b| <= rtol * max(1, |b|) everywhere.
//   floatMatchesDouble(name, run):  run(0.0f) (widened) allClose run(0.0), 1e-5.
//   random(shape, seed, lo, hi), cast<To>(t), dot(a, b):  small helpers.
//
// x is restored exactly after each probe. Use with EXPECT_TRUE(...).
#pragma once

#include "stringrt/reference/Tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace stringrt::ref::fd {

struct Options {
  double step = 1e-6; // central-difference step h
  double rtol = 1e-6; // |fd - grad| <= rtol * max(1, |grad|)
};

// <a, b> over all elements; shapes must agree.
inline double dot(const Tensor<double> &a, const Tensor<double> &b) {
  checkShape("fd::dot", b.cref(), a.shape);
  double s = 0;
  for (size_t i = 0; i < a.values.size(); ++i)
    s += a.values[i] * b.values[i];
  return s;
}

// A tensor with values uniform in [lo, hi), deterministic in `seed`.
inline Tensor<double> random(std::vector<int64_t> shape, uint32_t seed,
                             double lo = -1.0, double hi = 1.0) {
  Tensor<double> t = Tensor<double>::zeros(std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double &v : t.values)
    v = dist(gen);
  return t;
}

// Element-wise conversion (e.g. double -> float for precision-agreement tests).
template <typename To, typename From> Tensor<To> cast(const Tensor<From> &t) {
  Tensor<To> r = Tensor<To>::zeros(t.shape);
  for (size_t i = 0; i < t.values.size(); ++i)
    r.values[i] = static_cast<To>(t.values[i]);
  return r;
}

// Same shape and |a - b| <= rtol * max(1, |b|) element-wise (b the reference,
// e.g. a float result widened to double against the double result).
inline ::testing::AssertionResult allClose(const std::string &name, const Tensor<double> &a,
                                           const Tensor<double> &b, double rtol) {
  if (a.shape != b.shape)
    return ::testing::AssertionFailure() << name << ": shape " << shapeToString(a.shape)
                                         << " != " << shapeToString(b.shape);
  for (size_t i = 0; i < a.values.size(); ++i) {
    const double tol = rtol * std::max(1.0, std::fabs(b.values[i]));
    if (!(std::fabs(a.values[i] - b.values[i]) <= tol))
      return ::testing::AssertionFailure() << name << ": [" << i << "] " << a.values[i]
                                           << " vs " << b.values[i] << " (tol " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

// run(0.0f) and run(0.0) evaluate one kernel in float and in double (on the
// same inputs, cast with cast<T>); the float result must be allClose to the
// double one.
template <class Run>
::testing::AssertionResult floatMatchesDouble(const std::string &name, Run run,
                                              double rtol = 1e-5) {
  return allClose(name + " (float vs double)", cast<double>(run(0.0f)), run(0.0), rtol);
}

// Every element of grad against a central difference of loss() in x.
template <class F>
::testing::AssertionResult checkGradient(const std::string &name, F &&loss,
                                         Tensor<double> &x,
                                         const Tensor<double> &grad,
                                         Options opt = {}) {
  if (grad.shape != x.shape)
    return ::testing::AssertionFailure()
           << name << ": gradient shape " << shapeToString(grad.shape)
           << " != input shape " << shapeToString(x.shape);
  std::ostringstream failures;
  int bad = 0;
  for (size_t i = 0; i < x.values.size(); ++i) {
    const double saved = x.values[i];
    x.values[i] = saved + opt.step;
    const double up = loss();
    x.values[i] = saved - opt.step;
    const double down = loss();
    x.values[i] = saved;
    const double numeric = (up - down) / (2 * opt.step);
    const double analytic = grad.values[i];
    const double tol = opt.rtol * std::max(1.0, std::fabs(analytic));
    if (!(std::fabs(numeric - analytic) <= tol)) { // also catches NaN
      if (++bad <= 8)
        failures << "\n  [" << i << "] analytic " << analytic << " finite-difference "
                 << numeric << " (diff " << numeric - analytic << ", tol " << tol << ")";
    }
  }
  if (bad)
    return ::testing::AssertionFailure()
           << name << ": " << bad << " of " << x.values.size()
           << " gradient entries disagree with central differences" << failures.str();
  return ::testing::AssertionSuccess();
}

// grad must equal J^T v where J is the Jacobian of forward() in x.
template <class F>
::testing::AssertionResult checkVJP(const std::string &name, F &&forward,
                                    Tensor<double> &x, const Tensor<double> &v,
                                    const Tensor<double> &grad, Options opt = {}) {
  auto loss = [&]() { return dot(v, forward()); };
  return checkGradient(name, loss, x, grad, opt);
}

// One directional derivative: d/dt loss(x + t d) at t = 0 against <grad, d>.
template <class F>
::testing::AssertionResult checkDirectional(const std::string &name, F &&loss,
                                            Tensor<double> &x,
                                            const Tensor<double> &grad,
                                            const Tensor<double> &dir,
                                            Options opt = {}) {
  if (grad.shape != x.shape || dir.shape != x.shape)
    return ::testing::AssertionFailure() << name << ": shape mismatch";
  const std::vector<double> saved = x.values;
  for (size_t i = 0; i < x.values.size(); ++i)
    x.values[i] = saved[i] + opt.step * dir.values[i];
  const double up = loss();
  for (size_t i = 0; i < x.values.size(); ++i)
    x.values[i] = saved[i] - opt.step * dir.values[i];
  const double down = loss();
  x.values = saved;
  const double numeric = (up - down) / (2 * opt.step);
  const double analytic = dot(grad, dir);
  const double tol = opt.rtol * std::max(1.0, std::fabs(analytic));
  if (!(std::fabs(numeric - analytic) <= tol))
    return ::testing::AssertionFailure()
           << name << ": directional derivative " << analytic << " vs finite-difference "
           << numeric << " (tol " << tol << ")";
  return ::testing::AssertionSuccess();
}

} // namespace stringrt::ref::fd
