// The kernels of the op library's layer family (runtime/src/ops/layer/,
// PELayerOps.td; docs/architecture.md, "The op library"), for the tests and
// the kernels that call them: each op's reference kernel (namespace ref:
// T is float or double, sums in double, each result rounded once to T) and
// its fast kernel (namespace cpu: float, multi-threaded on ThreadPool.h,
// sums in float), with the conventions of stringrt/reference/LayerKernels.h
// and stringrt/cpu/FastKernels.h: inputs TensorRef<const T>, outputs
// TensorRef<T> whose shape the caller sets and the kernel checks (the op's
// shape contract, one set of messages for both), every output fully
// overwritten, outputs never aliasing inputs. The fused linear_grad_input_acc
// and layer_norm_grad_acc have fast kernels only: their reference kernel is
// their composition of library ops (runtime/src/ops/Compositions.cpp).
// An op's kernels are declared here only while a test or another op's
// kernel calls them by name: an op whose tests run it through its
// registration (runtime/tests/OpCall.h), as a new op's do, keeps its kernels
// in its op file alone (docs/architecture.md, "The op library").
#pragma once

#include "stringrt/DropoutMask.h"
#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <optional>

namespace stringrt::ref {

//===----------------------------------------------------------------------===//
// attention, attention_grad (ops/layer/Attention.cpp)
//===----------------------------------------------------------------------===//

// Which keys j query i of head h sees: None: all; Causal: j <= i;
// Skip: only j = i - (skipBase + h) (none when that is negative).
enum class AttentionMask { None, Causal, Skip };

// Per batch b and head h, with q_i, k_j, v_j the head slices (Dh columns) and
// R_ij = rel[i, j] (the identity without rel):
//   s_ij = scale q_i^T R_ij k_j,  P_i = softmax over the visible j,
//   y_i = sum_j P_ij v_j;  a query with no visible key gets exact zeros.
// q, k, v [B, T, D], rel? [T, T, Dh, Dh] -> y [B, T, D] and, when `lse` is
// given, lse [B, heads, T]: lse[b, h, i] = log sum_j exp(s_ij) over the
// visible keys (-inf for a query with none). skipBase >= 0 is required with
// Skip and ignored otherwise.
template <typename T>
void attention(TensorRef<const T> q, TensorRef<const T> k, TensorRef<const T> v,
               OptionalInput<T> rel, int64_t heads, double scale, AttentionMask mask,
               int64_t skipBase, TensorRef<T> y, OptionalOutput<T> lse = std::nullopt);

// Recomputes P (no stored scores: the forward's y and lse, which
// pe.attention_grad also takes, are not needed here), then
//   dv_j = sum_i P_ij dy_i,  dP_ij = dy_i . v_j,  dS_ij = P_ij (dP_ij - sum_l P_il dP_il),
//   dq_i = scale sum_j dS_ij R_ij k_j,  dk_j = scale sum_i dS_ij R_ij^T q_i,
//   drel[i, j] = scale sum_{b,h} dS_ij q_i k_j^T.
// Rows without a visible key contribute exact zeros. drel must be given
// exactly when rel is.
template <typename T>
void attentionGrad(TensorRef<const T> q, TensorRef<const T> k, TensorRef<const T> v,
                   TensorRef<const T> dy, OptionalInput<T> rel, int64_t heads, double scale,
                   AttentionMask mask, int64_t skipBase, TensorRef<T> dq, TensorRef<T> dk,
                   TensorRef<T> dv, OptionalOutput<T> drel);

//===----------------------------------------------------------------------===//
// linear, linear_grad_input, linear_grad_weight, linear_grad_input_acc
// (ops/layer/Linear.cpp)
//===----------------------------------------------------------------------===//

// y[..., o] = sum_i x[..., i] w[i, o] + b[o]   x [..., I], w [I, O], b? [O] -> y [..., O]
template <typename T>
void linear(TensorRef<const T> x, TensorRef<const T> w, OptionalInput<T> b, TensorRef<T> y);

// dx[..., i] = sum_o dy[..., o] w[i, o]   (dx = dy W^T)   dy [..., O], w [I, O] -> dx [..., I]
template <typename T>
void linearGradInput(TensorRef<const T> dy, TensorRef<const T> w, TensorRef<T> dx);

// dw[i, o] = sum_l x[l, i] dy[l, o] over every leading index l   x [..., I], dy [..., O] -> dw [I, O]
template <typename T>
void linearGradWeight(TensorRef<const T> x, TensorRef<const T> dy, TensorRef<T> dw);

//===----------------------------------------------------------------------===//
// layer_norm, layer_norm_grad, layer_norm_grad_acc (ops/layer/LayerNorm.cpp)
//===----------------------------------------------------------------------===//

// y = (x - mu) / sqrt(var + epsilon) * gamma + beta over the last dim (biased var).
// x [..., D], gamma [D], beta [D] -> y [..., D]
template <typename T>
void layerNorm(TensorRef<const T> x, TensorRef<const T> gamma, TensorRef<const T> beta,
               double epsilon, TensorRef<T> y);

// xhat = (x - mu) rstd, g = dy gamma (per row, means over the last dim):
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),
//   dgamma = sum_lead dy xhat,  dbeta = sum_lead dy.
template <typename T>
void layerNormGrad(TensorRef<const T> x, TensorRef<const T> gamma, TensorRef<const T> dy,
                   double epsilon, TensorRef<T> dx, TensorRef<T> dgamma, TensorRef<T> dbeta);


