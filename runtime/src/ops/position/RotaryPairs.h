// What pe.rope and pe.householder (PEPositionOps.td) share: both turn the
// interleaved pairs (x[.., t, 2j], x[.., t, 2j+1]) of x [..., T, D] by a
// 2x2 matrix per (token, pair) whose angles are positions times frequency
// tables, and both differentiate their frequencies through the angle
// gradient of a rotation. The first part of their shape contracts and the
// loops of their reference kernels (in double, each result rounded once to
// T), each op file (Rope.cpp, Householder.cpp) passing its matrices.
// Private to the runtime.
#pragma once

#include "../../reference/PositionUtil.h"

#include "stringrt/reference/Tensor.h"

#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace stringrt::ops::rotary {

using ref::TensorRef;

// Sizes of a rotary op: x [lead..., tokens, width], pos [tokens, axes],
// frequency tables [width/2, axes].
struct RotaryShape {
  int64_t lead = 0, tokens = 0, width = 0, pairs = 0, axes = 0;
};

// The contract's first part: x [..., T, D] with D even, pos [T, A].
template <typename T>
RotaryShape contract(const std::string &op, const TensorRef<const T> &x,
                     const TensorRef<const T> &pos) {
  ref::check(x.rank() >= 2, op.c_str(),
             "'x' must be [..., T, D], got shape " + ref::shapeToString(x.shape));
  ref::checkRank((op + ": 'pos'").c_str(), pos, 2);
  RotaryShape s;
  s.lead = ref::position::leadingCount(x.shape, 2);
  s.tokens = x.dim(-2);
  s.width = x.dim(-1);
  s.pairs = s.width / 2;
  s.axes = pos.dim(1);
  ref::check(s.width % 2 == 0, op.c_str(),
             "the last dimension of 'x' must be even (interleaved pairs), got " +
                 std::to_string(s.width));
  ref::checkShape((op + ": 'pos'").c_str(), pos, {s.tokens, s.axes});
  return s;
}

// angle[t][j] = sum_a pos[t, a] f[j, a]
template <typename T>
std::vector<std::vector<double>> angles(const RotaryShape &s, TensorRef<const T> pos,
                                        TensorRef<const T> f) {
  std::vector<std::vector<double>> angle(s.tokens, std::vector<double>(s.pairs, 0.0));
  for (int64_t t = 0; t < s.tokens; ++t)
    for (int64_t j = 0; j < s.pairs; ++j)
      for (int64_t a = 0; a < s.axes; ++a)
        angle[t][j] += static_cast<double>(pos[t * s.axes + a]) * static_cast<double>(f[j * s.axes + a]);
  return angle;
}

// y = M(t, j) x for every pair, M a 2x2 row-major matrix per (t, j).
template <typename T>
void applyPairs(const RotaryShape &s, TensorRef<const T> x,
                const std::vector<std::vector<std::array<double, 4>>> &m, TensorRef<T> y) {
  for (int64_t l = 0; l < s.lead; ++l)
    for (int64_t t = 0; t < s.tokens; ++t)
      for (int64_t j = 0; j < s.pairs; ++j) {
        const int64_t at = (l * s.tokens + t) * s.width + 2 * j;
        const double x0 = x[at], x1 = x[at + 1];
        const std::array<double, 4> &r = m[t][j];
        y[at] = static_cast<T>(r[0] * x0 + r[1] * x1);
        y[at + 1] = static_cast<T>(r[2] * x0 + r[3] * x1);
      }
}

// The gradient of a per-pair rotation angle, for y = R(phi) x:
// dphi[t][j] = sum_lead (dy1 y0 - dy0 y1) (R'(phi) x = (-y1, y0)).
template <typename T>
std::vector<std::vector<double>> angleGrad(const RotaryShape &s, TensorRef<const T> x,
                                           TensorRef<const T> dy,
                                           const std::vector<std::vector<double>> &phi) {
  std::vector<std::vector<double>> dphi(s.tokens, std::vector<double>(s.pairs, 0.0));
  for (int64_t l = 0; l < s.lead; ++l)
    for (int64_t t = 0; t < s.tokens; ++t)
      for (int64_t j = 0; j < s.pairs; ++j) {
        const int64_t at = (l * s.tokens + t) * s.width + 2 * j;
        const double c = std::cos(phi[t][j]), sn = std::sin(phi[t][j]);
        const double x0 = x[at], x1 = x[at + 1];
        const double y0 = x0 * c - x1 * sn, y1 = x0 * sn + x1 * c;
        dphi[t][j] += static_cast<double>(dy[at + 1]) * y0 - static_cast<double>(dy[at]) * y1;
      }
  return dphi;
}

// out[j, a] = factor * sum_t pos[t, a] dphi[t][j]
template <typename T>
void contractPositions(const RotaryShape &s, TensorRef<const T> pos,
                       const std::vector<std::vector<double>> &dphi, double factor,
                       TensorRef<T> out) {
  for (int64_t j = 0; j < s.pairs; ++j)
    for (int64_t a = 0; a < s.axes; ++a) {
      double sum = 0.0;
      for (int64_t t = 0; t < s.tokens; ++t)
        sum += static_cast<double>(pos[t * s.axes + a]) * dphi[t][j];
      out[j * s.axes + a] = static_cast<T>(factor * sum);
    }
}

} // namespace stringrt::ops::rotary
