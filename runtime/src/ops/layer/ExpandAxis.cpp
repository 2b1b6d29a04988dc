// pe.expand_axis (PELayerElementwiseOps.td: x repeated along a new dim, the adjoint of
// a sum over it, made by pe-autodiff and not differentiated itself): the
// shape contract, the reference kernel (every kernel set runs it: there is
// no fast variant; pe.mean_grad's reference kernel calls it) and the
// registration (ops/OpLibrary.h). The kernel's declaration is in
// stringrt/ops/LayerOps.h.
#include "../OpLibrary.h"

#include "../../reference/LayerKernelUtil.h"

#include "stringrt/ops/LayerOps.h"

#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::TensorRef;

// expand_axis: 0 <= axis <= rank(x), size > 0, the result x's shape with
// `size` inserted at `axis`.
template <typename T>
void expandAxisContract(const TensorRef<const T> &x, int64_t axis, int64_t size,
                        const TensorRef<T> &y) {
  ref::check(axis >= 0 && axis <= x.rank(), "expand_axis",
             "axis " + std::to_string(axis) + " out of range for shape " +
                 ref::shapeToString(x.shape));
  ref::check(size > 0, "expand_axis", "size must be > 0, got " + std::to_string(size));
  std::vector<int64_t> expected = x.shape;
  expected.insert(expected.begin() + axis, size);
  ref::checkShape("expand_axis: result", y, expected);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernel
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// y[o, s, r] = x[o, r] with o the dims before `axis`, r those from `axis` on.
template <typename T>
void expandAxis(TensorRef<const T> x, int64_t axis, int64_t size, TensorRef<T> y) {
  ops::expandAxisContract(x, axis, size, y);
  const int64_t outer = layer::extent(x.shape, 0, static_cast<size_t>(axis));
  const int64_t inner = layer::extent(x.shape, static_cast<size_t>(axis), x.shape.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t s = 0; s < size; ++s)
      for (int64_t r = 0; r < inner; ++r)
        y.data[(o * size + s) * inner + r] = x.data[o * inner + r];
}

template void expandAxis<float>(TensorRef<const float>, int64_t, int64_t, TensorRef<float>);
template void expandAxis<double>(TensorRef<const double>, int64_t, int64_t, TensorRef<double>);

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapter and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runExpandAxis(const OpContext &c) {
  ref::expandAxis<float>(c.in(0), c.op().getInt("axis"), c.op().getInt("size"), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::ExpandAxis>(OpRegistry &registry) {
  registry.add(OpCode::ExpandAxis, {runExpandAxis});
}

} // namespace stringrt::ops
