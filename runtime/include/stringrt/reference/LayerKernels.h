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

// Every layer op's kernels are now in the op library (runtime/src/ops/layer,
// declared in stringrt/ops/LayerOps.h, which this header includes for the
// code that still names it); the conventions above are theirs.
#include "stringrt/ops/LayerOps.h"
#include "stringrt/reference/Tensor.h"
