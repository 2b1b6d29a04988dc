// pe.sparse_skew and its gradient pe.sparse_skew_grad (PEPositionOps.td: the
// skew-symmetric S [dim, dim] of parameters [K] on K upper-triangle pairs,
// the 'support', 0 elsewhere; pe.skew's sparse form, the generator of
// pe.cayley): the shape contracts, the reference kernels (every kernel set
// runs them: there is no fast variant) and the registration
// (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/PositionOps.h. stringc generates no CPU kernel for these ops.
#include "../OpLibrary.h"

#include "../../reference/PositionUtil.h"

#include "stringrt/ops/PositionOps.h"

#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkShape;
using ref::TensorRef;

// sparse_skew: dim >= 2, the support non-empty, strictly increasing and in
// [0, dim(dim-1)/2), params [K] (K its size), the result [dim, dim].
// Returns K.
template <typename T>
int64_t sparseSkewContract(const TensorRef<const T> &params, int64_t dim,
                           const std::vector<int64_t> &support, const TensorRef<T> &s) {
  ref::position::checkSkewDim("sparse_skew", dim);
  ref::position::checkSupport("sparse_skew", dim, support);
  const int64_t count = static_cast<int64_t>(support.size());
  checkShape("sparse_skew: 'params'", params, {count});
  checkShape("sparse_skew: result", s, {dim, dim});
  return count;
}

// sparse_skew_grad: sparse_skew's dim and support, dy [dim, dim], the result
// [K]. Returns K.
template <typename T>
int64_t sparseSkewGradContract(const TensorRef<const T> &dy, int64_t dim,
                               const std::vector<int64_t> &support,
                               const TensorRef<T> &dparams) {
  ref::position::checkSkewDim("sparse_skew_grad", dim);
  ref::position::checkSupport("sparse_skew_grad", dim, support);
  const int64_t count = static_cast<int64_t>(support.size());
  checkShape("sparse_skew_grad: 'dy'", dy, {dim, dim});
  checkShape("sparse_skew_grad: result 'dparams'", dparams, {count});
  return count;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: copies and differences in double, rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using position::upperPairs;

// S[i_m, j_m] = params[m], S[j_m, i_m] = -params[m], 0 elsewhere.
template <typename T>
void sparseSkew(TensorRef<const T> params, int64_t dim, const std::vector<int64_t> &support,
                TensorRef<T> s) {
  const int64_t count = ops::sparseSkewContract<T>(params, dim, support, s);
  const auto pairs = upperPairs(dim);
  for (int64_t i = 0; i < dim * dim; ++i)
    s[i] = T(0);
  for (int64_t m = 0; m < count; ++m) {
    const auto [i, j] = pairs[support[m]];
    s[i * dim + j] = params[m];
    s[j * dim + i] = -params[m];
  }
}

// dparams[m] = dy[i_m, j_m] - dy[j_m, i_m].
template <typename T>
void sparseSkewGrad(TensorRef<const T> dy, int64_t dim, const std::vector<int64_t> &support,
                    TensorRef<T> dparams) {
  const int64_t count = ops::sparseSkewGradContract<T>(dy, dim, support, dparams);
  const auto pairs = upperPairs(dim);
  for (int64_t m = 0; m < count; ++m) {
    const auto [i, j] = pairs[support[m]];
    dparams[m] =
        static_cast<T>(static_cast<double>(dy[i * dim + j]) - static_cast<double>(dy[j * dim + i]));
  }
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void sparseSkew<T>(TensorRef<const T>, int64_t, const std::vector<int64_t> &,           \
                              TensorRef<T>);                                                       \
  template void sparseSkewGrad<T>(TensorRef<const T>, int64_t, const std::vector<int64_t> &,       \
                                  TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runSparseSkew(const OpContext &c) {
  ref::sparseSkew<float>(c.in(0), c.op().getInt("dim"), c.op().getInts("support"), c.out(0));
}

void runSparseSkewGrad(const OpContext &c) {
  ref::sparseSkewGrad<float>(c.in(0), c.op().getInt("dim"), c.op().getInts("support"),
                             c.out(0));
}

} // namespace

template <> void registerOps<OpCode::SparseSkew>(OpRegistry &registry) {
  registry.add(OpCode::SparseSkew, {runSparseSkew});
  registry.add(OpCode::SparseSkewGrad, {runSparseSkewGrad});
}

} // namespace stringrt::ops
