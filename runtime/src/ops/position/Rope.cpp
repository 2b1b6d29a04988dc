// pe.rope and its frequency gradient pe.rope_grad_freqs (PEPositionOps.td:
// rotary embeddings, each interleaved pair of x [..., T, D] turned by
// theta_j(t) = pos[t] . freqs[j]; rope's x-gradient is pe.rope with negated
// frequencies): the shape contracts, the reference kernels, the fast
// kernels (rope, and its x-gradient as a kernel of its own) and the
// registration (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/PositionOps.h; the loops rope shares with pe.householder
// (Householder.cpp) in RotaryPairs.h. stringc generates no CPU kernel for
// these ops (the hoisted pe.rope_table / pe.rope_apply are the fused
// family's).
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"
#include "RotaryPairs.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/PositionOps.h"

#include <array>
#include <cmath>
#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkShape;
using ref::TensorRef;
using rotary::RotaryShape;

// rope (and the fast x-gradient, as `op`): x [..., T, D] (D even), pos
// [T, A], freqs [D/2, A], the result the shape of x.
template <typename T>
RotaryShape ropeContract(const std::string &op, const TensorRef<const T> &x,
                         const TensorRef<const T> &pos, const TensorRef<const T> &freqs,
                         const TensorRef<T> &y) {
  const RotaryShape s = rotary::contract<T>(op, x, pos);
  checkShape((op + ": 'freqs'").c_str(), freqs, {s.pairs, s.axes});
  checkShape((op + ": result").c_str(), y, x.shape);
  return s;
}

// rope_grad_freqs: rope's operands, dy the shape of x, dfreqs that of freqs.
template <typename T>
RotaryShape ropeGradFreqsContract(const TensorRef<const T> &x, const TensorRef<const T> &pos,
                                  const TensorRef<const T> &freqs, const TensorRef<const T> &dy,
                                  const TensorRef<T> &dfreqs) {
  const RotaryShape s = rotary::contract<T>("rope_grad_freqs", x, pos);
  checkShape("rope_grad_freqs: 'freqs'", freqs, {s.pairs, s.axes});
  checkShape("rope_grad_freqs: 'dy'", dy, x.shape);
  checkShape("rope_grad_freqs: result 'dfreqs'", dfreqs, freqs.shape);
  return s;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {
namespace {

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

} // namespace

// y = R(theta_j(t)) x per pair, theta_j(t) = pos[t] . freqs[j].
template <typename T>
void rope(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> freqs, TensorRef<T> y) {
  const ops::rotary::RotaryShape s = ops::ropeContract<T>("rope", x, pos, freqs, y);
  ops::rotary::applyPairs<T>(s, x, rotations(ops::rotary::angles<T>(s, pos, freqs)), y);
}

// dfreqs[j, a] = sum_t pos[t, a] sum_lead (dy1 y0 - dy0 y1), y = rope(x).
template <typename T>
void ropeGradFreqs(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> freqs,
                   TensorRef<const T> dy, TensorRef<T> dfreqs) {
  const ops::rotary::RotaryShape s = ops::ropeGradFreqsContract(x, pos, freqs, dy, dfreqs);
  const auto dtheta = ops::rotary::angleGrad<T>(s, x, dy, ops::rotary::angles<T>(s, pos, freqs));
  ops::rotary::contractPositions<T>(s, pos, dtheta, 1.0, dfreqs);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void rope<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>, TensorRef<T>); \
  template void ropeGradFreqs<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,       \
                                 TensorRef<const T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: a cos / sin table per call, then the rows in parallel
//===----------------------------------------------------------------------===//
//
// The angles theta_j(t) = pos[t] . freqs[j] depend on the token only, not on
// the leading (batch) index, so cos and sin are computed once per call into a
// [T, D/2] table - in double, as the reference does, then rounded - and the
// rotation itself is a light float pass over the rows. Nothing is cached
// across calls.

namespace stringrt::cpu {
namespace {

using ops::rotary::RotaryShape;
using util::rowGrain;

// y = R(direction * theta) x per interleaved pair, R = [[cos, -sin], [sin, cos]].
void rotatePairs(const RotaryShape &s, const float *x, const float *pos, const float *freqs,
                 double direction, float *y) {
  // cosSin[(t pairs + j) 2 + {0, 1}] = cos, sin of direction * theta_j(t)
  std::vector<float> cosSin(static_cast<size_t>(2 * s.tokens * s.pairs));
  parallelFor(0, s.tokens, 1 + 256 / (s.pairs + 1), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t j = 0; j < s.pairs; ++j) {
        double theta = 0.0;
        for (int64_t a = 0; a < s.axes; ++a)
          theta += static_cast<double>(pos[t * s.axes + a]) * static_cast<double>(freqs[j * s.axes + a]);
        theta *= direction;
        cosSin[2 * (t * s.pairs + j)] = static_cast<float>(std::cos(theta));
        cosSin[2 * (t * s.pairs + j) + 1] = static_cast<float>(std::sin(theta));
      }
  });
  // Rows l*T + t of x, each rotated by token t's table row.
  parallelFor(0, s.lead * s.tokens, rowGrain(s.width), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *cs = cosSin.data() + 2 * (r % s.tokens) * s.pairs;
      const float *in = x + r * s.width;
      float *out = y + r * s.width;
      for (int64_t j = 0; j < s.pairs; ++j) {
        const float c = cs[2 * j], sn = cs[2 * j + 1];
        const float x0 = in[2 * j], x1 = in[2 * j + 1];
        out[2 * j] = x0 * c - x1 * sn;
        out[2 * j + 1] = x0 * sn + x1 * c;
      }
    }
  });
}

} // namespace