//===----------------------------------------------------------------------===//
// gelu, gelu_grad (ops/layer/Gelu.cpp)
//===----------------------------------------------------------------------===//

// y = x (1 + erf(x / sqrt 2)) / 2; approximate: x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2
template <typename T> void gelu(TensorRef<const T> x, bool approximate, TensorRef<T> y);

// dx = dy gelu'(x); erf: Phi(x) + x phi(x); tanh (u = k (x + c x^3)):
//   (1 + tanh u) / 2 + x / 2 (1 - tanh^2 u) k (1 + 3 c x^2)
template <typename T>
void geluGrad(TensorRef<const T> x, TensorRef<const T> dy, bool approximate, TensorRef<T> dx);

//===----------------------------------------------------------------------===//
// cross_entropy, cross_entropy_grad (ops/layer/CrossEntropy.cpp)
//===----------------------------------------------------------------------===//

// loss (shape []) = (1/N) sum_n (logsumexp_c logits[n, c] - sum_c target[n, c] logits[n, c])
// target[n, c] = (1 - e) (c == labels[n]) + e / C, e = smoothing in [0, 1)
// (label smoothing as PyTorch's; e = 0 is the plain one-hot loss).
// logits [..., C], labels [...] in [0, C) (N = labels.numel() > 0)
template <typename T>
void crossEntropy(TensorRef<const T> logits, TensorRef<const int32_t> labels, TensorRef<T> loss,
                  double smoothing = 0.0);

// dlogits[n, c] = dy (softmax(logits[n])[c] - target[n, c]) / N   (dy shape [])
template <typename T>
void crossEntropyGrad(TensorRef<const T> logits, TensorRef<const int32_t> labels,
                      TensorRef<const T> dy, TensorRef<T> dlogits, double smoothing = 0.0);

//===----------------------------------------------------------------------===//
// add, sub, mul (ops/layer/Add.cpp, Sub.cpp, Mul.cpp; their broadcast in
// ops/layer/BinaryOp.h)
//===----------------------------------------------------------------------===//

// y = lhs (+|-|*) rhs. The shapes are equal or the lower-rank one is a
// trailing suffix of the other, repeated over the leading dims; y has the
// shape of the higher-rank operand.
template <typename T> void add(TensorRef<const T> lhs, TensorRef<const T> rhs, TensorRef<T> y);
template <typename T> void sub(TensorRef<const T> lhs, TensorRef<const T> rhs, TensorRef<T> y);
template <typename T> void mul(TensorRef<const T> lhs, TensorRef<const T> rhs, TensorRef<T> y);

