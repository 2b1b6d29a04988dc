// Softmax rows of the fast attention kernels (Softmax.h).
#include "Softmax.h"

#include "KernelUtil.h"

#include <algorithm>
#include <cmath>

namespace stringrt::cpu::util {

void softmaxRow(float *row, int64_t visible, int64_t length, float *lse) {
  float maxScore = row[0];
  for (int64_t j = 1; j < visible; ++j)
    maxScore = std::max(maxScore, row[j]);
  for (int64_t j = 0; j < visible; ++j)
    row[j] = fastExp(row[j] - maxScore);
  const float sum = sumFloats(row, visible);
  const float inv = 1.0f / sum;
  if (lse)
    *lse = maxScore + std::log(sum);
  for (int64_t j = 0; j < visible; ++j)
    row[j] *= inv;
  std::fill(row + visible, row + length, 0.0f);
}

void softmaxBackwardRows(int64_t T, const float *p, float *dS) {
  for (int64_t i = 0; i < T; ++i) {
    const float *pRow = p + i * T;
    float *row = dS + i * T;
    float pdp = 0.0f;
    for (int64_t j = 0; j < T; ++j)
      pdp += pRow[j] * row[j];
    for (int64_t j = 0; j < T; ++j)
      row[j] = pRow[j] * (row[j] - pdp);
  }
}

} // namespace stringrt::cpu::util