void rope(TensorRef<const float> x, TensorRef<const float> pos, TensorRef<const float> freqs,
          TensorRef<float> y) {
  const RotaryShape s = ops::ropeContract<float>("rope", x, pos, freqs, y);
  rotatePairs(s, x.data, pos.data, freqs.data, 1.0, y.data);
}

void ropeGradInput(TensorRef<const float> dy, TensorRef<const float> pos,
                   TensorRef<const float> freqs, TensorRef<float> dx) {
  const RotaryShape s = ops::ropeContract<float>("rope_grad_input", dy, pos, freqs, dx);
  rotatePairs(s, dy.data, pos.data, freqs.data, -1.0, dx.data);
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

// pe.rope's `mode` against its positions (operand 1: [T, 1] for seq, [T, 2]
// for axial and mixed); the kernels take any A.
void checkRopeMode(const OpContext &c) {
  const std::string &mode = c.op().getString("mode");
  int64_t axes = mode == "seq" ? 1 : (mode == "axial" || mode == "mixed") ? 2 : 0;
  if (axes == 0)
    c.fail("unknown mode '" + mode + "' (seq, axial or mixed)");
  ref::TensorRef<const float> pos = c.in(1);
  if (pos.rank() != 2 || pos.dim(1) != axes)
    c.fail("mode " + mode + " needs positions [T, " + std::to_string(axes) + "], got " +
           ref::shapeToString(pos.shape));
}

void runRope(const OpContext &c) {
  checkRopeMode(c);
  ref::rope<float>(c.in(0), c.in(1), c.in(2), c.out(0));
}
// pe.rope covers the rotary x-gradient too: pe-autodiff emits it as pe.rope
// with negated frequencies (R(theta)^T = R(-theta)), so there is no
// separate op for cpu::ropeGradInput to serve.
void runFastRope(const OpContext &c) {
  checkRopeMode(c);
  cpu::rope(c.in(0), c.in(1), c.in(2), c.out(0));
}

void runRopeGradFreqs(const OpContext &c) {
  ref::ropeGradFreqs<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::Rope>(OpRegistry &registry) {
  registry.add(OpCode::Rope, {runRope, nullptr, runFastRope});
  registry.add(OpCode::RopeGradFreqs, {runRopeGradFreqs});
}

} // namespace stringrt::ops
