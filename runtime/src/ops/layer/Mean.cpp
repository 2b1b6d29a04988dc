// pe.mean and its gradient pe.mean_grad (PELayerElementwiseOps.td: the mean over one
// axis or over every element; mean_grad repeats dy along that axis, or over
// every element, divided by the count known at run time): the shape
// contract, the reference kernels (every kernel set runs them: there is no
// fast variant) and the registration (ops/OpLibrary.h). mean_grad's
// reference kernel is its adapter, on expand_axis's. The kernel's
// declaration is in stringrt/ops/LayerOps.h.
#include "../OpLibrary.h"

#include "../../reference/LayerKernelUtil.h"

#include "stringrt/ops/LayerOps.h"

#include <optional>
#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::TensorRef;

// mean: with an axis, 0 <= axis < rank(x) and the result x's shape without
// it; without, the result a scalar.
template <typename T>
void meanContract(const TensorRef<const T> &x, std::optional<int64_t> axis, const TensorRef<T> &y) {
  if (!axis) {
    ref::checkShape("mean: result", y, {});
    return;
  }
  const int64_t a = *axis;
  ref::check(a >= 0 && a < x.rank(), "mean",
             "axis " + std::to_string(a) + " out of range for shape " +
                 ref::shapeToString(x.shape));
  std::vector<int64_t> expected = x.shape;
  expected.erase(expected.begin() + a);
  ref::checkShape("mean: result", y, expected);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel: sums in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;
using layer::extent;

// axis: y[o, r] = (1/n) sum_s x[o, s, r]; all: y = (1/numel) sum x.
template <typename T> void mean(TensorRef<const T> x, std::optional<int64_t> axis, TensorRef<T> y) {
  ops::meanContract(x, axis, y);
  if (!axis) {
    Acc sum = 0;
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i)
      sum += x.data[i];
    y.data[0] = static_cast<T>(sum / Acc(n));
    return;
  }
  const int64_t a = *axis;
  const int64_t outer = extent(x.shape, 0, static_cast<size_t>(a));
  const int64_t n = x.shape[static_cast<size_t>(a)];
  const int64_t inner = extent(x.shape, static_cast<size_t>(a) + 1, x.shape.size());
  std::vector<Acc> acc(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t r = 0; r < inner; ++r)
      acc[r] = 0;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t r = 0; r < inner; ++r)
        acc[r] += x.data[(o * n + s) * inner + r];
    for (int64_t r = 0; r < inner; ++r)
      y.data[o * inner + r] = static_cast<T>(acc[r] / Acc(n));
  }
}

template void mean<float>(TensorRef<const float>, std::optional<int64_t>, TensorRef<float>);
template void mean<double>(TensorRef<const double>, std::optional<int64_t>, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkShape;
using ref::shapeToString;

void runMean(const OpContext &c) {
  ref::mean<float>(c.in(0), c.op().getOptionalInt("axis"), c.out(0));
}

// dx = dy repeated along `axis` (over every element without it) / N, with N
// the size of that axis of x at run time (numel(x) without axis).
void runMeanGrad(const OpContext &c) {
  TensorRef<const float> x = c.in(0);
  TensorRef<const float> dy = c.in(1);
  TensorRef<float> dx = c.out(0);
  checkShape("mean_grad dx", dx, x.shape);
  std::optional<int64_t> axis = c.op().getOptionalInt("axis");
  double count = 0;
  if (axis) {
    if (*axis < 0 || *axis >= x.rank())
      c.fail("axis " + std::to_string(*axis) + " out of range for x of shape " +
             shapeToString(x.shape));
    count = static_cast<double>(x.dim(static_cast<int>(*axis)));
    ref::expandAxis<float>(dy, *axis, x.dim(static_cast<int>(*axis)), dx);
    for (int64_t i = 0; i < dx.numel(); ++i)
      dx[i] = static_cast<float>(static_cast<double>(dx[i]) / count);
  } else {
    checkShape("mean_grad dy", dy, {});
    count = static_cast<double>(x.numel());
    float value = static_cast<float>(static_cast<double>(dy[0]) / count);
    for (int64_t i = 0; i < dx.numel(); ++i)
      dx[i] = value;
  }
}

} // namespace

template <> void registerOps<OpCode::Mean>(OpRegistry &registry) {
  registry.add(OpCode::Mean, {runMean});
  registry.add(OpCode::MeanGrad, {runMeanGrad});
}

} // namespace stringrt::ops
