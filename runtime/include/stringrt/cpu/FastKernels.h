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
