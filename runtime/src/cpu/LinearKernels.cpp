// Fast linear (dense layer) kernels: each is one GEMM over the rows of the
// flattened leading dims, [..., I] viewed as [N, I].
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "Gemm.h"
#include "GemmRowTiles.h"
#include "KernelUtil.h"

#include <algorithm>

namespace stringrt::cpu {

using namespace util;

// y = b (broadcast over rows), then y += X W: the bias rides in through the
// GEMM's beta = 1 instead of a second pass over y.
void linear(TensorRef<const float> x, TensorRef<const float> w, OptionalInput<float> b,
            TensorRef<float> y) {
  checkHasLastDim("linear: x", x);
  checkRank("linear: w", w, 2);
  const int64_t I = w.dim(0), O = w.dim(1);
  checkShape("linear: x", x, withLast(x.shape, I));
  if (b)
    checkShape("linear: b", *b, {O});
  checkShape("linear: result", y, withLast(x.shape, O));
  const int64_t N = rowCount(x.shape);
  if (b && rowTileGemmSuits(Trans::No, O, I, 1.0f, 1.0f)) {
    // The bias added as the row-tile kernel stores C: the bits of the fill
    // and beta 1 below, one pass over y fewer.
    rowTileGemmBias(Trans::No, N, O, I, x.data, I, w.data, O, b->data, y.data, O);
    return;
  }
  if (b)
    parallelFor(0, N, rowGrain(O), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n)
        std::copy(b->data, b->data + O, y.data + n * O);
    });
  gemm(Trans::No, Trans::No, N, O, I, 1.0f, x.data, I, w.data, O, b ? 1.0f : 0.0f, y.data, O);
}

// dx [N, I] = dy [N, O] W^T.
void linearGradInput(TensorRef<const float> dy, TensorRef<const float> w, TensorRef<float> dx) {
  checkHasLastDim("linear_grad_input: dy", dy);
  checkRank("linear_grad_input: w", w, 2);
  const int64_t I = w.dim(0), O = w.dim(1);
  checkShape("linear_grad_input: dy", dy, withLast(dy.shape, O));
  checkShape("linear_grad_input: dx", dx, withLast(dy.shape, I));
  const int64_t N = rowCount(dy.shape);
  gemm(Trans::No, Trans::Yes, N, I, O, 1.0f, dy.data, O, w.data, O, 0.0f, dx.data, I);
}

// dw [I, O] = X^T dy, the sum over every leading index (the GEMM's K).
void linearGradWeight(TensorRef<const float> x, TensorRef<const float> dy, TensorRef<float> dw) {
  checkHasLastDim("linear_grad_weight: x", x);
  checkRank("linear_grad_weight: dw", dw, 2);
  const int64_t I = dw.dim(0), O = dw.dim(1);
  checkShape("linear_grad_weight: x", x, withLast(x.shape, I));
  checkShape("linear_grad_weight: dy", dy, withLast(x.shape, O));
  const int64_t N = rowCount(x.shape);
  gemm(Trans::Yes, Trans::No, I, O, N, 1.0f, x.data, I, dy.data, O, 0.0f, dw.data, O);
}

} // namespace stringrt::cpu