//===----------------------------------------------------------------------===//
// scale (ops/layer/Scale.cpp)
//===----------------------------------------------------------------------===//

// y = factor x + bias
template <typename T>
void scale(TensorRef<const T> x, double factor, double bias, TensorRef<T> y);

//===----------------------------------------------------------------------===//
// sum_to (ops/layer/SumTo.cpp)
//===----------------------------------------------------------------------===//

// y[s] = sum_l x[l, s]: x [L..., S...] -> y [S...] (S a trailing suffix, possibly [])
template <typename T> void sumTo(TensorRef<const T> x, TensorRef<T> y);

//===----------------------------------------------------------------------===//
// broadcast_to (ops/layer/BroadcastTo.cpp; no fast kernel)
//===----------------------------------------------------------------------===//

// y[l, s] = x[s]: x [S...] -> y [L..., S...] (x's shape a trailing suffix of y's)
template <typename T> void broadcastTo(TensorRef<const T> x, TensorRef<T> y);

//===----------------------------------------------------------------------===//
// expand_axis (ops/layer/ExpandAxis.cpp; no fast kernel)
//===----------------------------------------------------------------------===//

// y = x with a new dim of `size` at `axis` (0 <= axis <= rank), every slice equal to x
template <typename T>
void expandAxis(TensorRef<const T> x, int64_t axis, int64_t size, TensorRef<T> y);

//===----------------------------------------------------------------------===//
// mean, mean_grad (ops/layer/Mean.cpp; no fast kernels; mean_grad's kernel
// is its executor adapter)
//===----------------------------------------------------------------------===//

// With axis: y = mean of x over dim `axis` (removed from the shape).
// Without (nullopt): y (shape []) = mean of all elements.
template <typename T>
void mean(TensorRef<const T> x, std::optional<int64_t> axis, TensorRef<T> y);

//===----------------------------------------------------------------------===//
// dropout (ops/layer/Dropout.cpp)
//===----------------------------------------------------------------------===//

// Dropout (perSample: drop-path) of x [B, ...] with the mask of `key` and
// `stream` (stringrt/DropoutMask.h): y = x * T(1 / (1 - p)) where kept, 0
// where dropped. Its own VJP: the same call on dy gives dx. Checks p in
// [0, 1), stream in [0, 2^31), key.step in [0, 2^32), the samples
// key.firstSample .. + B - 1 in [0, 2^32) and at most 2^34 elements a sample.
template <typename T>
void dropout(TensorRef<const T> x, double p, bool perSample, int64_t stream, const StepKey &key,
             TensorRef<T> y);

//===----------------------------------------------------------------------===//
// class_token, class_token_grad (ops/layer/ClassToken.cpp; no fast kernels)
//===----------------------------------------------------------------------===//

// y[b, 0, :] = cls, y[b, n + 1, :] = x[b, n, :]   x [B, N, D], cls [D] -> y [B, N+1, D]
template <typename T>
void classToken(TensorRef<const T> x, TensorRef<const T> cls, TensorRef<T> y);

// dx[b, n, :] = dy[b, n + 1, :],  dcls = sum_b dy[b, 0, :]
template <typename T>
void classTokenGrad(TensorRef<const T> dy, TensorRef<T> dx, TensorRef<T> dcls);

//===----------------------------------------------------------------------===//
// select_token, select_token_grad (ops/layer/SelectToken.cpp; no fast kernels)
//===----------------------------------------------------------------------===//

// y[b, :] = x[b, index, :]   x [B, T, D] -> y [B, D], 0 <= index < T
template <typename T>
void selectToken(TensorRef<const T> x, int64_t index, TensorRef<T> y);

// dx[b, index, :] = dy[b, :], 0 at every other token   dy [B, D] -> dx [B, T, D]
template <typename T>
void selectTokenGrad(TensorRef<const T> dy, int64_t index, TensorRef<T> dx);

