// Fast mean softmax cross-entropy and its gradient, rows in parallel.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "KernelUtil.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

// The checks (and messages) of the reference kernels; returns C. Labels are
// validated up front, so no chunk can fail half way.
int64_t checkCrossEntropy(const std::string &kernel, const TensorRef<const float> &logits,
                          const TensorRef<const int32_t> &labels, double smoothing) {
  check(smoothing >= 0.0 && smoothing < 1.0, kernel.c_str(), // NaN fails too
        "smoothing " + std::to_string(smoothing) + " is out of range [0, 1)");
  checkHasLastDim(kernel + ": logits", logits);
  const int64_t C = logits.dim(-1);
  checkShape((kernel + ": labels").c_str(), labels,
             std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1));
  const int64_t N = labels.numel();
  check(N > 0, kernel.c_str(),
        "no positions to average over (labels " + ref::shapeToString(labels.shape) + ")");
  for (int64_t n = 0; n < N; ++n)
    check(labels.data[n] >= 0 && labels.data[n] < C, kernel.c_str(),
          "label " + std::to_string(labels.data[n]) + " at flat index " + std::to_string(n) +
              " is out of range [0, " + std::to_string(C) + ")");
  return C;
}

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
  const int64_t C = checkCrossEntropy("cross_entropy", logits, labels, smoothing);
  const double keep = 1.0 - smoothing, spread = smoothing / static_cast<double>(C);
  checkShape("cross_entropy: result", loss, {});
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
  const int64_t C = checkCrossEntropy("cross_entropy_grad", logits, labels, smoothing);
  checkShape("cross_entropy_grad: dy", dy, {});
  checkShape("cross_entropy_grad: dlogits", dlogits, logits.shape);
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
