// pe.scale (PELayerElementwiseOps.td: y = factor x + bias, elementwise; no gradient op
// of its own: its VJP is pe.scale of dy by the factor, without bias): the
// shape contract, the reference and fast kernels and the registration
// (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/LayerOps.h; stringc's generated kernels of scale are
// CpuGen/ElementwiseGen.cpp's, checked here before they run.
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/LayerOps.h"

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::TensorRef;

// scale: the result has x's shape.
template <typename T> void scaleContract(const TensorRef<const T> &x, const TensorRef<T> &y) {
  ref::checkShape("scale: result", y, x.shape);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;

// y = factor x + bias
template <typename T> void scale(TensorRef<const T> x, double factor, double bias, TensorRef<T> y) {
  ops::scaleContract(x, y);
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i)
    y.data[i] = static_cast<T>(factor * Acc(x.data[i]) + bias);
}

template void scale<float>(TensorRef<const float>, double, double, TensorRef<float>);
template void scale<double>(TensorRef<const double>, double, double, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernel: elements in parallel, in double as the reference
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

void scale(TensorRef<const float> x, double factor, double bias, TensorRef<float> y) {
  ops::scaleContract(x, y);
  const float *in = x.data;
  float *out = y.data;
  parallelFor(0, x.numel(), util::kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      out[i] = static_cast<float>(factor * static_cast<double>(in[i]) + bias);
  });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runScale(const OpContext &c) {
  ref::scale<float>(c.in(0), attrs::Scale{c.op()}.factor(), attrs::Scale{c.op()}.bias(), c.out(0));
}
void checkScale(const OpContext &c) { scaleContract<float>(c.in(0), c.out(0)); }
void runFastScale(const OpContext &c) {
  cpu::scale(c.in(0), attrs::Scale{c.op()}.factor(), attrs::Scale{c.op()}.bias(), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::Scale>(OpRegistry &registry) {
  registry.add(OpCode::Scale, {runScale, checkScale, runFastScale});
}

} // namespace stringrt::ops
