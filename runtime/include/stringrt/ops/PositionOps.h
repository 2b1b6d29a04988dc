// The kernels of the op library's position family (runtime/src/ops/position/,
// PEPositionOps.td: the positional encodings' tables, rotations and their
// gradients; docs/dialect.md, docs/autodiff.md; the same math as
// tests/oracle/pe_torch.py and pe_torch_grad.py), the whole family, for the
// tests and the kernels that call them: each op's reference kernel
// (namespace ref) and its fast kernel where it has one (namespace cpu:
// float, multi-threaded on ThreadPool.h), with the reference kernel's
// contract, one set of messages for both.
//
// Conventions (those of LayerOps.h):
// - The reference kernels are plain loops, no BLAS: they are the oracle
//   that compiled CPU code and CUDA kernels are checked against, so clarity
//   comes first. T is float or double (explicitly instantiated for both).
//   Everything is computed in double (angles, sums, solves, matrix
//   exponentials) and each result is rounded once to T.
// - Inputs are TensorRef<const T>, outputs TensorRef<T> out-parameters whose
//   shape the caller sets and the kernel checks (the op's shape contract);
//   every output is fully overwritten. Outputs must not alias inputs.
//   Attributes are plain arguments.
// - Rotary pairs are interleaved: pair j is columns (2j, 2j+1), rotated by
//   R(theta) = [[cos, -sin], [sin, cos]]. Vectors are columns (y = M x).
// - Positions are [T, A]; the rotary kernels take x as [..., T, D] (the
//   dialect's [B, T, D]), every leading index sharing the positions.
// - Skew parameter k is the upper-triangle pair (i, j), i < j, in row-major
//   order (the order of torch.triu_indices(d, d, 1)).
// - Any shape or attribute violation throws stringrt::Error naming the
//   kernel and the operand; so does a singular I + S in the Cayley kernels.
#pragma once

#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <vector>

