// Fast gelu kernels, forward and backward: elements in parallel, float
// arithmetic.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "KernelUtil.h"

#include <cmath>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f; // sqrt(2 / pi)
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1 / sqrt(2 pi)
constexpr float kGeluC = 0.044715f;

float geluValue(float x, bool approximate) {
  if (approximate)
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x)));
  return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
}

float geluDerivative(float x, bool approximate) {
  if (approximate) {
    const float t = std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x));
    return 0.5f * (1.0f + t) +
           0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluC * x * x);
  }
  const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
  const float pdf = std::exp(-0.5f * x * x) * kInvSqrt2Pi;
  return cdf + x * pdf;
}

} // namespace

void gelu(TensorRef<const float> x, bool approximate, TensorRef<float> y) {
  checkShape("gelu: result", y, x.shape);
  parallelFor(0, x.numel(), kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      y.data[i] = geluValue(x.data[i], approximate);
  });
}

void geluGrad(TensorRef<const float> x, TensorRef<const float> dy, bool approximate,
              TensorRef<float> dx) {
  checkShape("gelu_grad: dy", dy, x.shape);
  checkShape("gelu_grad: dx", dx, x.shape);
  parallelFor(0, x.numel(), kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      dx.data[i] = dy.data[i] * geluDerivative(x.data[i], approximate);
  });
}

} // namespace stringrt::cpu
