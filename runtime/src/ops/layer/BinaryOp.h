// What pe.add, pe.sub and pe.mul share, as the dialect's PE_BinaryOp class
// (PELayerElementwiseOps.td) gives them one definition: the shape contract of
// trailing-suffix broadcasting and the loops of their reference and fast
// kernels, each op file (Add.cpp, Sub.cpp, Mul.cpp) passing its arithmetic.
// Private to the op library.
//
// Trailing-suffix broadcasting in row-major order is a modulo: element i of
// a [L..., S...] tensor meets element i % numel(S) of the [S...] one; for
// the fast kernels the big operand is a stack of rows, each of the small
// operand's size. A float sum, difference or product computed in double and
// rounded once is the correctly rounded float result, so the fast kernels'
// plain float operations give the reference's results bit for bit, for any
// thread count.
#pragma once

#include "../../cpu/KernelUtil.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/reference/Tensor.h"

#include <string>
#include <vector>

namespace stringrt::ops::binary {

using ref::TensorRef;

// The shape contract: one operand's shape is a trailing suffix of the
// other's, the result has the larger one.
template <typename T>
void contract(const char *kernel, const TensorRef<const T> &lhs, const TensorRef<const T> &rhs,
              const TensorRef<T> &y) {
  const bool lhsBig = lhs.rank() >= rhs.rank();
  const std::vector<int64_t> &big = lhsBig ? lhs.shape : rhs.shape;
  const std::vector<int64_t> &small = lhsBig ? rhs.shape : lhs.shape;
  ref::check(ref::layer::isTrailingSuffix(small, big), kernel,
             "shapes " + ref::shapeToString(lhs.shape) + " and " + ref::shapeToString(rhs.shape) +
                 ": neither is a trailing suffix of the other");
  ref::checkShape((std::string(kernel) + ": result").c_str(), y, big);
}

// The reference kernel: y[i] = op(lhs[i % |lhs|], rhs[i % |rhs|]) in double,
// rounded once to T.
template <typename T, typename Op>
void reference(const char *kernel, TensorRef<const T> lhs, TensorRef<const T> rhs, TensorRef<T> y,
               Op op) {
  using Acc = ref::layer::Acc;
  contract(kernel, lhs, rhs, y);
  const int64_t n = y.numel(), nl = lhs.numel(), nr = rhs.numel();
  for (int64_t i = 0; i < n; ++i)
    y.data[i] = static_cast<T>(op(Acc(lhs.data[i % nl]), Acc(rhs.data[i % nr])));
}

// The fast kernel: one flat pass when the shapes are equal, else rows of
// the small operand's size in parallel, in float.
template <typename Op>
void fast(const char *kernel, TensorRef<const float> lhs, TensorRef<const float> rhs,
          TensorRef<float> y, Op op) {
  using cpu::util::kElementGrain;
  using cpu::util::rowGrain;
  contract(kernel, lhs, rhs, y);
  const int64_t n = y.numel(), nl = lhs.numel(), nr = rhs.numel();
  if (n == 0)
    return;
  const float *a = lhs.data, *b = rhs.data;
  float *out = y.data;
  if (nl == n && nr == n) { // same size: one flat pass
    cpu::parallelFor(0, n, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        out[i] = op(a[i], b[i]);
    });
    return;
  }
  // Rows of the small operand's size m; the big one steps by a row.
  const int64_t m = nl < nr ? nl : nr, rows = n / m;
  const bool lhsSmall = nl < nr;
  cpu::parallelFor(0, rows, rowGrain(m), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float *o = out + r * m;
      if (lhsSmall) {
        const float *br = b + r * m;
        for (int64_t j = 0; j < m; ++j)
          o[j] = op(a[j], br[j]);
      } else {
        const float *ar = a + r * m;
        for (int64_t j = 0; j < m; ++j)
          o[j] = op(ar[j], b[j]);
      }
    }
  });
}

} // namespace stringrt::ops::binary