namespace stringrt::ref {

//===----------------------------------------------------------------------===//
// seq_positions (ops/position/SeqPositions.cpp; a constant table: no fast
// kernel)
//===----------------------------------------------------------------------===//

// pos[t, 0] = 0 for t < special, pos[special + n, 0] = n for n in [0, length).
// length > 0, special >= 0 -> pos [special + length, 1]
template <typename T> void seqPositions(int64_t length, int64_t special, TensorRef<T> pos);

//===----------------------------------------------------------------------===//
// grid_positions (ops/position/GridPositions.cpp; a constant table: no fast
// kernel)
//===----------------------------------------------------------------------===//

// pos[t] = (0, 0) for t < special; patch n of the row-major rows x cols grid at
// pos[special + n] = (n % cols, n / cols) (axis 0 = column x, axis 1 = row y).
// rows, cols > 0, special >= 0 -> pos [special + rows*cols, 2]
template <typename T>
void gridPositions(int64_t rows, int64_t cols, int64_t special, TensorRef<T> pos);

//===----------------------------------------------------------------------===//
// rope_freqs (ops/position/RopeFreqs.cpp; a constant table: no fast kernel)
//===----------------------------------------------------------------------===//

enum class FreqsKind { Seq, Axial };

// Pair j of a dim-wide vector split into `heads` heads of Dh = dim/heads
// columns is pair i = j % (Dh/2) of its head.
//   Seq:   freqs [dim/2, 1], freqs[j, 0] = base^(-2i/Dh)              (Dh even)
//   Axial: freqs [dim/2, 2], with n = Dh/4 (Dh % 4 == 0):
//          freqs[j] = (base^(-4i/Dh), 0) for i < n, (0, base^(-4(i-n)/Dh)) otherwise
// dim > 0, heads > 0 dividing dim, base > 0.
template <typename T>
void ropeFreqs(FreqsKind kind, int64_t dim, int64_t heads, double base, TensorRef<T> freqs);

//===----------------------------------------------------------------------===//
// sinusoidal (ops/position/Sinusoidal.cpp; a constant table: no fast kernel)
//===----------------------------------------------------------------------===//

// PE[p, 2i] = sin(p / base^(2i/dim)), PE[p, 2i+1] = cos(p / base^(2i/dim)).
// length > 0, dim > 0 even, base > 0 -> pe [length, dim]
template <typename T> void sinusoidal(int64_t length, int64_t dim, double base, TensorRef<T> pe);

//===----------------------------------------------------------------------===//
// relative_positions (ops/position/RelativePositions.cpp; no fast kernel)
//===----------------------------------------------------------------------===//

// r[i, j, a] = pos[j, a] - pos[i, a]   pos [T, A] -> r [T, T, A]
template <typename T> void relativePositions(TensorRef<const T> pos, TensorRef<T> r);

//===----------------------------------------------------------------------===//
// rope, rope_grad_freqs (ops/position/Rope.cpp)
//===----------------------------------------------------------------------===//

// theta_j(t) = sum_a pos[t, a] freqs[j, a];
//   y[.., t, 2j]   = x0 cos theta - x1 sin theta
//   y[.., t, 2j+1] = x0 sin theta + x1 cos theta    (x0, x1 = x[.., t, 2j], x[.., t, 2j+1])
// x [..., T, D] (D even), pos [T, A], freqs [D/2, A] -> y (shape of x). Any A
// (seq: A = 1; axial and mixed: A = 2; the math is the same).
// Its gradient in x is rope(dy, pos, -freqs).
template <typename T>
void rope(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> freqs, TensorRef<T> y);

// With y = rope(x, pos, freqs):
//   dtheta_j(t)  = sum_lead (dy1 y0 - dy0 y1)
//   dfreqs[j, a] = sum_t pos[t, a] dtheta_j(t)
// x, dy [..., T, D], pos [T, A], freqs [D/2, A] -> dfreqs [D/2, A]
template <typename T>
void ropeGradFreqs(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> freqs,
                   TensorRef<const T> dy, TensorRef<T> dfreqs);

//===----------------------------------------------------------------------===//
// householder, householder_grad_freqs (ops/position/Householder.cpp; no fast
// kernel)
//===----------------------------------------------------------------------===//

// a1 = pos[t] . f1[j], a2 = pos[t] . f2[j], H(a) = I - 2 v v^T with v = (cos a, sin a):
//   (y[.., t, 2j], y[.., t, 2j+1])^T = H(a2) H(a1) (x[.., t, 2j], x[.., t, 2j+1])^T
// H(a2) H(a1) = R(2 (a2 - a1)). x [..., T, D], pos [T, A], f1, f2 [D/2, A] -> y.
// Its gradient in x is householder(dy, pos, f2, f1) ((H(a2) H(a1))^T = H(a1) H(a2)).
template <typename T>
void householder(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> f1,
                 TensorRef<const T> f2, TensorRef<T> y);

// householder is rope with F = 2 (f2 - f1); with G = ropeGradFreqs(x, pos, F, dy):
//   df1 = -2 G,  df2 = 2 G
template <typename T>
void householderGradFreqs(TensorRef<const T> x, TensorRef<const T> pos, TensorRef<const T> f1,
                          TensorRef<const T> f2, TensorRef<const T> dy, TensorRef<T> df1,
                          TensorRef<T> df2);

//===----------------------------------------------------------------------===//
// skew, skew_grad (ops/position/Skew.cpp; no fast kernel)
//===----------------------------------------------------------------------===//

// S[.., i, j] = params[.., k], S[.., j, i] = -params[.., k], S[.., i, i] = 0
// for the k-th upper-triangle pair (i, j). dim >= 2:
// params [..., dim(dim-1)/2] -> S [..., dim, dim]
template <typename T> void skew(TensorRef<const T> params, int64_t dim, TensorRef<T> s);

// dparams[.., k] = dy[.., i, j] - dy[.., j, i]   dy [..., dim, dim] -> [..., dim(dim-1)/2]
template <typename T> void skewGrad(TensorRef<const T> dy, int64_t dim, TensorRef<T> dparams);

//===----------------------------------------------------------------------===//
// sparse_skew, sparse_skew_grad (ops/position/SparseSkew.cpp; no fast kernel)
//===----------------------------------------------------------------------===//

// As skew, with parameter m on upper-triangle index support[m] (support
// non-empty, strictly increasing, in [0, dim(dim-1)/2)); 0 elsewhere.
// params [K] (K = support.size()) -> S [dim, dim]
template <typename T>
void sparseSkew(TensorRef<const T> params, int64_t dim, const std::vector<int64_t> &support,
                TensorRef<T> s);

// dparams[m] = dy[i_m, j_m] - dy[j_m, i_m], (i_m, j_m) the pair of support[m].
// dy [dim, dim] -> dparams [K]
template <typename T>
void sparseSkewGrad(TensorRef<const T> dy, int64_t dim, const std::vector<int64_t> &support,
                    TensorRef<T> dparams);

//===----------------------------------------------------------------------===//
// cayley, cayley_grad (ops/position/Cayley.cpp)
//===----------------------------------------------------------------------===//

// y = U x for every token vector x = x[.., :], U = (I - S)(I + S)^-1, as a
// solve: one LU factorisation (partial pivoting) of I + S, then per token
// (I + S) z = x, y = (I - S) z. x [..., D], s [D, D] -> y (shape of x).
template <typename T> void cayley(TensorRef<const T> x, TensorRef<const T> s, TensorRef<T> y);

// Per token, z = (I + S)^-1 x and dx = U^T dy, i.e. the solve
// (I + S)^T dx = (I - S)^T dy; ds = -sum_tokens (dy + dx) z^T. Valid for any
// S (not only skew). x, dy [..., D], s [D, D] -> dx (shape of x), ds [D, D]
template <typename T>
void cayleyGrad(TensorRef<const T> x, TensorRef<const T> s, TensorRef<const T> dy,
                TensorRef<T> dx, TensorRef<T> ds);

//===----------------------------------------------------------------------===//
// generator_exp, generator_exp_grad (ops/position/GeneratorExp.cpp)
//===----------------------------------------------------------------------===//

// R[p] = exp(A), A = sum_k r[p, k] L_k (L_k = generators[k]), for every
// leading index p of r; the matrix exponential by scaling and squaring with
// a degree-13 Pade approximant. r [..., K], generators [K, d, d] -> R [..., d, d]
template <typename T>
void generatorExp(TensorRef<const T> r, TensorRef<const T> generators, TensorRef<T> rotations);

// Per leading index p, with A = sum_k r[p, k] L_k and dR = dy[p]: the adjoint
// Frechet derivative of exp at A, exactly by the block-triangular method,
//   dA(p) = top-right d x d block of exp([[A^T, dR], [0, A^T]]),
//   dgenerators[k] = sum_p r[p, k] dA(p).
// r [..., K], generators [K, d, d], dy [..., d, d] -> dgenerators [K, d, d]
template <typename T>
void generatorExpGrad(TensorRef<const T> r, TensorRef<const T> generators,
                      TensorRef<const T> dy, TensorRef<T> dgenerators);

//===----------------------------------------------------------------------===//
// commutator_norm, commutator_norm_grad (ops/position/CommutatorNorm.cpp; no
// fast kernel)
//===----------------------------------------------------------------------===//

// y = max_{a<b} ||L_a L_b - L_b L_a||_F   generators [K, d, d], K >= 2 -> y []
template <typename T> void commutatorNorm(TensorRef<const T> generators, TensorRef<T> y);

// Through the first maximising pair (a, b), a < b, in row-major pair order
// (ties go to the earlier pair): C = L_a L_b - L_b L_a, G = dy C / ||C||_F,
//   dL_a = G L_b^T - L_b^T G,  dL_b = L_a^T G - G L_a^T,  every other dL_k = 0;
// all zero when C = 0. generators [K, d, d], dy [] -> dgenerators [K, d, d]
template <typename T>
void commutatorNormGrad(TensorRef<const T> generators, TensorRef<const T> dy,
                        TensorRef<T> dgenerators);

//===----------------------------------------------------------------------===//
// apply_rotation, apply_rotation_grad (ops/position/ApplyRotation.cpp)
//===----------------------------------------------------------------------===//

// y[b, t, h*Dh + m] = sum_n R[t, m, n] x[b, t, h*Dh + n], Dh = D / heads.
// x [B, T, D], rotations [T, Dh, Dh] -> y [B, T, D]
template <typename T>
void applyRotation(TensorRef<const T> x, TensorRef<const T> rotations, int64_t heads,
                   TensorRef<T> y);

// dx_h(b, t) = R[t]^T dy_h(b, t);  drotations[t, m, n] = sum_{b,h} dy[b, t, h*Dh + m] x[b, t, h*Dh + n]
template <typename T>
void applyRotationGrad(TensorRef<const T> x, TensorRef<const T> rotations,
                       TensorRef<const T> dy, int64_t heads, TensorRef<T> dx,
                       TensorRef<T> drotations);

//===----------------------------------------------------------------------===//
// spd_gate, spd_gate_grad (ops/position/SpdGate.cpp)
//===----------------------------------------------------------------------===//

// y = x exp(gamma), gamma's shape a trailing suffix of x's ([D] or [T, D] for
// x [B, T, D]), repeated over the leading dims.
template <typename T>
void spdGate(TensorRef<const T> x, TensorRef<const T> gamma, TensorRef<T> y);

// dx = dy exp(gamma);  dgamma = sum over the leading dims of dy x exp(gamma)
template <typename T>
void spdGateGrad(TensorRef<const T> x, TensorRef<const T> gamma, TensorRef<const T> dy,
                 TensorRef<T> dx, TensorRef<T> dgamma);

} // namespace stringrt::ref

