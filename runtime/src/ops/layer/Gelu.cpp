// pe.gelu and its gradient pe.gelu_grad (PELayerElementwiseOps.td), erf form or, with
// `approximate`, tanh form: the shape contract, the reference kernels, the
// fast kernels and the registration (ops/OpLibrary.h). The kernels'
// declarations are in stringrt/ops/LayerOps.h; stringc's generated kernels
// of these ops are CpuGen/ElementwiseGen.cpp's, checked here before they
// run. pe.linear_gelu's kernels call these.
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/LayerOps.h"

#include <cmath>
#include <string>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkShape;
using ref::TensorRef;

// gelu: the result has x's shape.
template <typename T> void geluContract(const TensorRef<const T> &x, const TensorRef<T> &y) {
  checkShape("gelu: result", y, x.shape);
}

// gelu_grad: dy and dx have x's shape.
template <typename T>
void geluGradContract(const TensorRef<const T> &x, const TensorRef<const T> &dy,
                      const TensorRef<T> &dx) {
  checkShape("gelu_grad: dy", dy, x.shape);
  checkShape("gelu_grad: dx", dx, x.shape);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;

namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)
constexpr double kGeluC = 0.044715;

double geluValue(double x, bool approximate) {
  if (approximate)
    return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / kSqrt2));
}

double geluDerivative(double x, bool approximate) {
  if (approximate) {
    const double t = std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluC * x * x);
  }
  const double cdf = 0.5 * (1.0 + std::erf(x / kSqrt2));
  const double pdf = std::exp(-0.5 * x * x) * kInvSqrt2Pi;
  return cdf + x * pdf;
}

} // namespace

template <typename T> void gelu(TensorRef<const T> x, bool approximate, TensorRef<T> y) {
  ops::geluContract(x, y);
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i)
    y.data[i] = static_cast<T>(geluValue(x.data[i], approximate));
}

template <typename T>
void geluGrad(TensorRef<const T> x, TensorRef<const T> dy, bool approximate, TensorRef<T> dx) {
  ops::geluGradContract(x, dy, dx);
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i)
    dx.data[i] = static_cast<T>(Acc(dy.data[i]) * geluDerivative(x.data[i], approximate));
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void gelu<T>(TensorRef<const T>, bool, TensorRef<T>);                                   \
  template void geluGrad<T>(TensorRef<const T>, TensorRef<const T>, bool, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: elements in parallel, float arithmetic
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using util::kElementGrain;

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
  ops::geluContract(x, y);
  parallelFor(0, x.numel(), kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      y.data[i] = geluValue(x.data[i], approximate);
  });
}

void geluGrad(TensorRef<const float> x, TensorRef<const float> dy, bool approximate,
              TensorRef<float> dx) {
  ops::geluGradContract(x, dy, dx);
  parallelFor(0, x.numel(), kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      dx.data[i] = dy.data[i] * geluDerivative(x.data[i], approximate);
  });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runGelu(const OpContext &c) {
  ref::gelu<float>(c.in(0), attrs::Gelu{c.op()}.approximate(), c.out(0));
}
void checkGelu(const OpContext &c) { geluContract<float>(c.in(0), c.out(0)); }
void runFastGelu(const OpContext &c) {
  cpu::gelu(c.in(0), attrs::Gelu{c.op()}.approximate(), c.out(0));
}

void runGeluGrad(const OpContext &c) {
  ref::geluGrad<float>(c.in(0), c.in(1), attrs::GeluGrad{c.op()}.approximate(), c.out(0));
}
void checkGeluGrad(const OpContext &c) { geluGradContract<float>(c.in(0), c.in(1), c.out(0)); }
void runFastGeluGrad(const OpContext &c) {
  cpu::geluGrad(c.in(0), c.in(1), attrs::GeluGrad{c.op()}.approximate(), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::Gelu>(OpRegistry &registry) {
  registry.add(OpCode::Gelu, {runGelu, checkGelu, runFastGelu});
  registry.add(OpCode::GeluGrad, {runGeluGrad, checkGeluGrad, runFastGeluGrad});
}

} // namespace stringrt::ops
