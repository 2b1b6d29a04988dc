// pe.relu and its gradient pe.relu_grad (PELayerElementwiseOps.td): the
// shape contract, the reference kernels (every kernel set runs them: there
// is no fast variant, the generated kernels cover relu in `cpu` packages)
// and the registration (ops/OpLibrary.h). The kernels are this file's own:
// no header declares them; the tests run them through the registration
// (runtime/tests/OpCall.h, runtime/tests/ops/layer/ReluTest.cpp).
#include "../OpLibrary.h"

#include "stringrt/reference/Tensor.h"

#include <cmath>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkShape;
using ref::TensorRef;

// relu: the result has x's shape.
template <typename T> void reluContract(const TensorRef<const T> &x, const TensorRef<T> &y) {
  checkShape("relu: result", y, x.shape);
}

// relu_grad: dy and dx have x's shape.
template <typename T>
void reluGradContract(const TensorRef<const T> &x, const TensorRef<const T> &dy,
                      const TensorRef<T> &dx) {
  checkShape("relu_grad: dy", dy, x.shape);
  checkShape("relu_grad: dx", dx, x.shape);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

template <typename T> void relu(TensorRef<const T> x, TensorRef<T> y) {
  reluContract(x, y);
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    const T v = x.data[i];
    y.data[i] = (v > T(0) || std::isnan(v)) ? v : T(0);
  }
}

template <typename T>
void reluGrad(TensorRef<const T> x, TensorRef<const T> dy, TensorRef<T> dx) {
  reluGradContract(x, dy, dx);
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i)
    dx.data[i] = x.data[i] > T(0) ? dy.data[i] : T(0);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runRelu(const OpContext &c) { relu<float>(c.in(0), c.out(0)); }
void checkRelu(const OpContext &c) { reluContract<float>(c.in(0), c.out(0)); }

void runReluGrad(const OpContext &c) { reluGrad<float>(c.in(0), c.in(1), c.out(0)); }
void checkReluGrad(const OpContext &c) { reluGradContract<float>(c.in(0), c.in(1), c.out(0)); }

} // namespace

template <> void registerOps<OpCode::Relu>(OpRegistry &registry) {
  registry.add(OpCode::Relu, {runRelu, checkRelu});
  registry.add(OpCode::ReluGrad, {runReluGrad, checkReluGrad});
}

} // namespace stringrt::ops