namespace stringrt::cpu {

using ref::TensorRef;

//===----------------------------------------------------------------------===//
// rope (ops/position/Rope.cpp; rope_grad_freqs has no fast kernel)
//===----------------------------------------------------------------------===//

// cos / sin of every (token, pair) angle computed once per call (in double,
// as the reference does), then the pairs rotated row by row in parallel.
void rope(TensorRef<const float> x, TensorRef<const float> pos, TensorRef<const float> freqs,
          TensorRef<float> y);

// The x-gradient of rope: dx = rope(dy, pos, -freqs), i.e. each pair turned
// back by its angle (R(theta)^T = R(-theta)).
void ropeGradInput(TensorRef<const float> dy, TensorRef<const float> pos,
                   TensorRef<const float> freqs, TensorRef<float> dx);

//===----------------------------------------------------------------------===//
// cayley, cayley_grad (ops/position/Cayley.cpp): float GEMMs, within float
// rounding of the reference kernels
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
// generator_exp, generator_exp_grad (ops/position/GeneratorExp.cpp): the
// reference's algorithms in double, vectorised d x d products, the matrices
// spread over the pool (the same bits on any thread count)
//===----------------------------------------------------------------------===//

// R[p] = exp(sum_k r[p, k] L_k): scaling and squaring, degree-13 Pade.
void generatorExp(TensorRef<const float> r, TensorRef<const float> generators,
                  TensorRef<float> rotations);

// dL_k = sum_p r[p, k] dA(p), dA(p) the top-right block of
// exp([[A^T, dR], [0, A^T]]) computed on the block-triangular pairs.
void generatorExpGrad(TensorRef<const float> r, TensorRef<const float> generators,
                      TensorRef<const float> dy, TensorRef<float> dgenerators);

//===----------------------------------------------------------------------===//
// apply_rotation, apply_rotation_grad (ops/position/ApplyRotation.cpp): in
// float, the same bits on any thread count
//===----------------------------------------------------------------------===//

// y[b, t, head h] = R[t] x[b, t, head h] (rotations [T, Dh, Dh]), in float.
void applyRotation(TensorRef<const float> x, TensorRef<const float> rotations, int64_t heads,
                   TensorRef<float> y);

// dx = R[t]^T dy per head slice; dR[t] = sum over batch and heads of dy x^T
// (batch, then heads ascending; threaded over tokens).
void applyRotationGrad(TensorRef<const float> x, TensorRef<const float> rotations,
                       TensorRef<const float> dy, int64_t heads, TensorRef<float> dx,
                       TensorRef<float> drotations);

//===----------------------------------------------------------------------===//
// spd_gate, spd_gate_grad (ops/position/SpdGate.cpp): bit for bit the
// reference kernels, for any thread count
//===----------------------------------------------------------------------===//

// y = x exp(gamma) (gamma's shape a trailing suffix of x's), in double.
void spdGate(TensorRef<const float> x, TensorRef<const float> gamma, TensorRef<float> y);

// dx = dy exp(gamma); dgamma = sum over the leading dims of dy x exp(gamma),
// each column in row order in double.
void spdGateGrad(TensorRef<const float> x, TensorRef<const float> gamma,
                 TensorRef<const float> dy, TensorRef<float> dx, TensorRef<float> dgamma);

} // namespace stringrt::cpu
