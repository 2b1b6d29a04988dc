// pe.broadcast_to (PELayerElementwiseOps.td: x repeated over new leading dims, the
// adjoint of pe.sum_to, made by pe-autodiff and not differentiated itself):
// the shape contract, the reference kernel (every kernel set runs it: there
// is no fast variant) and the registration (ops/OpLibrary.h). The kernel's
// declaration is in stringrt/ops/LayerOps.h.
#include "../OpLibrary.h"

#include "../../reference/LayerKernelUtil.h"

#include "stringrt/ops/LayerOps.h"

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::TensorRef;

// broadcast_to: x's shape is a trailing suffix of the result's.
template <typename T> void broadcastToContract(const TensorRef<const T> &x, const TensorRef<T> &y) {
  ref::check(ref::layer::isTrailingSuffix(x.shape, y.shape), "broadcast_to",
             "shape " + ref::shapeToString(x.shape) +
                 " is not a trailing suffix of the result shape " + ref::shapeToString(y.shape));
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// y[l, s] = x[s]
template <typename T> void broadcastTo(TensorRef<const T> x, TensorRef<T> y) {
  ops::broadcastToContract(x, y);
  const int64_t n = y.numel(), nx = x.numel();
  for (int64_t i = 0; i < n; ++i)
    y.data[i] = x.data[i % nx];
}

template void broadcastTo<float>(TensorRef<const float>, TensorRef<float>);
template void broadcastTo<double>(TensorRef<const double>, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapter and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

// The target is the result; the optional `like` operand only carries the
// batch size, so it must have the result's shape.
void runBroadcastTo(const OpContext &c) {
  TensorRef<float> y = c.out(0);
  if (c.numOperands() > 1 && c.in(1).shape != y.shape)
    c.fail("'like' has shape " + ref::shapeToString(c.in(1).shape) + ", the result " +
           ref::shapeToString(y.shape));
  ref::broadcastTo<float>(c.in(0), y);
}

} // namespace

template <> void registerOps<OpCode::BroadcastTo>(OpRegistry &registry) {
  registry.add(OpCode::BroadcastTo, {runBroadcastTo});
}

} // namespace stringrt::ops
