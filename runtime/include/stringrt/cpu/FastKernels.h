// Fast float32 CPU kernels of the ops that dominate a ViT / GPT training
// step: multi-threaded on the pool of ThreadPool.h, GEMMs through OpenBLAS
// when the runtime is built with it (a blocked C++ GEMM otherwise).
//
// Each kernel has the signature, shape checks and semantics of the reference
// kernel of the same name (the oracle; read the math there), for float only.
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
//
// Every fast kernel is now in the op library, beside its reference kernel
// (runtime/src/ops/<family>/<Op>.cpp), and declared in the family's header
// (stringrt/ops/<Family>Ops.h), which this header includes for the code
// that still names it; the conventions above are theirs.
#pragma once

#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"
#include "stringrt/ops/PositionOps.h"
