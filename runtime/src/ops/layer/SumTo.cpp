// pe.sum_to (PELayerElementwiseOps.td: the sum over the leading dims down to a
// trailing suffix of x's shape, the adjoint of a broadcast, made by
// pe-autodiff and not differentiated itself): the shape contract, the reference and fast kernels
// and the registration (ops/OpLibrary.h). The kernels' declarations are in stringrt/ops/LayerOps.h;
// stringc's generated kernels of sum_to are CpuGen/ReductionGen.cpp's, checked here before they
// run.
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/ops/LayerOps.h"

#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::TensorRef;

// sum_to: the result's shape is a trailing suffix of x's.
template <typename T> void sumToContract(const TensorRef<const T> &x, const TensorRef<T> &y) {
  ref::check(ref::layer::isTrailingSuffix(y.shape, x.shape), "sum_to",
             "result shape " + ref::shapeToString(y.shape) + " is not a trailing suffix of " +
                 ref::shapeToString(x.shape));
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: sums in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;

// y[s] = sum_l x[l, s]
template <typename T> void sumTo(TensorRef<const T> x, TensorRef<T> y) {
  ops::sumToContract(x, y);
  const int64_t n = x.numel(), ny = y.numel();
  std::vector<Acc> acc(static_cast<size_t>(ny), Acc(0));
  for (int64_t i = 0; i < n; ++i)
    acc[i % ny] += x.data[i];
  for (int64_t j = 0; j < ny; ++j)
    y.data[j] = static_cast<T>(acc[j]);
}

template void sumTo<float>(TensorRef<const float>, TensorRef<float>);
template void sumTo<double>(TensorRef<const double>, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernel: column blocks in parallel, each column in row order in
// double (the reference's order, so its results bit for bit)
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

void sumTo(TensorRef<const float> x, TensorRef<float> y) {
  ops::sumToContract(x, y);
  const int64_t ny = y.numel();
  if (ny == 0)
    return;
  // x as [rows, ny]: column sums in row order, in double (the reference's order).
  util::columnSums(x.data, x.numel() / ny, ny, y.data);
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

// The target shape is the result's (batch substituted).
void runSumTo(const OpContext &c) { ref::sumTo<float>(c.in(0), c.out(0)); }
void checkSumTo(const OpContext &c) { sumToContract<float>(c.in(0), c.out(0)); }
void runFastSumTo(const OpContext &c) { cpu::sumTo(c.in(0), c.out(0)); }

} // namespace

template <> void registerOps<OpCode::SumTo>(OpRegistry &registry) {
  registry.add(OpCode::SumTo, {runSumTo, checkSumTo, runFastSumTo});
}

} // namespace stringrt::ops
