// Fast rotary embedding (rope) and its x-gradient.
//
// The angles theta_j(t) = pos[t] . freqs[j] depend on the token only, not on
// the leading (batch) index, so cos and sin are computed once per call into a
// [T, D/2] table - in double, as the reference does, then rounded - and the
// rotation itself is a light float pass over the rows. Nothing is cached
// across calls.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "KernelUtil.h"

#include <cmath>
#include <string>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

// x [lead..., tokens, width], pos [tokens, axes], freqs [width / 2, axes].
struct RotaryShape {
  int64_t lead = 1, tokens = 0, width = 0, pairs = 0, axes = 0;
};

// The checks (and messages) of the reference rope.
RotaryShape checkRope(const std::string &op, const TensorRef<const float> &x,
                      const TensorRef<const float> &pos, const TensorRef<const float> &freqs,
                      const TensorRef<float> &y) {
  check(x.rank() >= 2, op.c_str(), "'x' must be [..., T, D], got shape " + ref::shapeToString(x.shape));
  checkRank((op + ": 'pos'").c_str(), pos, 2);
  RotaryShape s;
  for (int64_t i = 0; i + 2 < x.rank(); ++i)
    s.lead *= x.shape[static_cast<size_t>(i)];
  s.tokens = x.dim(-2);
  s.width = x.dim(-1);
  s.pairs = s.width / 2;
  s.axes = pos.dim(1);
  check(s.width % 2 == 0, op.c_str(),
        "the last dimension of 'x' must be even (interleaved pairs), got " +
            std::to_string(s.width));
  checkShape((op + ": 'pos'").c_str(), pos, {s.tokens, s.axes});
  checkShape((op + ": 'freqs'").c_str(), freqs, {s.pairs, s.axes});
  checkShape((op + ": result").c_str(), y, x.shape);
  return s;
}

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
  const RotaryShape s = checkRope("rope", x, pos, freqs, y);
  rotatePairs(s, x.data, pos.data, freqs.data, 1.0, y.data);
}

void ropeGradInput(TensorRef<const float> dy, TensorRef<const float> pos,
                   TensorRef<const float> freqs, TensorRef<float> dx) {
  const RotaryShape s = checkRope("rope_grad_input", dy, pos, freqs, dx);
  rotatePairs(s, dy.data, pos.data, freqs.data, -1.0, dx.data);
}

} // namespace stringrt::cpu
