// Fast apply_rotation and its gradient: one Dh x Dh rotation per token,
// applied to each head's slice (what pe-factor-generators leaves of relative
// attention: R(p_t) q_t and R(p_t) k_t, then plain attention).
//
// The reference sums in double, element by element; here in float with
// unit-stride rows (vectorised over the output index):
//   y_h  = sum_n x_h[n] R^T[n, :]     (R^T built once per call, n ascending)
//   dx_h = sum_m dy_h[m] R[m, :]      (m ascending)
//   dR[t] = sum_b sum_h dy_h x_h^T     (b, then h ascending, in float)
// threaded over the tokens, each token's rows and dR[t] written by one
// chunk: the same bits on any thread count.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "KernelUtil.h"

#include <algorithm>
#include <string>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

struct Rotation {
  int64_t batch, tokens, width, heads, dh;
};

// The reference's checks: x [B, T, D], rotations [T, Dh, Dh], Dh = D / heads.
Rotation checkRotation(const std::string &op, const TensorRef<const float> &x,
                       const TensorRef<const float> &rotations, int64_t heads) {
  checkRank((op + ": 'x'").c_str(), x, 3);
  Rotation s{x.dim(0), x.dim(1), x.dim(2), heads, 0};
  check(heads > 0 && s.width % heads == 0, op.c_str(),
        "'heads' (" + std::to_string(heads) + ") must be > 0 and divide the width " +
            std::to_string(s.width));
  s.dh = s.width / heads;
  checkShape((op + ": 'rotations'").c_str(), rotations, {s.tokens, s.dh, s.dh});
  return s;
}

// out = sum_k a[k] rows[k, :] (k ascending), rows [n, n] row-major.
inline void combineRows(const float *__restrict a, const float *__restrict rows, int64_t n,
                        float *__restrict out) {
  std::fill(out, out + n, 0.0f);
  for (int64_t k = 0; k < n; ++k) {
    const float ak = a[k];
    const float *row = rows + k * n;
    for (int64_t j = 0; j < n; ++j)
      out[j] += ak * row[j];
  }
}

} // namespace

void applyRotation(TensorRef<const float> x, TensorRef<const float> rotations, int64_t heads,
                   TensorRef<float> y) {
  const Rotation s = checkRotation("apply_rotation", x, rotations, heads);
  checkShape("apply_rotation: result", y, x.shape);
  const int64_t dh = s.dh, dd = dh * dh;
  std::vector<float> rt(static_cast<size_t>(s.tokens * dd)); // R[t]^T
  for (int64_t t = 0; t < s.tokens; ++t)
    for (int64_t m = 0; m < dh; ++m)
      for (int64_t n = 0; n < dh; ++n)
        rt[t * dd + n * dh + m] = rotations.data[t * dd + m * dh + n];
  const int64_t rows = s.batch * s.tokens;
  parallelFor(0, rows, rowGrain(s.width), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *rtT = rt.data() + (r % s.tokens) * dd;
      for (int64_t h = 0; h < s.heads; ++h)
        combineRows(x.data + r * s.width + h * dh, rtT, dh, y.data + r * s.width + h * dh);
    }
  });
}

void applyRotationGrad(TensorRef<const float> x, TensorRef<const float> rotations,
                       TensorRef<const float> dy, int64_t heads, TensorRef<float> dx,
                       TensorRef<float> drotations) {
  const Rotation s = checkRotation("apply_rotation_grad", x, rotations, heads);
  checkShape("apply_rotation_grad: 'dy'", dy, x.shape);
  checkShape("apply_rotation_grad: result 'dx'", dx, x.shape);
  checkShape("apply_rotation_grad: result 'drotations'", drotations, rotations.shape);
  const int64_t dh = s.dh, dd = dh * dh;
  parallelFor(0, s.tokens, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float *R = rotations.data + t * dd;
      float *dR = drotations.data + t * dd;
      std::fill(dR, dR + dd, 0.0f);
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t h = 0; h < s.heads; ++h) {
          const int64_t at = (b * s.tokens + t) * s.width + h * dh;
          const float *g = dy.data + at, *xv = x.data + at;
          combineRows(g, R, dh, dx.data + at);
          for (int64_t m = 0; m < dh; ++m) {
            const float gm = g[m];
            float *row = dR + m * dh;
            for (int64_t n = 0; n < dh; ++n)
              row[n] += gm * xv[n];
          }
        }
    }
  });
}

} // namespace stringrt::cpu
