// Fast float32 CPU kernels of the ops that pe-hoist, pe-fuse-attention and
// pe-fuse-epilogue introduce. Each has the signature, shape checks and
// semantics of the reference kernel of the same name in
// stringrt/reference/FusedKernels.h (read the math there); the conventions
// are those of FastKernels.h (multi-threaded on the pool, deterministic for
// any thread count but for OpenBLAS's last bits, outputs fully overwritten).
// The rope tables (no fast kernel: [T, D/2] data once a step), rope_apply's
// and cayley_weight's fast kernels are in the op library
// (stringrt/ops/FusedOps.h).
#pragma once

#include "stringrt/cpu/FastKernels.h"
#include "stringrt/reference/FusedKernels.h"

namespace stringrt::cpu {

// Threaded over (batch, head) as cpu::attention: each task rotates its
// head's q and k tiles into thread-local [T, Dh] scratch as it loads them,
// then S = scale Qr Kr^T, the softmax and Y = P V as per-head GEMMs. The
// rotated tiles and P live only in that scratch (L1/L2-sized for the
// models here), never in a model-sized buffer. `lse` as cpu::attention's.
void ropeAttention(TensorRef<const float> q, TensorRef<const float> k, TensorRef<const float> v,
                   TensorRef<const float> table, int64_t heads, double scale, AttentionMask mask,
                   TensorRef<float> y, OptionalOutput<float> lse = std::nullopt);

// Recomputes the rotated tiles and P per (batch, head) (nothing is kept
// from the forward), then dV = P^T dY, dS, dQr = scale dS Kr and
// dKr = scale dS^T Qr into scratch, and writes dq, dk rotated back
// (R^T) straight into the outputs.
void ropeAttentionGrad(TensorRef<const float> q, TensorRef<const float> k,
                       TensorRef<const float> v, TensorRef<const float> table,
                       TensorRef<const float> dy, int64_t heads, double scale,
                       AttentionMask mask, TensorRef<float> dq, TensorRef<float> dk,
                       TensorRef<float> dv);

} // namespace stringrt::cpu
