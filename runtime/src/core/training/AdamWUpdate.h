// The AdamW update of Optimizer::step over a range of elements, in double,
// rounded to float as it is stored:
//   g = scale grad,  m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g g,
//   w -= lr (m / bc1 / (sqrt(v / bc2) + eps) + wd w).
// With AVX2 four elements at a time: the same IEEE operations in the same
// order (no FMA: each product and sum rounded as in the scalar loop), so the
// same bits; the scalar loop spent a step's optimizer time mostly waiting on
// its three divisions and a square root per element.
#pragma once

#include <cstddef>

namespace stringrt::detail {

struct AdamWConstants {
  double lr, weightDecay, gradScale; // gradScale: the clipping factor
  double beta1, beta2, eps;
  double biasCorrection1, biasCorrection2; // 1 - beta^t
};

// Elements [begin, end) of params, m and v from grads.
void adamwUpdate(const AdamWConstants &c, const float *grads, float *params, float *m, float *v,
                 size_t begin, size_t end);

// For tests: the element-at-a-time loop alone (what CPUs without AVX2 run).
void adamwUpdateScalar(const AdamWConstants &c, const float *grads, float *params, float *m,
                       float *v, size_t begin, size_t end);

} // namespace stringrt::detail
