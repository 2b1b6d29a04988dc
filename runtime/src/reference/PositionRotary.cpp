// Reference kernels of the rotary ops: rope, rope_grad_freqs, householder,
// householder_grad_freqs.
#include "stringrt/reference/PositionKernels.h"

#include "PositionUtil.h"

#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace stringrt::ref {
namespace {

using position::leadingCount;

// Sizes of a rotary op: x [lead..., tokens, width], pos [tokens, axes],
// frequency tables [width/2, axes].
struct RotaryShape {
  int64_t lead = 0, tokens = 0, width = 0, pairs = 0, axes = 0;
};

template <typename T>
RotaryShape checkRotary(const std::string &op, TensorRef<const T> x, TensorRef<const T> pos) {
  check(x.rank() >= 2, op.c_str(),
        "'x' must be [..., T, D], got shape " + shapeToString(x.shape));
  checkRank((op + ": 'pos'").c_str(), pos, 2);
  RotaryShape s;
  s.lead = leadingCount(x.shape, 2);
  s.tokens = x.dim(-2);
  s.width = x.dim(-1);
  s.pairs = s.width / 2;
  s.axes = pos.dim(1);
  check(s.width % 2 == 0, op.c_str(),
        "the last dimension of 'x' must be even (interleaved pairs), got " +
            std::to_string(s.width));
  checkShape((op + ": 'pos'").c_str(), pos, {s.tokens, s.axes});
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

// R(theta) = [[cos, -sin], [sin, cos]] for every angle.
std::vector<std::vector<std::array<double, 4>>>
rotations(const std::vector<std::vector<double>> &angle) {
  std::vector<std::vector<std::array<double, 4>>> m(angle.size());
  for (size_t t = 0; t < angle.size(); ++t)
    for (double theta : angle[t]) {
      const double c = std::cos(theta), s = std::sin(theta);
      m[t].push_back({c, -s, s, c});
    }
  return m;
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

} // namespace

// y = R(theta_j(t)) x per pair, theta_j(t) = pos[t] . freqs[j].
template <typename T>
void rope(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> freqs, TensorRef<T> y) {
  const RotaryShape s = checkRotary<T>("rope", x, pos);
  checkShape("rope: 'freqs'", freqs, {s.pairs, s.axes});
  checkShape("rope: result", y, x.shape);
  applyPairs<T>(s, x, rotations(angles<T>(s, pos, freqs)), y);
}

// dfreqs[j, a] = sum_t pos[t, a] sum_lead (dy1 y0 - dy0 y1), y = rope(x).
template <typename T>
void ropeGradFreqs(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> freqs,
                   TensorRef<const T> dy, TensorRef<T> dfreqs) {
  const RotaryShape s = checkRotary<T>("rope_grad_freqs", x, pos);
  checkShape("rope_grad_freqs: 'freqs'", freqs, {s.pairs, s.axes});
  checkShape("rope_grad_freqs: 'dy'", dy, x.shape);
  checkShape("rope_grad_freqs: result 'dfreqs'", dfreqs, freqs.shape);
  const auto dtheta = angleGrad<T>(s, x, dy, angles<T>(s, pos, freqs));
  contractPositions<T>(s, pos, dtheta, 1.0, dfreqs);
}

// y = H(a2) H(a1) x per pair, H(a) = I - 2 v v^T, v = (cos a, sin a), written
// out as the product of the two reflections.
template <typename T>
void householder(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> f1,
                 TensorRef<const T> f2, TensorRef<T> y) {
  const RotaryShape s = checkRotary<T>("householder", x, pos);
  checkShape("householder: 'f1'", f1, {s.pairs, s.axes});
  checkShape("householder: 'f2'", f2, {s.pairs, s.axes});
  checkShape("householder: result", y, x.shape);
  const auto a1 = angles<T>(s, pos, f1), a2 = angles<T>(s, pos, f2);
  auto reflection = [](double a) -> std::array<double, 4> {
    const double c = std::cos(a), sn = std::sin(a);
    return {1.0 - 2.0 * c * c, -2.0 * c * sn, -2.0 * sn * c, 1.0 - 2.0 * sn * sn};
  };
  std::vector<std::vector<std::array<double, 4>>> m(s.tokens);
  for (int64_t t = 0; t < s.tokens; ++t)
    for (int64_t j = 0; j < s.pairs; ++j) {
      const std::array<double, 4> h2 = reflection(a2[t][j]), h1 = reflection(a1[t][j]);
      m[t].push_back({h2[0] * h1[0] + h2[1] * h1[2], h2[0] * h1[1] + h2[1] * h1[3],
                      h2[2] * h1[0] + h2[3] * h1[2], h2[2] * h1[1] + h2[3] * h1[3]});
    }
  applyPairs<T>(s, x, m, y);
}

// H(a2) H(a1) = R(phi), phi = 2 (a2 - a1): with G[j, a] = sum_t pos[t, a]
// dphi_j(t) (dphi as in rope_grad_freqs at phi), df1 = -2 G, df2 = 2 G.
template <typename T>
void householderGradFreqs(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> f1,
                          TensorRef<const T> f2, TensorRef<const T> dy, TensorRef<T> df1,
                          TensorRef<T> df2) {
  const RotaryShape s = checkRotary<T>("householder_grad_freqs", x, pos);
  checkShape("householder_grad_freqs: 'f1'", f1, {s.pairs, s.axes});
  checkShape("householder_grad_freqs: 'f2'", f2, {s.pairs, s.axes});
  checkShape("householder_grad_freqs: 'dy'", dy, x.shape);
  checkShape("householder_grad_freqs: result 'df1'", df1, f1.shape);
  checkShape("householder_grad_freqs: result 'df2'", df2, f2.shape);
  const auto a1 = angles<T>(s, pos, f1), a2 = angles<T>(s, pos, f2);
  std::vector<std::vector<double>> phi(s.tokens, std::vector<double>(s.pairs));
  for (int64_t t = 0; t < s.tokens; ++t)
    for (int64_t j = 0; j < s.pairs; ++j)
      phi[t][j] = 2.0 * (a2[t][j] - a1[t][j]);
  const auto dphi = angleGrad<T>(s, x, dy, phi);
  contractPositions<T>(s, pos, dphi, -2.0, df1);
  contractPositions<T>(s, pos, dphi, 2.0, df2);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void rope<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>, TensorRef<T>); \
  template void ropeGradFreqs<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,       \
                                 TensorRef<const T>, TensorRef<T>);                                \
  template void householder<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,         \
                               TensorRef<const T>, TensorRef<T>);                                  \
  template void householderGradFreqs<T>(TensorRef<const T>, TensorRef<const T>,                    \
                                        TensorRef<const T>, TensorRef<const T>,                    \
                                        TensorRef<const T>, TensorRef<T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
