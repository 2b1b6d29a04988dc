// Reference CPU kernels of the `pe` layer ops and their backward ops
// (docs/dialect.md, docs/autodiff.md, PELayerOps.td; the same math as
// tests/oracle/pe_torch.py and pe_torch_grad.py).
//
// Conventions:
// - Plain loops, no BLAS: these are the oracle that compiled CPU code and
//   CUDA kernels are checked against, so clarity comes first.
// - T is float or double (explicitly instantiated for both). Every sum
//   accumulates in double and each result is rounded once to T.
// - Inputs are TensorRef<const T> (ids and labels TensorRef<const int32_t>),
//   outputs TensorRef<T> out-parameters whose shape the caller sets and the
//   kernel checks; every output is fully overwritten. Outputs must not alias
//   inputs. Attributes are plain arguments.
// - Activations are [B, T, D]; the batch size is simply shape[0]. Multi-head
//   ops split D into `heads` contiguous slices of Dh = D / heads.
// - Any shape or attribute violation, and any id or label out of range,
//   throws stringrt::Error naming the kernel and the operand.
#pragma once

#include "stringrt/ops/LayerOps.h" // the layer ops moved to the op library
#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <optional>

namespace stringrt::ref {

//===----------------------------------------------------------------------===//
// Attention (AttentionKernels.cpp)
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

} // namespace stringrt::ref
