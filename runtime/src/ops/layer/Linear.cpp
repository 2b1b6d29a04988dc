// pe.linear (PELayerOps.td: a dense layer, y = x W + b over the last
// dimension) and its gradients pe.linear_grad_input, pe.linear_grad_weight
// and pe.linear_grad_input_acc (the input gradient with a prior added, as
// pe-fuse-residual writes linear_grad_input then add; its ODS is in
// PEFusedOps.td): the shape contract, the reference kernels, the fast
// kernels (one GEMM each) and the registration (ops/OpLibrary.h);
// linear_grad_input_acc's reference kernel is its composition
// (ops/Compositions.cpp: linear_grad_input's, then add's). The kernels'
// declarations are in stringrt/ops/LayerOps.h. stringc generates no CPU
// kernels for them; pe.linear_gelu's and pe.linear_residual's kernels call
// these.
#include "../OpLibrary.h"

#include "../../cpu/Gemm.h"
#include "../../cpu/GemmRowTiles.h"
#include "../../cpu/KernelUtil.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/LayerOps.h"

#include <algorithm>
#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkRank;
using ref::checkShape;
using ref::OptionalInput;
using ref::TensorRef;
using ref::layer::checkHasLastDim;
using ref::layer::withLast;

// linear: x [..., I], w [I, O], b? [O], the result [..., O].
template <typename T>
void linearContract(const TensorRef<const T> &x, const TensorRef<const T> &w,
                    const OptionalInput<T> &b, const TensorRef<T> &y) {
  const int64_t O = ref::layer::checkLinearOperands("linear", x, w, b);
  checkShape("linear: result", y, withLast(x.shape, O));
}

// linear_grad_input: dy [..., O], w [I, O], dx [..., I] (`op` names the op
// in the messages: linear_grad_input_acc checks the same).
template <typename T>
void linearGradInputContract(const TensorRef<const T> &dy, const TensorRef<const T> &w,
                             const TensorRef<T> &dx, const std::string &op = "linear_grad_input") {
  const std::string dyName = op + ": dy", wName = op + ": w", dxName = op + ": dx";
  checkHasLastDim(dyName.c_str(), dy);
  checkRank(wName.c_str(), w, 2);
  const int64_t I = w.dim(0), O = w.dim(1);
  checkShape(dyName.c_str(), dy, withLast(dy.shape, O));
  checkShape(dxName.c_str(), dx, withLast(dy.shape, I));
}

// linear_grad_weight: x [..., I], dy [..., O], dw [I, O].
template <typename T>
void linearGradWeightContract(const TensorRef<const T> &x, const TensorRef<const T> &dy,
                              const TensorRef<T> &dw) {
  checkHasLastDim("linear_grad_weight: x", x);
  checkRank("linear_grad_weight: dw", dw, 2);
  const int64_t I = dw.dim(0), O = dw.dim(1);
  checkShape("linear_grad_weight: x", x, withLast(x.shape, I));
  checkShape("linear_grad_weight: dy", dy, withLast(x.shape, O));
}

// linear_grad_input_acc: linear_grad_input's, and prior the shape of dx.
template <typename T>
void linearGradInputAccContract(const TensorRef<const T> &prior, const TensorRef<const T> &dy,
                                const TensorRef<const T> &w, const TensorRef<T> &dx) {
  linearGradInputContract(dy, w, dx, "linear_grad_input_acc");
  checkShape("linear_grad_input_acc: prior", prior, dx.shape);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: sums in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;
using layer::rowCount;

// y[n, o] = b[o] + sum_i x[n, i] w[i, o] over the rows n of x.
template <typename T>
void linear(TensorRef<const T> x, TensorRef<const T> w, OptionalInput<T> b, TensorRef<T> y) {
  ops::linearContract(x, w, b, y);
  const int64_t I = w.dim(0), O = w.dim(1);
  const int64_t N = rowCount(x.shape);
  std::vector<Acc> acc(static_cast<size_t>(O));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < O; ++o)
      acc[o] = b ? Acc(b->data[o]) : Acc(0);
    for (int64_t i = 0; i < I; ++i) {
      const Acc xi = x.data[n * I + i];
      for (int64_t o = 0; o < O; ++o)
        acc[o] += xi * Acc(w.data[i * O + o]);
    }
    for (int64_t o = 0; o < O; ++o)
      y.data[n * O + o] = static_cast<T>(acc[o]);
  }
}

// dx[n, i] = sum_o dy[n, o] w[i, o].
template <typename T>
void linearGradInput(TensorRef<const T> dy, TensorRef<const T> w, TensorRef<T> dx) {
  ops::linearGradInputContract(dy, w, dx);
  const int64_t I = w.dim(0), O = w.dim(1);
  const int64_t N = rowCount(dy.shape);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < I; ++i) {
      Acc acc = 0;
      for (int64_t o = 0; o < O; ++o)
        acc += Acc(dy.data[n * O + o]) * Acc(w.data[i * O + o]);
      dx.data[n * I + i] = static_cast<T>(acc);
    }
}

