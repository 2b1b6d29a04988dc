// Reference CPU kernels of the gather ops that the gather rewrites introduce
// (PEGatherOps.td, docs/dialect.md, docs/autodiff.md; the same math as
// tests/oracle/pe_torch.py and pe_torch_grad.py):
//   pair_gather / pair_gather_grad   (pe-distinct-offsets)
// (skip_gather, skip_gather_grad and offset_table are in the op library:
// stringrt/ops/GatherOps.h, included here.)
//
// Conventions of LayerKernels.h / PositionKernels.h: T is float or double,
// plain loops, every output fully overwritten, outputs never alias inputs,
// shape or attribute violations throw stringrt::Error naming the kernel.
#pragma once

#include "stringrt/ops/GatherOps.h" // the gather ops moved to the op library
#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <vector>

namespace stringrt::ref {

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
