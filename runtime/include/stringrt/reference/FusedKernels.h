// Reference CPU kernels of the ops that pe-hoist, pe-fuse-attention and
// pe-fuse-epilogue introduce (PEFusedOps.td, docs/dialect.md,
// docs/autodiff.md). Conventions of stringrt/ops/PositionOps.h /
// LayerKernels.h: T is float or double, everything computed in double and
// each result rounded once to T (the fused attention kernels compose the reference
// rope_apply and attention kernels, rounding between them as the unfused
// ops do); outputs fully overwritten, never aliasing inputs; any shape
// violation throws stringrt::Error naming the kernel and operand.
#pragma once

#include "stringrt/ops/FusedOps.h" // the fused ops moved to the op library
#include "stringrt/reference/LayerKernels.h"
#include "stringrt/reference/Tensor.h"

#include <cstdint>

namespace stringrt::ref {

// attention(rope_apply(q, table), rope_apply(k, table), v); mask None or
// Causal; `lse` as attention's.
template <typename T>
void ropeAttention(TensorRef<const T> q, TensorRef<const T> k, TensorRef<const T> v,
                   TensorRef<const T> table, int64_t heads, double scale, AttentionMask mask,
                   TensorRef<T> y, OptionalOutput<T> lse = std::nullopt);

// dqr, dkr, dv = attention_grad(rope_apply(q), rope_apply(k), v, dy);
// dq = rope_apply(dqr, inverse), dk = rope_apply(dkr, inverse).
template <typename T>
void ropeAttentionGrad(TensorRef<const T> q, TensorRef<const T> k, TensorRef<const T> v,
                       TensorRef<const T> table, TensorRef<const T> dy, int64_t heads,
                       double scale, AttentionMask mask, TensorRef<T> dq, TensorRef<T> dk,
                       TensorRef<T> dv);

} // namespace stringrt::ref
