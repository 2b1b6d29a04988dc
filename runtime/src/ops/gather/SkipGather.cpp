// pe.skip_gather and its gradient pe.skip_gather_grad (PEGatherOps.td:
// skip-n attention, whose one visible key makes it a per-head shift of v,
// as pe-skip-gather rewrites it): the shape contract, the reference kernels
// (every kernel set runs them: a copy has no fast variant) and the
// registration (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/GatherOps.h. stringc generates no CPU kernels for them.
#include "../OpLibrary.h"

#include "stringrt/ops/GatherOps.h"

#include <string>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkRank;
using ref::checkShape;
using ref::TensorRef;

struct SkipGeometry {
  int64_t batch, tokens, width, headDim;
};

// skip_gather (x = v, y the result) and skip_gather_grad (x = dy, y = dv):
// x [B, T, D], 'heads' > 0 dividing D, 'skip_base' >= 0, y the shape of x.
template <typename T>
SkipGeometry skipContract(const char *what, const TensorRef<const T> &x, int64_t heads,
                          int64_t skipBase, const TensorRef<T> &y) {
  checkRank(what, x, 3);
  const int64_t d = x.dim(2);
  check(heads > 0 && d % heads == 0, what,
        "'heads' (" + std::to_string(heads) + ") must be > 0 and divide the width " +
            std::to_string(d));
  check(skipBase >= 0, what, "'skip_base' must be >= 0, got " + std::to_string(skipBase));
  checkShape(what, y, x.shape);
  return {x.dim(0), x.dim(1), d, d / heads};
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: copies
//===----------------------------------------------------------------------===//

namespace stringrt::ref {
namespace {

// Copies head slices of `from` into `to`: token i of head s reads token
// i + shift(s) (shift = -(skipBase + s) forward, +(skipBase + s) backward),
// zeros where that token does not exist.
template <typename T>
void shiftHeads(const ops::SkipGeometry &g, const T *from, T *to, int64_t skipBase, int sign) {
  const int64_t heads = g.width / g.headDim;
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t i = 0; i < g.tokens; ++i)
      for (int64_t s = 0; s < heads; ++s) {
        const int64_t src = i + sign * (skipBase + s);
        T *out = to + (b * g.tokens + i) * g.width + s * g.headDim;
        if (src < 0 || src >= g.tokens) {
          for (int64_t m = 0; m < g.headDim; ++m)
            out[m] = T(0);
          continue;
        }
        const T *in = from + (b * g.tokens + src) * g.width + s * g.headDim;
        for (int64_t m = 0; m < g.headDim; ++m)
          out[m] = in[m];
      }
}

} // namespace

template <typename T>
void skipGather(TensorRef<const T> v, int64_t heads, int64_t skipBase, TensorRef<T> y) {
  const ops::SkipGeometry g = ops::skipContract("skip_gather", v, heads, skipBase, y);
  shiftHeads(g, v.data, y.data, skipBase, -1);
}

template <typename T>
void skipGatherGrad(TensorRef<const T> dy, int64_t heads, int64_t skipBase, TensorRef<T> dv) {
  const ops::SkipGeometry g = ops::skipContract("skip_gather_grad", dy, heads, skipBase, dv);
  shiftHeads(g, dy.data, dv.data, skipBase, +1);
}

#define STRINGRT_INSTANTIATE(T)                                                              \
  template void skipGather<T>(TensorRef<const T>, int64_t, int64_t, TensorRef<T>);           \
  template void skipGatherGrad<T>(TensorRef<const T>, int64_t, int64_t, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runSkipGather(const OpContext &c) {
  ref::skipGather<float>(c.in(0), c.op().getInt("heads"), c.op().getInt("skip_base"), c.out(0));
}

void runSkipGatherGrad(const OpContext &c) {
  ref::skipGatherGrad<float>(c.in(0), c.op().getInt("heads"), c.op().getInt("skip_base"),
                             c.out(0));
}

} // namespace

template <> void registerOps<OpCode::SkipGather>(OpRegistry &registry) {
  registry.add(OpCode::SkipGather, {runSkipGather});
  registry.add(OpCode::SkipGatherGrad, {runSkipGatherGrad});
}

} // namespace stringrt::ops
