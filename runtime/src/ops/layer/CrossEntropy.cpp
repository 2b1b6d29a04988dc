// pe.cross_entropy, the mean softmax cross-entropy with label smoothing,
// and its gradient pe.cross_entropy_grad (PELayerOps.td): the shape
// contract, the reference kernels, the fast kernels and the registration
// (ops/OpLibrary.h). The kernels' declarations are in stringrt/ops/LayerOps.h;
// stringc generates kernels for the gradient (Codegen, checked here before
// they run), not for the loss.
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/LayerOps.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkShape;
using ref::TensorRef;

// logits [..., C] against labels [...] (each in [0, C), at least one
// position), smoothing in [0, 1); returns C. The labels are checked up
// front, so no chunk of a fast kernel can fail half way.
template <typename T>
int64_t crossEntropyInputs(const char *kernel, const TensorRef<const T> &logits,
                           const TensorRef<const int32_t> &labels, double smoothing) {
  const std::string name(kernel);
  check(smoothing >= 0.0 && smoothing < 1.0, kernel, // NaN fails too
        "smoothing " + std::to_string(smoothing) + " is out of range [0, 1)");
  ref::layer::checkHasLastDim((name + ": logits").c_str(), logits);
  const int64_t C = logits.dim(-1);
  checkShape((name + ": labels").c_str(), labels,
             std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1));
  const int64_t N = labels.numel();
  check(N > 0, kernel, "no positions to average over (labels " +
                           ref::shapeToString(labels.shape) + ")");
  for (int64_t n = 0; n < N; ++n)
    check(labels.data[n] >= 0 && labels.data[n] < C, kernel,
          "label " + std::to_string(labels.data[n]) + " at flat index " + std::to_string(n) +
              " is out of range [0, " + std::to_string(C) + ")");
  return C;
}

// cross_entropy: the inputs, a scalar result.
template <typename T>
int64_t crossEntropyContract(const TensorRef<const T> &logits,
                             const TensorRef<const int32_t> &labels, const TensorRef<T> &loss,
                             double smoothing) {
  const int64_t C = crossEntropyInputs("cross_entropy", logits, labels, smoothing);
  checkShape("cross_entropy: result", loss, {});
  return C;
}

