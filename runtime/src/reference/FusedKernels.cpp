// Reference kernels of the hoisted and fused ops (FusedKernels.h): rope
// tables' application and RoPE-prologue attention (the rope tables, the
// Cayley weight and the dense-layer epilogues are in the op library).
#include "stringrt/reference/FusedKernels.h"

#include "KernelChecks.h"
#include "PositionUtil.h"

#include <vector>

namespace stringrt::ref {

using position::leadingCount;

template <typename T>
void ropeApply(TensorRef<const T> x, TensorRef<const T> table, bool inverse, TensorRef<T> y) {
  const int64_t lead = checks::ropeApply(x, table, y);
  const int64_t tokens = x.dim(-2), width = x.dim(-1), pairs = width / 2;
  const double sign = inverse ? -1.0 : 1.0;
  for (int64_t l = 0; l < lead; ++l)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < pairs; ++j) {
        const double c = static_cast<double>(table[(t * pairs + j) * 2]);
        const double s = sign * static_cast<double>(table[(t * pairs + j) * 2 + 1]);
        const int64_t at = (l * tokens + t) * width + 2 * j;
        const double x0 = static_cast<double>(x[at]), x1 = static_cast<double>(x[at + 1]);
        y[at] = static_cast<T>(x0 * c - x1 * s);
        y[at + 1] = static_cast<T>(x0 * s + x1 * c);
      }
}

template <typename T>
void ropeApplyGradTable(TensorRef<const T> x, TensorRef<const T> dy, bool inverse,
                        TensorRef<T> dtable) {
  checks::ropeApplyGradTable(x, dy, dtable);
  const int64_t tokens = x.dim(-2), width = x.dim(-1), pairs = width / 2;
  const int64_t lead = leadingCount(x.shape, 2);
  const double sign = inverse ? -1.0 : 1.0;
  std::vector<double> acc(static_cast<size_t>(tokens * pairs * 2), 0.0);
  for (int64_t l = 0; l < lead; ++l)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < pairs; ++j) {
        const int64_t at = (l * tokens + t) * width + 2 * j;
        const double x0 = static_cast<double>(x[at]), x1 = static_cast<double>(x[at + 1]);
        const double d0 = static_cast<double>(dy[at]), d1 = static_cast<double>(dy[at + 1]);
        acc[(t * pairs + j) * 2] += d0 * x0 + d1 * x1;
        acc[(t * pairs + j) * 2 + 1] += sign * (d1 * x0 - d0 * x1);
      }
  for (int64_t i = 0; i < tokens * pairs * 2; ++i)
    dtable[i] = static_cast<T>(acc[i]);
}

template <typename T>
void ropeAttention(TensorRef<const T> q, TensorRef<const T> k, TensorRef<const T> v,
                   TensorRef<const T> table, int64_t heads, double scale, AttentionMask mask,
                   TensorRef<T> y, OptionalOutput<T> lse) {
  checks::ropeAttention(q, k, v, table, heads, mask, y);
  Tensor<T> qr = Tensor<T>::zeros(q.shape), kr = Tensor<T>::zeros(k.shape);
  ropeApply(q, table, false, qr.ref());
  ropeApply(k, table, false, kr.ref());
  attention<T>(qr.cref(), kr.cref(), v, std::nullopt, heads, scale, mask, 0, y, lse);
}

template <typename T>
void ropeAttentionGrad(TensorRef<const T> q, TensorRef<const T> k, TensorRef<const T> v,
                       TensorRef<const T> table, TensorRef<const T> dy, int64_t heads,
                       double scale, AttentionMask mask, TensorRef<T> dq, TensorRef<T> dk,
                       TensorRef<T> dv) {
  checks::ropeAttentionGrad(q, k, v, table, dy, heads, mask, dq, dk, dv);
  Tensor<T> qr = Tensor<T>::zeros(q.shape), kr = Tensor<T>::zeros(k.shape);
  ropeApply(q, table, false, qr.ref());
  ropeApply(k, table, false, kr.ref());
  Tensor<T> dqr = Tensor<T>::zeros(q.shape), dkr = Tensor<T>::zeros(k.shape);
  attentionGrad<T>(qr.cref(), kr.cref(), v, dy, std::nullopt, heads, scale, mask, 0, dqr.ref(),
                   dkr.ref(), dv, std::nullopt);
  ropeApply(dqr.cref(), table, true, dq);
  ropeApply(dkr.cref(), table, true, dk);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void ropeApply<T>(TensorRef<const T>, TensorRef<const T>, bool, TensorRef<T>);          \
  template void ropeApplyGradTable<T>(TensorRef<const T>, TensorRef<const T>, bool, TensorRef<T>); \
  template void ropeAttention<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,       \
                                 TensorRef<const T>, int64_t, double, AttentionMask,               \
                                 TensorRef<T>, OptionalOutput<T>);                                 \
  template void ropeAttentionGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,   \
                                     TensorRef<const T>, TensorRef<const T>, int64_t, double,      \
                                     AttentionMask, TensorRef<T>, TensorRef<T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
