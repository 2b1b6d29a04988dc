// Reference kernels: linear and its backward ops.
#include "stringrt/reference/LayerKernels.h"

#include "KernelChecks.h"
#include "LayerKernelUtil.h"

#include <cmath>
#include <vector>

namespace stringrt::ref {

using layer::Acc;
using layer::rowCount;
using layer::withLast;

// y[n, o] = b[o] + sum_i x[n, i] w[i, o] over the rows n of x.
template <typename T>
void linear(TensorRef<const T> x, TensorRef<const T> w, OptionalInput<T> b, TensorRef<T> y) {
  layer::checkHasLastDim("linear: x", x);
  checkRank("linear: w", w, 2);
  const int64_t I = w.dim(0), O = w.dim(1);
  checkShape("linear: x", x, withLast(x.shape, I));
  if (b)
    checkShape("linear: b", *b, {O});
  checkShape("linear: result", y, withLast(x.shape, O));
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
  layer::checkHasLastDim("linear_grad_input: dy", dy);
  checkRank("linear_grad_input: w", w, 2);
  const int64_t I = w.dim(0), O = w.dim(1);
  checkShape("linear_grad_input: dy", dy, withLast(dy.shape, O));
  checkShape("linear_grad_input: dx", dx, withLast(dy.shape, I));
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
  layer::checkHasLastDim("linear_grad_weight: x", x);
  checkRank("linear_grad_weight: dw", dw, 2);
  const int64_t I = dw.dim(0), O = dw.dim(1);
  checkShape("linear_grad_weight: x", x, withLast(x.shape, I));
  checkShape("linear_grad_weight: dy", dy, withLast(x.shape, O));
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