//===----------------------------------------------------------------------===//
// patch_embed, patch_embed_grad (ops/layer/PatchEmbed.cpp)
//===----------------------------------------------------------------------===//

// p x p patches in row-major patch order, flattened (c, py, px):
//   v(b, n)[(c p + py) p + px] = image[b, c, row p + py, col p + px],
//   y[b, n, :] = v(b, n) w + bias      (row = n / (W/p), col = n % (W/p))
// image [B, C, H, W], w [C p p, D], bias [D] -> y [B, (H/p)(W/p), D]
template <typename T>
void patchEmbed(TensorRef<const T> image, TensorRef<const T> w, TensorRef<const T> bias,
                int64_t patch, TensorRef<T> y);

// dw[k, d] = sum_{b,n} v(b, n)[k] dy[b, n, d],  db[d] = sum_{b,n} dy[b, n, d]
template <typename T>
void patchEmbedGrad(TensorRef<const T> image, TensorRef<const T> dy, int64_t patch,
                    TensorRef<T> dw, TensorRef<T> db);

//===----------------------------------------------------------------------===//
// token_embed, token_embed_grad (ops/layer/TokenEmbed.cpp)
//===----------------------------------------------------------------------===//

// y[b, t, :] = table[ids[b, t], :]   ids [B, T] in [0, V), table [V, D] -> y [B, T, D]
template <typename T>
void tokenEmbed(TensorRef<const int32_t> ids, TensorRef<const T> table, TensorRef<T> y);

// dtable[v, :] = sum over (b, t) with ids[b, t] = v of dy[b, t, :]   (V = dtable.dim(0))
template <typename T>
void tokenEmbedGrad(TensorRef<const int32_t> ids, TensorRef<const T> dy, TensorRef<T> dtable);

} // namespace stringrt::ref

