// Reference kernels: mean softmax cross-entropy and its gradient.
#include "stringrt/reference/LayerKernels.h"

#include "KernelChecks.h"
#include "LayerKernelUtil.h"

#include <algorithm>
#include <cmath>
#include <vector>

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
  const int64_t C = checks::crossEntropyInputs("cross_entropy", logits, labels, smoothing);
  checkShape("cross_entropy: result", loss, {});
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
  const int64_t C = checks::crossEntropyGrad(logits, labels, dy, dlogits, smoothing);
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

#define STRINGRT_INSTANTIATE(T)                                                              \
  template void crossEntropy<T>(TensorRef<const T>, TensorRef<const int32_t>, TensorRef<T>,   \
                                double);                                                     \
  template void crossEntropyGrad<T>(TensorRef<const T>, TensorRef<const int32_t>,            \
                                    TensorRef<const T>, TensorRef<T>, double);

STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
