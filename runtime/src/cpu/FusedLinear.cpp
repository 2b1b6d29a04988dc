// Fast dense layers with fused epilogues: linear + GELU (the pre-activation
// kept for the backward) and linear + residual add (the residual added as
// the GEMM's tiles are stored); the input gradient + prior sum is the op
// library's (ops/layer/Linear.cpp).
#include "stringrt/cpu/FusedKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "Gemm.h"
#include "GemmRowTiles.h"
#include "KernelUtil.h"

#include <algorithm>

namespace stringrt::cpu {

using namespace util;

void linearGelu(TensorRef<const float> x, TensorRef<const float> w, OptionalInput<float> b,
                bool approximate, TensorRef<float> y, TensorRef<float> pre) {
  checkShape("linear_gelu: result", y, pre.shape);
  linear(x, w, b, pre);
  // cpu::gelu (std::erf): on the small pre-activations of these models
  // (|x| < 0.84 takes erff's short polynomial) it beat a branch-free
  // polynomial erf by ~25% on vit_rope's [6400, 128] activation.
  gelu(pre, approximate, y);
}

void linearResidual(TensorRef<const float> residual, TensorRef<const float> x,
                    TensorRef<const float> w, OptionalInput<float> b, TensorRef<float> y) {
  checkHasLastDim("linear_residual: x", x);
  checkRank("linear_residual: w", w, 2);
  const int64_t I = w.dim(0), O = w.dim(1);
  checkShape("linear_residual: x", x, withLast(x.shape, I));
  if (b)
    checkShape("linear_residual: b", *b, {O});
  checkShape("linear_residual: result", y, withLast(x.shape, O));
  checkShape("linear_residual: residual", residual, y.shape);
  const int64_t N = rowCount(x.shape);
  // residual + (b + x W): the bits of pe.linear followed by pe.add, so that
  // fusing them (pe-fuse-residual) changes no result.
  if (rowTileGemmSuits(Trans::No, O, I, 1.0f, 1.0f)) {
    // The residual added as the row-tile kernel stores each tile: the
    // linear's result is never written nor read back.
    rowTileGemmResidual(Trans::No, N, O, I, x.data, I, w.data, O, b ? b->data : nullptr,
                        residual.data, O, y.data, O);
    return;
  }
  linear(x, w, b, y);
  parallelFor(0, N, rowGrain(O), [&](int64_t n0, int64_t n1) {
    for (int64_t i = n0 * O; i < n1 * O; ++i)
      y.data[i] = residual.data[i] + y.data[i];
  });
}

} // namespace stringrt::cpu
