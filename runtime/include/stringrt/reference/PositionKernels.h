// Reference CPU kernels of the `pe` positional-encoding ops and their
// backward ops (docs/dialect.md, docs/autodiff.md, PEPositionOps.td; the
// same math as tests/oracle/pe_torch.py and pe_torch_grad.py).
//
// Conventions (those of LayerKernels.h):
// - Plain loops, no BLAS: these are the oracle that compiled CPU code and
//   CUDA kernels are checked against, so clarity comes first.
// - T is float or double (explicitly instantiated for both). Everything is
//   computed in double (angles, sums, solves, matrix exponentials) and each
//   result is rounded once to T.
// - Inputs are TensorRef<const T>, outputs TensorRef<T> out-parameters whose
//   shape the caller sets and the kernel checks; every output is fully
//   overwritten. Outputs must not alias inputs. Attributes are plain
//   arguments.
// - Rotary pairs are interleaved: pair j is columns (2j, 2j+1), rotated by
//   R(theta) = [[cos, -sin], [sin, cos]]. Vectors are columns (y = M x).
// - Positions are [T, A]; the rotary kernels take x as [..., T, D] (the
//   dialect's [B, T, D]), every leading index sharing the positions.
// - Skew parameter k is the upper-triangle pair (i, j), i < j, in row-major
//   order (the order of torch.triu_indices(d, d, 1)).
// - Any shape or attribute violation throws stringrt::Error naming the
//   kernel and the operand; so does a singular I + S in the Cayley kernels.
#pragma once

#include "stringrt/ops/PositionOps.h"
#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <vector>

namespace stringrt::ref {

//===----------------------------------------------------------------------===//
// The rotation (PositionRotation.cpp; the skew builders, the Cayley
// transform, the generator ops and the gates in the op library,
// stringrt/ops/PositionOps.h)
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

} // namespace stringrt::ref
