// The kernels of the op library's gather family (runtime/src/ops/gather/,
// PEGatherOps.td: the ops the gather rewrites introduce, pe-skip-gather and
// pe-distinct-offsets; docs/dialect.md, docs/autodiff.md; the same math as
// tests/oracle/pe_torch.py and pe_torch_grad.py), for the tests and the
// kernels that call them: each op's reference kernel (namespace ref: T is
// float or double). They are copies and scatter-adds, memory-bound, so
// every kernel set runs them: there are no fast variants. Inputs
// TensorRef<const T>, outputs TensorRef<T> whose shape the caller sets and
// the kernel checks (the op's shape contract), every output fully
// overwritten, outputs never aliasing inputs; violations throw
// stringrt::Error naming the op.
#pragma once

#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <vector>

namespace stringrt::ref {

//===----------------------------------------------------------------------===//
// skip_gather, skip_gather_grad (ops/gather/SkipGather.cpp)
//===----------------------------------------------------------------------===//

// Skip-n attention with its one visible key: head s (columns s*Dh ..
// (s+1)*Dh - 1, Dh = D / heads) of token i copies head s of token
// i - (skipBase + s), or is 0 when that is negative.
// v [B, T, D], heads dividing D, skipBase >= 0 -> y [B, T, D]
template <typename T>
void skipGather(TensorRef<const T> v, int64_t heads, int64_t skipBase, TensorRef<T> y);

// The reverse shift: dv[b, j, s*Dh + m] = dy[b, j + skipBase + s, s*Dh + m],
// 0 when j + skipBase + s >= T.   dy [B, T, D] -> dv [B, T, D]
template <typename T>
void skipGatherGrad(TensorRef<const T> dy, int64_t heads, int64_t skipBase, TensorRef<T> dv);

//===----------------------------------------------------------------------===//
// offset_table (ops/gather/OffsetTable.cpp)
//===----------------------------------------------------------------------===//

// table[u, a] = offsets[u*A + a]: integers (|offset| <= 2^24, exact in f32).
// offsets of U*A entries -> table [U, A]
template <typename T> void offsetTable(const std::vector<int64_t> &offsets, TensorRef<T> table);

//===----------------------------------------------------------------------===//
// pair_gather, pair_gather_grad (ops/gather/PairGather.cpp)
//===----------------------------------------------------------------------===//

// y[i, j, s] = table[index[i*T + j], s].
// table [U, S...], index of T*T entries in [0, U) -> y [T, T, S...]
template <typename T>
void pairGather(TensorRef<const T> table, const std::vector<int64_t> &index, TensorRef<T> y);

// dtable[u, s] = sum over (i, j) with index[i*T + j] = u of dy[i, j, s]
// (summed in double, in row-major pair order).
// dy [T, T, S...], index of T*T entries -> dtable [U, S...]
template <typename T>
void pairGatherGrad(TensorRef<const T> dy, const std::vector<int64_t> &index,
                    TensorRef<T> dtable);

} // namespace stringrt::ref
