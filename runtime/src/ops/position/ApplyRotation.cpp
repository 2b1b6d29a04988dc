// pe.apply_rotation and its gradient pe.apply_rotation_grad
// (PEPositionOps.td: one Dh x Dh rotation per token, R[t], applied to each
// head's slice of x [B, T, heads * Dh]; what pe-factor-generators leaves of
// relative attention: R(p_t) q_t and R(p_t) k_t, then plain attention): the
// shape contracts, the reference kernels, the fast kernels and the
// registration (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/PositionOps.h. stringc generates no CPU kernel for these ops
// (nor a CUDA one: `--device cuda` refuses them).
//
// The reference sums in double, element by element; here in float with
// unit-stride rows (vectorised over the output index):
//   y_h  = sum_n x_h[n] R^T[n, :]     (R^T built once per call, n ascending)
//   dx_h = sum_m dy_h[m] R[m, :]      (m ascending)
//   dR[t] = sum_b sum_h dy_h x_h^T     (b, then h ascending, in float)
// threaded over the tokens, each token's rows and dR[t] written by one
// chunk: the same bits on any thread count.
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/PositionOps.h"

#include <algorithm>
#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkRank;
using ref::checkShape;
using ref::TensorRef;

// Sizes of apply_rotation: x [batch, tokens, heads * dh], rotations [tokens, dh, dh].
struct RotationShape {
  int64_t batch = 0, tokens = 0, width = 0, heads = 0, dh = 0;
};

// Both ops: x [B, T, D], 'heads' > 0 dividing D, rotations [T, Dh, Dh] with
// Dh = D / heads.
template <typename T>
RotationShape rotationOperands(const std::string &op, const TensorRef<const T> &x,
                               const TensorRef<const T> &rotations, int64_t heads) {
  checkRank((op + ": 'x'").c_str(), x, 3);
  RotationShape s;
  s.batch = x.dim(0);
  s.tokens = x.dim(1);
  s.width = x.dim(2);
  s.heads = heads;
  check(heads > 0 && s.width % heads == 0, op.c_str(),
        "'heads' (" + std::to_string(heads) + ") must be > 0 and divide the width " +
            std::to_string(s.width));
  s.dh = s.width / heads;
  checkShape((op + ": 'rotations'").c_str(), rotations, {s.tokens, s.dh, s.dh});
  return s;
}

// apply_rotation: x, rotations, heads as above, the result the shape of x.
template <typename T>
RotationShape applyRotationContract(const TensorRef<const T> &x,
                                    const TensorRef<const T> &rotations, int64_t heads,
                                    const TensorRef<T> &y) {
  const RotationShape s = rotationOperands<T>("apply_rotation", x, rotations, heads);
  checkShape("apply_rotation: result", y, x.shape);
  return s;
}

// apply_rotation_grad: x, rotations, heads as above, dy and dx the shape of
// x, drotations that of rotations.
template <typename T>
RotationShape applyRotationGradContract(const TensorRef<const T> &x,
                                        const TensorRef<const T> &rotations,
                                        const TensorRef<const T> &dy, int64_t heads,
                                        const TensorRef<T> &dx, const TensorRef<T> &drotations) {
  const RotationShape s = rotationOperands<T>("apply_rotation_grad", x, rotations, heads);
  checkShape("apply_rotation_grad: 'dy'", dy, x.shape);
  checkShape("apply_rotation_grad: result 'dx'", dx, x.shape);
  checkShape("apply_rotation_grad: result 'drotations'", drotations, rotations.shape);
  return s;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: sums in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// y[b, t, h*Dh + m] = sum_n R[t, m, n] x[b, t, h*Dh + n].
template <typename T>
void applyRotation(TensorRef<const T> x, TensorRef<const T> rotations, int64_t heads,
                   TensorRef<T> y) {
  const ops::RotationShape s = ops::applyRotationContract<T>(x, rotations, heads, y);
  const int64_t dh = s.dh;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.tokens; ++t)
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t at = (b * s.tokens + t) * s.width + h * dh;
        for (int64_t m = 0; m < dh; ++m) {
          double sum = 0.0;
          for (int64_t n = 0; n < dh; ++n)
            sum += static_cast<double>(rotations[(t * dh + m) * dh + n]) *
                   static_cast<double>(x[at + n]);
          y[at + m] = static_cast<T>(sum);
        }
      }
}

// dx_h = R[t]^T dy_h;  dR[t, m, n] = sum_{b,h} dy_h[m] x_h[n].
template <typename T>
void applyRotationGrad(TensorRef<const T> x, TensorRef<const T> rotations,
                       TensorRef<const T> dy, int64_t heads, TensorRef<T> dx,
                       TensorRef<T> drotations) {
  const ops::RotationShape s =
      ops::applyRotationGradContract<T>(x, rotations, dy, heads, dx, drotations);
  const int64_t dh = s.dh;
  std::vector<double> dr(static_cast<size_t>(rotations.numel()), 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.tokens; ++t)
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t at = (b * s.tokens + t) * s.width + h * dh;
        for (int64_t n = 0; n < dh; ++n) {
          double sum = 0.0;
          for (int64_t m = 0; m < dh; ++m)
            sum += static_cast<double>(rotations[(t * dh + m) * dh + n]) *
                   static_cast<double>(dy[at + m]);
          dx[at + n] = static_cast<T>(sum);
        }
        for (int64_t m = 0; m < dh; ++m)
          for (int64_t n = 0; n < dh; ++n)
            dr[(t * dh + m) * dh + n] +=
                static_cast<double>(dy[at + m]) * static_cast<double>(x[at + n]);
      }
  for (int64_t i = 0; i < rotations.numel(); ++i)
    drotations[i] = static_cast<T>(dr[i]);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void applyRotation<T>(TensorRef<const T>, TensorRef<const T>, int64_t, TensorRef<T>);   \
  template void applyRotationGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,   \
                                     int64_t, TensorRef<T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: float rows at unit stride, threaded over the tokens
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using namespace util;

namespace {

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
  const ops::RotationShape s = ops::applyRotationContract<float>(x, rotations, heads, y);
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
  const ops::RotationShape s =
      ops::applyRotationGradContract<float>(x, rotations, dy, heads, dx, drotations);
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

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runApplyRotation(const OpContext &c) {
  ref::applyRotation<float>(c.in(0), c.in(1), c.op().getInt("heads"), c.out(0));
}

void runFastApplyRotation(const OpContext &c) {
  cpu::applyRotation(c.in(0), c.in(1), c.op().getInt("heads"), c.out(0));
}

void runApplyRotationGrad(const OpContext &c) {
  ref::applyRotationGrad<float>(c.in(0), c.in(1), c.in(2), c.op().getInt("heads"), c.out(0),
                                c.out(1));
}

void runFastApplyRotationGrad(const OpContext &c) {
  cpu::applyRotationGrad(c.in(0), c.in(1), c.in(2), c.op().getInt("heads"), c.out(0),
                         c.out(1));
}

} // namespace

template <> void registerOps<OpCode::ApplyRotation>(OpRegistry &registry) {
  registry.add(OpCode::ApplyRotation, {runApplyRotation, nullptr, runFastApplyRotation});
  registry.add(OpCode::ApplyRotationGrad,
               {runApplyRotationGrad, nullptr, runFastApplyRotationGrad});
}

} // namespace stringrt::ops