namespace stringrt::cpu {

using ref::AttentionMask;
using ref::OptionalInput;
using ref::OptionalOutput;
using ref::TensorRef;

//===----------------------------------------------------------------------===//
// attention, attention_grad (ops/layer/Attention.cpp)
//===----------------------------------------------------------------------===//

// Threaded over (batch, head). None / causal without rel: S = scale Q K^T
// and Y = P V as per-head GEMMs, a max-subtracted softmax in between. Skip:
// each query sees at most one key, whose softmax weight is exactly 1, so
// y_i = v_{i - (skipBase + h)} (0 when that is negative) - a gather, rel or
// not. None / causal with rel: q_i^T R_ij k_j as small GEMMs over the
// batches and heads, R_ij shared, on the GEMMs' register tile
// (cpu/RelativeAttention.cpp).
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
// cpu/RelativeAttention.cpp).
void attentionGrad(TensorRef<const float> q, TensorRef<const float> k,
                   TensorRef<const float> v, TensorRef<const float> dy,
                   OptionalInput<float> rel, int64_t heads, double scale, AttentionMask mask,
                   int64_t skipBase, TensorRef<float> dq, TensorRef<float> dk,
                   TensorRef<float> dv, OptionalOutput<float> drel);

// One GEMM over the flattened leading dims: [N, I] x [I, O] (+ b) -> [N, O].
void linear(TensorRef<const float> x, TensorRef<const float> w, OptionalInput<float> b,
            TensorRef<float> y);

// dx = dy W^T: [N, O] x [O, I] -> [N, I].
void linearGradInput(TensorRef<const float> dy, TensorRef<const float> w, TensorRef<float> dx);

// dw = X^T dy: [I, N] x [N, O] -> [I, O].
void linearGradWeight(TensorRef<const float> x, TensorRef<const float> dy, TensorRef<float> dw);

// dx = prior + dY W^T: the bits of cpu::linearGradInput followed by the
// add. On AVX2 CPUs one GEMM whose tiles add the prior sum as they are
// stored; elsewhere cpu::linearGradInput, then the add in place. dx must
// not overlap prior.
void linearGradInputAcc(TensorRef<const float> prior, TensorRef<const float> dy,
                        TensorRef<const float> w, TensorRef<float> dx);

// Rows in parallel.
void layerNorm(TensorRef<const float> x, TensorRef<const float> gamma,
               TensorRef<const float> beta, double epsilon, TensorRef<float> y);

// dx rows in parallel; dgamma, dbeta per column in row order (in double),
// columns in parallel.
void layerNormGrad(TensorRef<const float> x, TensorRef<const float> gamma,
                   TensorRef<const float> dy, double epsilon, TensorRef<float> dx,
                   TensorRef<float> dgamma, TensorRef<float> dbeta);

// dx = prior + layer_norm_grad's dx (dgamma and dbeta as cpu::layerNormGrad
// gives them): the bits of cpu::layerNormGrad followed by the add, the
// prior added as each row of dx is stored. dx must not overlap prior.
void layerNormGradAcc(TensorRef<const float> prior, TensorRef<const float> x,
                      TensorRef<const float> gamma, TensorRef<const float> dy, double epsilon,
                      TensorRef<float> dx, TensorRef<float> dgamma, TensorRef<float> dbeta);

// Elementwise in parallel, in float (std::erf, std::tanh).
void gelu(TensorRef<const float> x, bool approximate, TensorRef<float> y);
void geluGrad(TensorRef<const float> x, TensorRef<const float> dy, bool approximate,
              TensorRef<float> dx);

// Rows in parallel (softmax in float, util::fastExp); per-row losses summed
// in row order (in double).
void crossEntropy(TensorRef<const float> logits, TensorRef<const int32_t> labels,
                  TensorRef<float> loss, double smoothing = 0.0);
void crossEntropyGrad(TensorRef<const float> logits, TensorRef<const int32_t> labels,
                      TensorRef<const float> dy, TensorRef<float> dlogits, double smoothing = 0.0);

// y = lhs (+|-|*) rhs with trailing-suffix broadcast (the smaller operand
// repeated over the other's leading dims), rows in parallel. Bit for bit the
// reference's results (a float sum, difference or product computed in double
// and rounded once is the float one).
void add(TensorRef<const float> lhs, TensorRef<const float> rhs, TensorRef<float> y);
void sub(TensorRef<const float> lhs, TensorRef<const float> rhs, TensorRef<float> y);
void mul(TensorRef<const float> lhs, TensorRef<const float> rhs, TensorRef<float> y);

// y = factor x + bias, elements in parallel, computed in double as the
// reference does.
void scale(TensorRef<const float> x, double factor, double bias, TensorRef<float> y);

// y[s] = sum_l x[l, s] (y's shape a trailing suffix of x's): column blocks in
// parallel, each column summed in row order in double (the reference's
// order, so its results bit for bit).
void sumTo(TensorRef<const float> x, TensorRef<float> y);

// ref::dropout's masks and values, bit for bit (each element's draw is a
// function of its coordinates), in parallel over blocks of four elements
// (over samples for drop-path).
void dropout(TensorRef<const float> x, double p, bool perSample, int64_t stream,
             const StepKey &key, TensorRef<float> y);

// Unfolds the patches into a [B (H/p)(W/p), C p p] matrix, then one GEMM
// with w plus the bias.
void patchEmbed(TensorRef<const float> image, TensorRef<const float> w,
                TensorRef<const float> bias, int64_t patch, TensorRef<float> y);

// dw = U^T dy over the unfolded patches U (one GEMM); db = column sums of dy.
void patchEmbedGrad(TensorRef<const float> image, TensorRef<const float> dy, int64_t patch,
                    TensorRef<float> dw, TensorRef<float> db);

// Row gather in parallel.
void tokenEmbed(TensorRef<const int32_t> ids, TensorRef<const float> table,
                TensorRef<float> y);

// The (b, t) positions are bucketed by id (in order), then every table row
// sums its own bucket: parallel over ids, no atomics, a fixed order.
void tokenEmbedGrad(TensorRef<const int32_t> ids, TensorRef<const float> dy,
                    TensorRef<float> dtable);

} // namespace stringrt::cpu
