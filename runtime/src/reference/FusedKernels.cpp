// Reference kernels of the hoisted and fused ops (FusedKernels.h):
// RoPE-prologue attention (the rope tables, rope_apply, the Cayley weight
// and the dense-layer epilogues are in the op library).
#include "stringrt/reference/FusedKernels.h"

#include "KernelChecks.h"

namespace stringrt::ref {

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
