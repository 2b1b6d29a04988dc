// Reference kernels: mean.
#include "stringrt/reference/LayerKernels.h"

#include "KernelChecks.h"
#include "LayerKernelUtil.h"

#include <vector>

namespace stringrt::ref {

using layer::Acc;
using layer::extent;

// axis: y[o, r] = (1/n) sum_s x[o, s, r]; all: y = (1/numel) sum x.
template <typename T>
void mean(TensorRef<const T> x, std::optional<int64_t> axis, TensorRef<T> y) {
  if (!axis) {
    checkShape("mean: result", y, {});
    Acc sum = 0;
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i)
      sum += x.data[i];
    y.data[0] = static_cast<T>(sum / Acc(n));
    return;
  }
  const int64_t a = *axis;
  check(a >= 0 && a < x.rank(), "mean",
        "axis " + std::to_string(a) + " out of range for shape " + shapeToString(x.shape));
  std::vector<int64_t> expected = x.shape;
  expected.erase(expected.begin() + a);
  checkShape("mean: result", y, expected);
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

#define STRINGRT_INSTANTIATE(T)                                                         \
  template void mean<T>(TensorRef<const T>, std::optional<int64_t>, TensorRef<T>);

STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
