// The kernels of the op library's fused family (runtime/src/ops/fused/,
// PEFusedOps.td: the ops of the fusion passes; docs/passes.md), for the
// tests and the kernels that call them: each op's reference kernel
// (namespace ref: T is float or double, sums in double, each result rounded
// once to T, the bits of the ops it fuses) and its fast kernel (namespace
// cpu: float, multi-threaded on ThreadPool.h), with the conventions of
// stringrt/ops/LayerOps.h. The ops that are compositions of library ops
// (linear_gelu, rope_attention, rope_attention_grad) have no reference
// kernel of their own: their composition is a row of
// runtime/src/ops/Compositions.cpp, which one generic kernel runs. A fused
// op that is a layer op's gradient with a prior added is in that op's
// file, declared in LayerOps.h.
#pragma once

#include "stringrt/ops/LayerOps.h" // AttentionMask
#include "stringrt/reference/Tensor.h"

#include <cstdint>

namespace stringrt::ref {

//===----------------------------------------------------------------------===//
// rope_table, rope_table_grad (ops/fused/RopeTable.cpp)
//===----------------------------------------------------------------------===//

// table[t, j] = (cos theta_j(t), sin theta_j(t)), theta_j(t) = sum_a pos[t, a] freqs[j, a].
// pos [T, A], freqs [P, A] -> table [T, P, 2]
template <typename T>
void ropeTable(TensorRef<const T> pos, TensorRef<const T> freqs, TensorRef<T> table);

// dtheta_j(t) = -sin theta dy[t, j, 0] + cos theta dy[t, j, 1];
// dfreqs[j, a] = sum_t pos[t, a] dtheta_j(t).   -> dfreqs [P, A]
template <typename T>
void ropeTableGrad(TensorRef<const T> pos, TensorRef<const T> freqs, TensorRef<const T> dy,
                   TensorRef<T> dfreqs);

//===----------------------------------------------------------------------===//
// rope_apply, rope_apply_grad_table (ops/fused/RopeApply.cpp)
//===----------------------------------------------------------------------===//

// Pair j of token t times [[c, -s], [s, c]] (its transpose when inverse),
// (c, s) = table[t, j]. x [..., T, D], table [T, D/2, 2] -> y (shape of x).
template <typename T>
void ropeApply(TensorRef<const T> x, TensorRef<const T> table, bool inverse, TensorRef<T> y);

// dtable[t, j, 0] = sum_lead (dy0 x0 + dy1 x1),
// dtable[t, j, 1] = sum_lead (dy1 x0 - dy0 x1)   (negated when inverse).
// x, dy [..., T, D] -> dtable [T, D/2, 2]
template <typename T>
void ropeApplyGradTable(TensorRef<const T> x, TensorRef<const T> dy, bool inverse,
                        TensorRef<T> dtable);

//===----------------------------------------------------------------------===//
// cayley_weight, cayley_weight_grad (ops/fused/CayleyWeight.cpp)
//===----------------------------------------------------------------------===//

// w = U^T, U = (I - S)(I + S)^-1 (LU with partial pivoting; a singular
// I + S throws). s [D, D] -> w [D, D]
template <typename T> void cayleyWeight(TensorRef<const T> s, TensorRef<T> w);

// ds = -(M dw (I + U))^T, M = (I + S)^-1.   s, dw [D, D] -> ds [D, D]
template <typename T>
void cayleyWeightGrad(TensorRef<const T> s, TensorRef<const T> dw, TensorRef<T> ds);

//===----------------------------------------------------------------------===//
// linear_residual (ops/fused/LinearResidual.cpp)
//===----------------------------------------------------------------------===//

// y = residual + x w (+ b), summed in double and rounded once: not the bits
// of its composition (ops/Compositions.cpp: linear, then add, rounding
// twice), which the tests compare it with.
// residual [..., O], x [..., I], w [I, O], b? [O] -> y [..., O]
template <typename T>
void linearResidual(TensorRef<const T> residual, TensorRef<const T> x, TensorRef<const T> w,
                    OptionalInput<T> b, TensorRef<T> y);

} // namespace stringrt::ref

namespace stringrt::cpu {

using ref::AttentionMask;
using ref::OptionalInput;
using ref::OptionalOutput;
using ref::TensorRef;

// rope_apply: rows (batch, token) in parallel, each turned by its token's
// table row.
void ropeApply(TensorRef<const float> x, TensorRef<const float> table, bool inverse,
               TensorRef<float> y);

// rope_apply_grad_table: parallel over tokens; each task owns dtable[t] and
// sums the leading (batch) index in order, in double.
void ropeApplyGradTable(TensorRef<const float> x, TensorRef<const float> dy, bool inverse,
                        TensorRef<float> dtable);

// rope_attention: threaded over (batch, head) as cpu::attention; each task
// rotates its head's q and k tiles into thread-local [T, Dh] scratch as it
// loads them, then S = scale Qr Kr^T, the softmax and Y = P V as per-head
// GEMMs. The rotated tiles and P live only in that scratch (L1/L2-sized
// for the models here), never in a model-sized buffer. `lse` as
// cpu::attention's.
void ropeAttention(TensorRef<const float> q, TensorRef<const float> k, TensorRef<const float> v,
                   TensorRef<const float> table, int64_t heads, double scale, AttentionMask mask,
                   TensorRef<float> y, OptionalOutput<float> lse = std::nullopt);

// rope_attention_grad: recomputes the rotated tiles and P per (batch, head)
// (nothing is kept from the forward), then dV = P^T dY, dS, dQr = scale dS
// Kr and dKr = scale dS^T Qr into scratch, and writes dq, dk rotated back
// (R^T) straight into the outputs.
void ropeAttentionGrad(TensorRef<const float> q, TensorRef<const float> k,
                       TensorRef<const float> v, TensorRef<const float> table,
                       TensorRef<const float> dy, int64_t heads, double scale,
                       AttentionMask mask, TensorRef<float> dq, TensorRef<float> dk,
                       TensorRef<float> dv);

// cayley_weight: W = U^T, U = (I - S)(I + S)^-1 = 2 (I + S)^-1 - I, in
// double; the inverse by Gauss-Jordan with partial pivoting (a singular
// I + S throws as the reference does). Single-threaded.
void cayleyWeight(TensorRef<const float> s, TensorRef<float> w);

// cayley_weight_grad: ds = -(M dw (I + U))^T = -2 (M dw M)^T, M = (I + S)^-1,
// in double.
void cayleyWeightGrad(TensorRef<const float> s, TensorRef<const float> dw, TensorRef<float> ds);

// pre = X W + b as cpu::linear (one GEMM, the bias as its accumulator),
// then y = cpu::gelu(pre): one op and one result buffer less in the
// program, the same arithmetic (docs/passes.md, pe-fuse-epilogue).
void linearGelu(TensorRef<const float> x, TensorRef<const float> w, OptionalInput<float> b,
                bool approximate, TensorRef<float> y, TensorRef<float> pre);

// y = residual + (b + X W): the bits of cpu::linear followed by the residual
// add. On AVX2 CPUs one GEMM whose tiles add the bias and the residual as
// they are stored (the linear's result never exists); elsewhere
// cpu::linear, then the add in place. y must not overlap residual.
void linearResidual(TensorRef<const float> residual, TensorRef<const float> x,
                    TensorRef<const float> w, OptionalInput<float> b, TensorRef<float> y);

} // namespace stringrt::cpu
