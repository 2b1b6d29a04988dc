// pe.class_token and its gradient pe.class_token_grad (PELayerOps.td: a
// learned token put before the tokens of x): the shape contract, the
// reference kernels (every kernel set runs them: there is no fast variant)
// and the registration (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/LayerOps.h; stringc's generated kernels of these ops are
// CpuGen/TokenGen.cpp's, checked here before they run.
#include "../OpLibrary.h"

#include "../../reference/LayerKernelUtil.h"

#include "stringrt/ops/LayerOps.h"

#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkRank;
using ref::checkShape;
using ref::TensorRef;

// class_token: x [B, N, D], cls [D], the result [B, N + 1, D].
template <typename T>
void classTokenContract(const TensorRef<const T> &x, const TensorRef<const T> &cls,
                        const TensorRef<T> &y) {
  checkRank("class_token: x", x, 3);
  checkShape("class_token: cls", cls, {x.dim(2)});
  checkShape("class_token: result", y, {x.dim(0), x.dim(1) + 1, x.dim(2)});
}

// class_token_grad: dy [B, N + 1, D] (N >= 0), dx [B, N, D], dcls [D].
template <typename T>
void classTokenGradContract(const TensorRef<const T> &dy, const TensorRef<T> &dx,
                            const TensorRef<T> &dcls) {
  checkRank("class_token_grad: dy", dy, 3);
  const int64_t N = dy.dim(1) - 1;
  check(N >= 0, "class_token_grad", "dy has no class token (dimension 1 is 0)");
  checkShape("class_token_grad: dx", dx, {dy.dim(0), N, dy.dim(2)});
  checkShape("class_token_grad: dcls", dcls, {dy.dim(2)});
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: sums in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;

// y[b, 0, :] = cls, y[b, n + 1, :] = x[b, n, :]
template <typename T>
void classToken(TensorRef<const T> x, TensorRef<const T> cls, TensorRef<T> y) {
  ops::classTokenContract(x, cls, y);
  const int64_t B = x.dim(0), N = x.dim(1), D = x.dim(2);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t d = 0; d < D; ++d)
      y.data[(b * (N + 1)) * D + d] = cls.data[d];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d)
        y.data[(b * (N + 1) + n + 1) * D + d] = x.data[(b * N + n) * D + d];
  }
}

// dx[b, n, :] = dy[b, n + 1, :],  dcls = sum_b dy[b, 0, :]
template <typename T>
void classTokenGrad(TensorRef<const T> dy, TensorRef<T> dx, TensorRef<T> dcls) {
  ops::classTokenGradContract(dy, dx, dcls);
  const int64_t B = dy.dim(0), N = dy.dim(1) - 1, D = dy.dim(2);
  std::vector<Acc> acc(static_cast<size_t>(D), 0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t d = 0; d < D; ++d)
      acc[d] += dy.data[(b * (N + 1)) * D + d];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d)
        dx.data[(b * N + n) * D + d] = dy.data[(b * (N + 1) + n + 1) * D + d];
  }
  for (int64_t d = 0; d < D; ++d)
    dcls.data[d] = static_cast<T>(acc[d]);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void classToken<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);               \
  template void classTokenGrad<T>(TensorRef<const T>, TensorRef<T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runClassToken(const OpContext &c) { ref::classToken<float>(c.in(0), c.in(1), c.out(0)); }
void checkClassToken(const OpContext &c) { classTokenContract<float>(c.in(0), c.in(1), c.out(0)); }

void runClassTokenGrad(const OpContext &c) {
  ref::classTokenGrad<float>(c.in(0), c.out(0), c.out(1));
}
void checkClassTokenGrad(const OpContext &c) {
  classTokenGradContract<float>(c.in(0), c.out(0), c.out(1));
}

} // namespace

template <> void registerOps<OpCode::ClassToken>(OpRegistry &registry) {
  registry.add(OpCode::ClassToken, {runClassToken, checkClassToken});
  registry.add(OpCode::ClassTokenGrad, {runClassTokenGrad, checkClassTokenGrad});
}

} // namespace stringrt::ops