// cross_entropy_grad: the inputs, dy a scalar, dlogits the logits' shape.
template <typename T>
int64_t crossEntropyGradContract(const TensorRef<const T> &logits,
                                 const TensorRef<const int32_t> &labels,
                                 const TensorRef<const T> &dy, const TensorRef<T> &dlogits,
                                 double smoothing) {
  const int64_t C = crossEntropyInputs("cross_entropy_grad", logits, labels, smoothing);
  checkShape("cross_entropy_grad: dy", dy, {});
  checkShape("cross_entropy_grad: dlogits", dlogits, logits.shape);
  return C;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;

namespace {

template <typename T> void softmaxStats(const T *row, int64_t C, Acc &maxLogit, Acc &sumExp) {
  maxLogit = row[0];
  for (int64_t c = 1; c < C; ++c)
    maxLogit = std::max(maxLogit, Acc(row[c]));
  sumExp = 0;
  for (int64_t c = 0; c < C; ++c)
    sumExp += std::exp(Acc(row[c]) - maxLogit);
}

} // namespace

// loss = (1/N) sum_n (max_n + log sum_c exp(logits[n, c] - max_n)
//                     - (1 - e) logits[n, labels[n]] - (e / C) sum_c logits[n, c])
template <typename T>
void crossEntropy(TensorRef<const T> logits, TensorRef<const int32_t> labels, TensorRef<T> loss,
                  double smoothing) {
  const int64_t C = ops::crossEntropyContract(logits, labels, loss, smoothing);
  const int64_t N = labels.numel();
  const Acc keep = Acc(1) - Acc(smoothing), spread = Acc(smoothing) / Acc(C);
  Acc total = 0;
  for (int64_t n = 0; n < N; ++n) {
    const T *row = logits.data + n * C;
    Acc maxLogit, sumExp;
    softmaxStats(row, C, maxLogit, sumExp);
    Acc rowLoss = maxLogit + std::log(sumExp) - keep * Acc(row[labels.data[n]]);
    if (smoothing != 0.0) { // skipped at 0: the plain loss keeps its bits
      Acc sumLogits = 0;
      for (int64_t c = 0; c < C; ++c)
        sumLogits += Acc(row[c]);
      rowLoss -= spread * sumLogits;
    }
    total += rowLoss;
  }
  loss.data[0] = static_cast<T>(total / Acc(N));
}

// dlogits[n, c] = dy (softmax(logits[n])[c] - (1 - e) (c == labels[n]) - e / C) / N
template <typename T>
void crossEntropyGrad(TensorRef<const T> logits, TensorRef<const int32_t> labels,
                      TensorRef<const T> dy, TensorRef<T> dlogits, double smoothing) {
  const int64_t C = ops::crossEntropyGradContract(logits, labels, dy, dlogits, smoothing);
  const int64_t N = labels.numel();
  const Acc factor = Acc(dy.data[0]) / Acc(N);
  // keep * 1 and x - 0 are exact: at e = 0 this is the plain gradient, bit for bit.
  const Acc keep = Acc(1) - Acc(smoothing), spread = Acc(smoothing) / Acc(C);
  for (int64_t n = 0; n < N; ++n) {
    const T *row = logits.data + n * C;
    Acc maxLogit, sumExp;
    softmaxStats(row, C, maxLogit, sumExp);
    for (int64_t c = 0; c < C; ++c) {
      const Acc p = std::exp(Acc(row[c]) - maxLogit) / sumExp;
      const Acc onehot = c == labels.data[n] ? keep : 0.0;
      dlogits.data[n * C + c] = static_cast<T>(factor * (p - onehot - spread));
    }
  }
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void crossEntropy<T>(TensorRef<const T>, TensorRef<const int32_t>, TensorRef<T>,        \
                                double);                                                           \
  template void crossEntropyGrad<T>(TensorRef<const T>, TensorRef<const int32_t>,                  \
                                    TensorRef<const T>, TensorRef<T>, double);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: rows in parallel, float softmax (util::fastExp)
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using util::fastExp;
using util::rowGrain;
using util::sumFloats;

namespace {

// exps[c] = exp(row[c] - max) (the max-subtracted softmax numerators, all
// <= 1) for c < C; returns max and their sum through the arguments.
void softmaxNumerators(const float *row, int64_t C, float *exps, float &maxLogit,
                       float &sumExp) {
  maxLogit = row[0];
  for (int64_t c = 1; c < C; ++c)
    maxLogit = std::max(maxLogit, row[c]);
  for (int64_t c = 0; c < C; ++c)
    exps[c] = fastExp(row[c] - maxLogit);
  sumExp = sumFloats(exps, C);
}

} // namespace

// Per-row losses in parallel, then their mean in row order (in double): the
// same sum for every thread count.
void crossEntropy(TensorRef<const float> logits, TensorRef<const int32_t> labels,
                  TensorRef<float> loss, double smoothing) {
  const int64_t C = ops::crossEntropyContract(logits, labels, loss, smoothing);
  const double keep = 1.0 - smoothing, spread = smoothing / static_cast<double>(C);
  const int64_t N = labels.numel();
  std::vector<double> rowLoss(static_cast<size_t>(N));
  parallelFor(0, N, rowGrain(C), [&](int64_t n0, int64_t n1) {
    std::vector<float> exps(static_cast<size_t>(C));
    for (int64_t n = n0; n < n1; ++n) {
      const float *row = logits.data + n * C;
      float maxLogit, sumExp;
      softmaxNumerators(row, C, exps.data(), maxLogit, sumExp);
      double loss = static_cast<double>(maxLogit) + std::log(static_cast<double>(sumExp)) -
                    keep * static_cast<double>(row[labels.data[n]]);
      if (smoothing != 0.0) { // skipped at 0: the plain loss keeps its bits
        double sumLogits = 0.0;
        for (int64_t c = 0; c < C; ++c)
          sumLogits += static_cast<double>(row[c]);
        loss -= spread * sumLogits;
      }
      rowLoss[n] = loss;
    }
  });
  double total = 0.0;
  for (double l : rowLoss)
    total += l;
  loss.data[0] = static_cast<float>(total / static_cast<double>(N));
}

// dlogits[n, c] = dy (softmax(logits[n])[c] - (1 - e) (c == labels[n]) - e / C) / N
void crossEntropyGrad(TensorRef<const float> logits, TensorRef<const int32_t> labels,
                      TensorRef<const float> dy, TensorRef<float> dlogits, double smoothing) {
  const int64_t C = ops::crossEntropyGradContract(logits, labels, dy, dlogits, smoothing);
  const int64_t N = labels.numel();
  const double factorD = static_cast<double>(dy.data[0]) / static_cast<double>(N);
  const float factor = static_cast<float>(factorD);
  // At e = 0: labelShift == factor and shift == 0, so x - 0 keeps the plain gradient's bits.
  const float labelShift = static_cast<float>(factorD * (1.0 - smoothing));
  const float shift = static_cast<float>(factorD * smoothing / static_cast<double>(C));
  parallelFor(0, N, rowGrain(C), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const float *row = logits.data + n * C;
      float *out = dlogits.data + n * C;
      // The numerators go straight into the output row, then get scaled.
      float maxLogit, sumExp;
      softmaxNumerators(row, C, out, maxLogit, sumExp);
      const float scale = factor / sumExp;
      for (int64_t c = 0; c < C; ++c)
        out[c] = out[c] * scale - shift;
      out[labels.data[n]] -= labelShift;
    }
  });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

// Operands logits, labels (i32).
void runCrossEntropy(const OpContext &c) {
  ref::crossEntropy<float>(c.in(0), c.inI32(1), c.out(0), attrs::CrossEntropy{c.op()}.smoothing());
}
void runFastCrossEntropy(const OpContext &c) {
  cpu::crossEntropy(c.in(0), c.inI32(1), c.out(0), attrs::CrossEntropy{c.op()}.smoothing());
}

// Operands logits, labels (i32), dy.
void runCrossEntropyGrad(const OpContext &c) {
  ref::crossEntropyGrad<float>(c.in(0), c.inI32(1), c.in(2), c.out(0),
                               attrs::CrossEntropyGrad{c.op()}.smoothing());
}
void checkCrossEntropyGrad(const OpContext &c) {
  crossEntropyGradContract<float>(c.in(0), c.inI32(1), c.in(2), c.out(0),
                                  attrs::CrossEntropyGrad{c.op()}.smoothing());
}
void runFastCrossEntropyGrad(const OpContext &c) {
  cpu::crossEntropyGrad(c.in(0), c.inI32(1), c.in(2), c.out(0),
                        attrs::CrossEntropyGrad{c.op()}.smoothing());
}

} // namespace

template <> void registerOps<OpCode::CrossEntropy>(OpRegistry &registry) {
  registry.add(OpCode::CrossEntropy, {runCrossEntropy, nullptr, runFastCrossEntropy});
  registry.add(OpCode::CrossEntropyGrad,
               {runCrossEntropyGrad, checkCrossEntropyGrad, runFastCrossEntropyGrad});
}

} // namespace stringrt::ops
