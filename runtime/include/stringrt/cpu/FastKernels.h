// Fast float32 CPU kernels of the ops that dominate a ViT / GPT training
// step: multi-threaded on the pool of ThreadPool.h, GEMMs through OpenBLAS
// when the runtime is built with it (a blocked C++ GEMM otherwise).
//
// Each kernel has the signature, shape checks and semantics of the reference
// kernel of the same name in stringrt/reference/{LayerKernels.h,
// PositionKernels.h} (the oracle; read the math there), for float only.
// Differences are numerical only: sums accumulate in float (GEMM, softmax,
// normalisation statistics) and softmax exponentials use a ~2-ulp
// polynomial, so results match the reference to ~1e-5 relative rather than
// bit for bit. Every thread count gives the same results: no kernel splits
// a sum across threads in a thread-dependent way (OpenBLAS, when used, may
// differ in the last bits between thread counts).
//
// Conventions (those of the reference kernels): inputs TensorRef<const
// float>, outputs TensorRef<float> whose shape the caller sets and the kernel
// checks, every output fully overwritten, outputs never aliasing inputs; any
// shape, attribute or id/label violation throws stringrt::Error naming the
// kernel and operand, before any output is written.
#pragma once

#include "stringrt/reference/LayerKernels.h"
#include "stringrt/reference/PositionKernels.h"

#include <cstdint>

namespace stringrt::cpu {

using ref::AttentionMask;
using ref::OptionalInput;
using ref::OptionalOutput;
using ref::TensorRef;

//===----------------------------------------------------------------------===//
// Attention (AttentionKernels.cpp)
//===----------------------------------------------------------------------===//

// Threaded over (batch, head). None / causal without rel: S = scale Q K^T
// and Y = P V as per-head GEMMs, a max-subtracted softmax in between. Skip:
// each query sees at most one key, whose softmax weight is exactly 1, so
// y_i = v_{i - (skipBase + h)} (0 when that is negative) - a gather, rel or
// not. None / causal with rel: q_i^T R_ij k_j as small GEMMs over the
// batches and heads, R_ij shared, on the GEMMs' register tile
// (RelativeAttention.cpp).
// `lse` [B, heads, T], when given, gets each row's log-sum-exp (the score of
// the one key under Skip, -inf for a query without one).
void attention(TensorRef<const float> q, TensorRef<const float> k, TensorRef<const float> v,
               OptionalInput<float> rel, int64_t heads, double scale, AttentionMask mask,
               int64_t skipBase, TensorRef<float> y, OptionalOutput<float> lse = std::nullopt);

// Recomputes P per (batch, head) (cheaper here than reading the forward's
// lse: the scores are one GEMM), then dV = P^T dY, dP = dY V^T,
// dS = P (dP - rowsum(P dP)), dQ = scale dS K, dK = scale dS^T Q as GEMMs.
// Skip: dv_j = dy_{j + skipBase + h}, dq = dk = 0 (and drel = 0): a one-key
// softmax has zero gradient. None / causal with rel: three register-tiled
// passes (the rotated keys with the scores and dq, drel, dk;
// RelativeAttention.cpp).
void attentionGrad(TensorRef<const float> q, TensorRef<const float> k,
                   TensorRef<const float> v, TensorRef<const float> dy,
                   OptionalInput<float> rel, int64_t heads, double scale, AttentionMask mask,
                   int64_t skipBase, TensorRef<float> dq, TensorRef<float> dk,
                   TensorRef<float> dv, OptionalOutput<float> drel);

//===----------------------------------------------------------------------===//
// Cayley transform (CayleyKernels.cpp)
//===----------------------------------------------------------------------===//

// y = (I - S)(I + S)^-1 x per token (x [..., D], S [D, D], any S with I + S
// invertible). Once per call, in double: the LU of I + S (the reference's,
// same singularity error), M = (I + S)^-1, U = (I - S) M rounded to float;
// then one GEMM over the flattened leading dims, Y = X U^T.
void cayley(TensorRef<const float> x, TensorRef<const float> s, TensorRef<float> y);

// dx = U^T dy (the solution of (I + S)^T dx = (I - S)^T dy): DX = DY U, one
// GEMM. ds = -sum_tokens (dy + dx) z^T with z = M x, i.e.
// -(DY^T X + DX^T X) M^T: the token sum as float GEMMs per fixed block of
// tokens, the blocks added in order in double, then the d x d product with
// M^T in double.
void cayleyGrad(TensorRef<const float> x, TensorRef<const float> s, TensorRef<const float> dy,
                TensorRef<float> dx, TensorRef<float> ds);

//===----------------------------------------------------------------------===//
// Matrix functions of the encodings (MatrixFunctions.cpp): the reference's
// algorithms in double, vectorised d x d products, generator_exp's matrices
// spread over the pool (the same bits on any thread count)
//===----------------------------------------------------------------------===//

// W = U^T, U = (I - S)(I + S)^-1 = 2 (I + S)^-1 - I; the inverse by
// Gauss-Jordan with partial pivoting (a singular I + S throws as the
// reference does).
void cayleyWeight(TensorRef<const float> s, TensorRef<float> w);

// ds = -(M dw (I + U))^T = -2 (M dw M)^T, M = (I + S)^-1.
void cayleyWeightGrad(TensorRef<const float> s, TensorRef<const float> dw, TensorRef<float> ds);

// R[p] = exp(sum_k r[p, k] L_k): scaling and squaring, degree-13 Pade.
void generatorExp(TensorRef<const float> r, TensorRef<const float> generators,
                  TensorRef<float> rotations);

// dL_k = sum_p r[p, k] dA(p), dA(p) the top-right block of
// exp([[A^T, dR], [0, A^T]]) computed on the block-triangular pairs.
void generatorExpGrad(TensorRef<const float> r, TensorRef<const float> generators,
                      TensorRef<const float> dy, TensorRef<float> dgenerators);

//===----------------------------------------------------------------------===//
// Per-token rotations (TokenRotation.cpp)
//===----------------------------------------------------------------------===//

// y[b, t, head h] = R[t] x[b, t, head h] (rotations [T, Dh, Dh]), in float.
void applyRotation(TensorRef<const float> x, TensorRef<const float> rotations, int64_t heads,
                   TensorRef<float> y);

// dx = R[t]^T dy per head slice; dR[t] = sum over batch and heads of dy x^T
// (batch, then heads ascending; threaded over tokens).
void applyRotationGrad(TensorRef<const float> x, TensorRef<const float> rotations,
                       TensorRef<const float> dy, int64_t heads, TensorRef<float> dx,
                       TensorRef<float> drotations);

} // namespace stringrt::cpu
