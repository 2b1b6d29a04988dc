// pe.linear_residual (PEFusedOps.td: residual + linear(x, w, b), as
// pe-fuse-residual writes pe.linear then pe.add; no gradient op of its own:
// pe-autodiff runs before the fusion): the shape contract, the reference
// kernel, the fast kernel (the residual added as the GEMM's tiles are
// stored) and the registration (ops/OpLibrary.h). The kernels'
// declarations are in stringrt/ops/FusedOps.h. stringc generates no CPU
// kernel for it.
//
// Its composition (ops/Compositions.cpp: linear, then add) is not its
// reference kernel: this kernel sums the residual into the linear's double
// accumulator and rounds once, the composition rounds the linear first, and
// --kernels reference keeps the bits it had (the composition is the tests'
// oracle, within an ulp; docs/architecture.md, "Fused ops by composition").
#include "../OpLibrary.h"

#include "../../cpu/GemmRowTiles.h"
#include "../../cpu/KernelUtil.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkShape;
using ref::OptionalInput;
using ref::TensorRef;
using ref::layer::withLast;

// x [..., I], w [I, O], b? [O]; residual and the result [..., O].
template <typename T>
void linearResidualContract(const TensorRef<const T> &residual, const TensorRef<const T> &x,
                            const TensorRef<const T> &w, const OptionalInput<T> &b,
                            const TensorRef<T> &y) {
  const int64_t O = ref::layer::checkLinearOperands("linear_residual", x, w, b);
  checkShape("linear_residual: result", y, withLast(x.shape, O));
  checkShape("linear_residual: residual", residual, y.shape);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

template <typename T>
void linearResidual(TensorRef<const T> residual, TensorRef<const T> x, TensorRef<const T> w,
                    OptionalInput<T> b, TensorRef<T> y) {
  ops::linearResidualContract(residual, x, w, b, y);
  const int64_t rows = layer::rowCount(x.shape);
  const int64_t in = w.dim(0), out = w.dim(1);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t o = 0; o < out; ++o) {
      // The row of x times the column of w, in double.
      double acc = b ? static_cast<double>((*b)[o]) : 0.0;
      for (int64_t i = 0; i < in; ++i)
        acc += static_cast<double>(x[n * in + i]) * static_cast<double>(w[i * out + o]);
      y[n * out + o] = static_cast<T>(static_cast<double>(residual[n * out + o]) + acc);
    }
}

#define STRINGRT_INSTANTIATE(T)                                                              \
  template void linearResidual<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>, \
                                  OptionalInput<T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernel
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using util::rowCount;
using util::rowGrain;

void linearResidual(TensorRef<const float> residual, TensorRef<const float> x,
                    TensorRef<const float> w, OptionalInput<float> b, TensorRef<float> y) {
  ops::linearResidualContract(residual, x, w, b, y);
  const int64_t I = w.dim(0), O = w.dim(1);
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

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runLinearResidual(const OpContext &c) {
  ref::linearResidual<float>(c.in(0), c.in(1), c.in(2), c.optIn(3), c.out(0));
}
void runFastLinearResidual(const OpContext &c) {
  cpu::linearResidual(c.in(0), c.in(1), c.in(2), c.optIn(3), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::LinearResidual>(OpRegistry &registry) {
  registry.add(OpCode::LinearResidual, {runLinearResidual, nullptr, runFastLinearResidual});
}

} // namespace stringrt::ops