// dw[i, o] = sum_n x[n, i] dy[n, o] over the rows n (all leading indices).
template <typename T>
void linearGradWeight(TensorRef<const T> x, TensorRef<const T> dy, TensorRef<T> dw) {
  ops::linearGradWeightContract(x, dy, dw);
  const int64_t I = dw.dim(0), O = dw.dim(1);
  const int64_t N = rowCount(x.shape);
  std::vector<Acc> acc(static_cast<size_t>(I * O), Acc(0));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < I; ++i) {
      const Acc xi = x.data[n * I + i];
      for (int64_t o = 0; o < O; ++o)
        acc[i * O + o] += xi * Acc(dy.data[n * O + o]);
    }
  for (int64_t j = 0; j < I * O; ++j)
    dw.data[j] = static_cast<T>(acc[j]);
}

#define STRINGRT_INSTANTIATE(T)                                                              \
  template void linear<T>(TensorRef<const T>, TensorRef<const T>, OptionalInput<T>,          \
                          TensorRef<T>);                                                     \
  template void linearGradInput<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);    \
  template void linearGradWeight<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: one GEMM over the rows of the flattened leading dims,
// [..., I] viewed as [N, I]
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using util::rowCount;
using util::rowGrain;

// y = b (broadcast over rows), then y += X W: the bias rides in through the
// GEMM's beta = 1 instead of a second pass over y.
void linear(TensorRef<const float> x, TensorRef<const float> w, OptionalInput<float> b,
            TensorRef<float> y) {
  ops::linearContract(x, w, b, y);
  const int64_t I = w.dim(0), O = w.dim(1);
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
  ops::linearGradInputContract(dy, w, dx);
  const int64_t I = w.dim(0), O = w.dim(1);
  const int64_t N = rowCount(dy.shape);
  gemm(Trans::No, Trans::Yes, N, I, O, 1.0f, dy.data, O, w.data, O, 0.0f, dx.data, I);
}

// dw [I, O] = X^T dy, the sum over every leading index (the GEMM's K).
void linearGradWeight(TensorRef<const float> x, TensorRef<const float> dy, TensorRef<float> dw) {
  ops::linearGradWeightContract(x, dy, dw);
  const int64_t I = dw.dim(0), O = dw.dim(1);
  const int64_t N = rowCount(x.shape);
  gemm(Trans::Yes, Trans::No, I, O, N, 1.0f, x.data, I, dy.data, O, 0.0f, dw.data, O);
}

void linearGradInputAcc(TensorRef<const float> prior, TensorRef<const float> dy,
                        TensorRef<const float> w, TensorRef<float> dx) {
  ops::linearGradInputAccContract(prior, dy, w, dx);
  const int64_t I = w.dim(0), O = w.dim(1);
  const int64_t N = rowCount(dy.shape);
  // prior + dY W^T: the bits of pe.linear_grad_input followed by pe.add
  // (the same FMA chains as linearGradInput's GEMM, W^T packed the same way).
  if (rowTileGemmSuits(Trans::No, I, O, 1.0f, 1.0f)) {
    rowTileGemmResidual(Trans::Yes, N, I, O, dy.data, O, w.data, O, nullptr, prior.data, I,
                        dx.data, I);
    return;
  }
  linearGradInput(dy, w, dx);
  parallelFor(0, N, rowGrain(I), [&](int64_t n0, int64_t n1) {
    for (int64_t i = n0 * I; i < n1 * I; ++i)
      dx.data[i] = prior.data[i] + dx.data[i];
  });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runLinear(const OpContext &c) { ref::linear<float>(c.in(0), c.in(1), c.optIn(2), c.out(0)); }
void runFastLinear(const OpContext &c) { cpu::linear(c.in(0), c.in(1), c.optIn(2), c.out(0)); }

void runLinearGradInput(const OpContext &c) {
  ref::linearGradInput<float>(c.in(0), c.in(1), c.out(0));
}
void runFastLinearGradInput(const OpContext &c) {
  cpu::linearGradInput(c.in(0), c.in(1), c.out(0));
}

void runLinearGradWeight(const OpContext &c) {
  ref::linearGradWeight<float>(c.in(0), c.in(1), c.out(0));
}
void runFastLinearGradWeight(const OpContext &c) {
  cpu::linearGradWeight(c.in(0), c.in(1), c.out(0));
}

// The contract alone, run before the composition (runComposition).
void checkLinearGradInputAcc(const OpContext &c) {
  linearGradInputAccContract<float>(c.in(0), c.in(1), c.in(2), c.out(0));
}
void runFastLinearGradInputAcc(const OpContext &c) {
  cpu::linearGradInputAcc(c.in(0), c.in(1), c.in(2), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::Linear>(OpRegistry &registry) {
  registry.add(OpCode::Linear, {runLinear, nullptr, runFastLinear});
  registry.add(OpCode::LinearGradInput, {runLinearGradInput, nullptr, runFastLinearGradInput});
  registry.add(OpCode::LinearGradWeight, {runLinearGradWeight, nullptr, runFastLinearGradWeight});
  registry.add(OpCode::LinearGradInputAcc,
               {nullptr, checkLinearGradInputAcc, runFastLinearGradInputAcc});
}

} // namespace stringrt::ops
