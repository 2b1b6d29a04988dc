// pe.skew and its gradient pe.skew_grad (PEPositionOps.td: the
// skew-symmetric matrices S [..., dim, dim] of the upper-triangle
// parameters [..., dim(dim-1)/2], the generators of pe.cayley): the shape
// contracts, the reference kernels (every kernel set runs them: there is no
// fast variant) and the registration (ops/OpLibrary.h). The kernels'
// declarations are in stringrt/ops/PositionOps.h. stringc generates no CPU
// kernel for these ops.
#include "../OpLibrary.h"

#include "../../reference/PositionUtil.h"

#include "stringrt/ops/PositionOps.h"

#include <string>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkShape;
using ref::shapeToString;
using ref::TensorRef;
using ref::position::concat;
using ref::position::leadingShape;

// skew: dim >= 2, params [..., dim(dim-1)/2], the result [..., dim, dim].
// Returns the parameter count.
template <typename T>
int64_t skewContract(const TensorRef<const T> &params, int64_t dim, const TensorRef<T> &s) {
  ref::position::checkSkewDim("skew", dim);
  const int64_t count = dim * (dim - 1) / 2;
  check(params.rank() >= 1 && params.dim(-1) == count, "skew",
        "'params' must be [..., " + std::to_string(count) + "] for dim " + std::to_string(dim) +
            ", got " + shapeToString(params.shape));
  checkShape("skew: result", s, concat(leadingShape(params.shape, 1), {dim, dim}));
  return count;
}

// skew_grad: dim >= 2, dy [..., dim, dim], the result [..., dim(dim-1)/2].
// Returns the parameter count.
template <typename T>
int64_t skewGradContract(const TensorRef<const T> &dy, int64_t dim, const TensorRef<T> &dparams) {
  ref::position::checkSkewDim("skew_grad", dim);
  const int64_t count = dim * (dim - 1) / 2;
  check(dy.rank() >= 2 && dy.dim(-1) == dim && dy.dim(-2) == dim, "skew_grad",
        "'dy' must be [..., " + std::to_string(dim) + ", " + std::to_string(dim) + "], got " +
            shapeToString(dy.shape));
  checkShape("skew_grad: result 'dparams'", dparams, concat(leadingShape(dy.shape, 2), {count}));
  return count;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: copies and differences in double, rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using position::leadingCount;
using position::upperPairs;

// S[.., i, j] = params[.., k], S[.., j, i] = -params[.., k] for pair k = (i, j).
template <typename T> void skew(TensorRef<const T> params, int64_t dim, TensorRef<T> s) {
  const int64_t count = ops::skewContract<T>(params, dim, s);
  const auto pairs = upperPairs(dim);
  const int64_t lead = leadingCount(params.shape, 1);
  for (int64_t l = 0; l < lead; ++l) {
    T *m = s.data + l * dim * dim;
    for (int64_t i = 0; i < dim * dim; ++i)
      m[i] = T(0);
    for (int64_t k = 0; k < count; ++k) {
      const auto [i, j] = pairs[k];
      m[i * dim + j] = params[l * count + k];
      m[j * dim + i] = -params[l * count + k];
    }
  }
}

// dparams[.., k] = dy[.., i, j] - dy[.., j, i].
template <typename T> void skewGrad(TensorRef<const T> dy, int64_t dim, TensorRef<T> dparams) {
  const int64_t count = ops::skewGradContract<T>(dy, dim, dparams);
  const auto pairs = upperPairs(dim);
  const int64_t lead = leadingCount(dy.shape, 2);
  for (int64_t l = 0; l < lead; ++l) {
    const T *g = dy.data + l * dim * dim;
    for (int64_t k = 0; k < count; ++k) {
      const auto [i, j] = pairs[k];
      dparams[l * count + k] =
          static_cast<T>(static_cast<double>(g[i * dim + j]) - static_cast<double>(g[j * dim + i]));
    }
  }
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void skew<T>(TensorRef<const T>, int64_t, TensorRef<T>);                                \
  template void skewGrad<T>(TensorRef<const T>, int64_t, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runSkew(const OpContext &c) { ref::skew<float>(c.in(0), c.op().getInt("dim"), c.out(0)); }

void runSkewGrad(const OpContext &c) {
  ref::skewGrad<float>(c.in(0), c.op().getInt("dim"), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::Skew>(OpRegistry &registry) {
  registry.add(OpCode::Skew, {runSkew});
  registry.add(OpCode::SkewGrad, {runSkewGrad});
}

} // namespace stringrt::ops
