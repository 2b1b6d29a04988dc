// pe.householder and its frequency gradient pe.householder_grad_freqs
// (PEPositionOps.td: each interleaved pair of x [..., T, D] reflected twice,
// H(a2) H(a1) with a = pos[t] . f[j], which is the rotation by
// 2 (a2 - a1); householder's x-gradient is pe.householder with f1 and f2
// swapped): the shape contracts, the reference kernels (every kernel set
// runs them: there is no fast variant) and the registration
// (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/PositionOps.h; the loops householder shares with pe.rope in
// RotaryPairs.h. stringc generates no CPU kernel for these ops.
#include "../OpLibrary.h"

#include "RotaryPairs.h"

#include "stringrt/ops/PositionOps.h"

#include <array>
#include <cmath>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkShape;
using ref::TensorRef;
using rotary::RotaryShape;

// householder: x [..., T, D] (D even), pos [T, A], f1, f2 [D/2, A], the
// result the shape of x.
template <typename T>
RotaryShape householderContract(const TensorRef<const T> &x, const TensorRef<const T> &pos,
                                const TensorRef<const T> &f1, const TensorRef<const T> &f2,
                                const TensorRef<T> &y) {
  const RotaryShape s = rotary::contract<T>("householder", x, pos);
  checkShape("householder: 'f1'", f1, {s.pairs, s.axes});
  checkShape("householder: 'f2'", f2, {s.pairs, s.axes});
  checkShape("householder: result", y, x.shape);
  return s;
}

// householder_grad_freqs: householder's operands, dy the shape of x, df1 and
// df2 those of f1 and f2.
template <typename T>
RotaryShape householderGradFreqsContract(const TensorRef<const T> &x,
                                         const TensorRef<const T> &pos,
                                         const TensorRef<const T> &f1,
                                         const TensorRef<const T> &f2,
                                         const TensorRef<const T> &dy, const TensorRef<T> &df1,
                                         const TensorRef<T> &df2) {
  const RotaryShape s = rotary::contract<T>("householder_grad_freqs", x, pos);
  checkShape("householder_grad_freqs: 'f1'", f1, {s.pairs, s.axes});
  checkShape("householder_grad_freqs: 'f2'", f2, {s.pairs, s.axes});
  checkShape("householder_grad_freqs: 'dy'", dy, x.shape);
  checkShape("householder_grad_freqs: result 'df1'", df1, f1.shape);
  checkShape("householder_grad_freqs: result 'df2'", df2, f2.shape);
  return s;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using ops::rotary::angleGrad;
using ops::rotary::angles;
using ops::rotary::applyPairs;
using ops::rotary::contractPositions;
using ops::rotary::RotaryShape;

// y = H(a2) H(a1) x per pair, H(a) = I - 2 v v^T, v = (cos a, sin a), written
// out as the product of the two reflections.
template <typename T>
void householder(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> f1,
                 TensorRef<const T> f2, TensorRef<T> y) {
  const RotaryShape s = ops::householderContract<T>(x, pos, f1, f2, y);
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
  const RotaryShape s = ops::householderGradFreqsContract<T>(x, pos, f1, f2, dy, df1, df2);
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
  template void householder<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,         \
                               TensorRef<const T>, TensorRef<T>);                                  \
  template void householderGradFreqs<T>(TensorRef<const T>, TensorRef<const T>,                    \
                                        TensorRef<const T>, TensorRef<const T>,                    \
                                        TensorRef<const T>, TensorRef<T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runHouseholder(const OpContext &c) {
  ref::householder<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.out(0));
}

void runHouseholderGradFreqs(const OpContext &c) {
  ref::householderGradFreqs<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), c.out(0),
                                    c.out(1));
}

} // namespace

template <> void registerOps<OpCode::Householder>(OpRegistry &registry) {
  registry.add(OpCode::Householder, {runHouseholder});
  registry.add(OpCode::HouseholderGradFreqs, {runHouseholderGradFreqs});
}

} // namespace stringrt::ops
