// Reference kernels of the per-token rotation: apply_rotation,
// apply_rotation_grad.
#include "stringrt/reference/PositionKernels.h"

#include <string>
#include <vector>

namespace stringrt::ref {
namespace {

// Sizes of apply_rotation: x [batch, tokens, heads * dh], rotations [tokens, dh, dh].
struct RotationShape {
  int64_t batch = 0, tokens = 0, width = 0, heads = 0, dh = 0;
};

template <typename T>
RotationShape checkRotation(const std::string &op, TensorRef<const T> x,
                            TensorRef<const T> rotations, int64_t heads) {
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

} // namespace

// y[b, t, h*Dh + m] = sum_n R[t, m, n] x[b, t, h*Dh + n].
template <typename T>
void applyRotation(TensorRef<const T> x, TensorRef<const T> rotations, int64_t heads,
                   TensorRef<T> y) {
  const RotationShape s = checkRotation<T>("apply_rotation", x, rotations, heads);
  checkShape("apply_rotation: result", y, x.shape);
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
  const RotationShape s = checkRotation<T>("apply_rotation_grad", x, rotations, heads);
  checkShape("apply_rotation_grad: 'dy'", dy, x.shape);
  checkShape("apply_rotation_grad: result 'dx'", dx, x.shape);
  checkShape("apply_rotation_grad: result 'drotations'", drotations, rotations.shape);
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
