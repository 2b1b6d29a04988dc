// Fast rope_apply and its table gradient: the table is precomputed once per
// step (pe.rope_table, hoisted by pe-hoist), so unlike cpu::rope nothing
// here evaluates a cos or a sin.
#include "stringrt/cpu/FusedKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "KernelUtil.h"
#include "RopeRow.h"

#include <string>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

struct ApplyShape {
  int64_t lead = 1, tokens = 0, width = 0, pairs = 0;
};

// The checks (and messages) of the reference kernels.
ApplyShape checkApply(const std::string &op, const TensorRef<const float> &x) {
  check(x.rank() >= 2, op.c_str(), "'x' must be [..., T, D], got " + ref::shapeToString(x.shape));
  ApplyShape s;
  for (int64_t i = 0; i + 2 < x.rank(); ++i)
    s.lead *= x.shape[static_cast<size_t>(i)];
  s.tokens = x.dim(-2);
  s.width = x.dim(-1);
  s.pairs = s.width / 2;
  check(s.width % 2 == 0, op.c_str(),
        "the last dimension of 'x' must be even (interleaved pairs), got " +
            std::to_string(s.width));
  return s;
}

} // namespace

void ropeApply(TensorRef<const float> x, TensorRef<const float> table, bool inverse,
               TensorRef<float> y) {
  const ApplyShape s = checkApply("rope_apply", x);
  checkShape("rope_apply: 'table'", table, {s.tokens, s.pairs, 2});
  checkShape("rope_apply: result", y, x.shape);
  const float sign = inverse ? -1.0f : 1.0f;
  parallelFor(0, s.lead * s.tokens, rowGrain(s.width), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      rotateRow(x.data + r * s.width, table.data + 2 * (r % s.tokens) * s.pairs, s.pairs, sign,
                y.data + r * s.width);
  });
}

void ropeApplyGradTable(TensorRef<const float> x, TensorRef<const float> dy, bool inverse,
                        TensorRef<float> dtable) {
  const ApplyShape s = checkApply("rope_apply_grad_table", x);
  checkShape("rope_apply_grad_table: 'dy'", dy, x.shape);
  checkShape("rope_apply_grad_table: result", dtable, {s.tokens, s.pairs, 2});
  const double sign = inverse ? -1.0 : 1.0;
  parallelFor(0, s.tokens, 1, [&](int64_t t0, int64_t t1) {
    std::vector<double> acc(static_cast<size_t>(2 * s.pairs));
    for (int64_t t = t0; t < t1; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t l = 0; l < s.lead; ++l) {
        const float *xr = x.data + (l * s.tokens + t) * s.width;
        const float *dr = dy.data + (l * s.tokens + t) * s.width;
        for (int64_t j = 0; j < s.pairs; ++j) {
          const double x0 = xr[2 * j], x1 = xr[2 * j + 1], d0 = dr[2 * j], d1 = dr[2 * j + 1];
          acc[2 * j] += d0 * x0 + d1 * x1;
          acc[2 * j + 1] += sign * (d1 * x0 - d0 * x1);
        }
      }
      for (int64_t i = 0; i < 2 * s.pairs; ++i)
        dtable.data[t * 2 * s.pairs + i] = static_cast<float>(acc[i]);
    }
  });
}

} // namespace stringrt::cpu
