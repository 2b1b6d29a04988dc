// pe.select_token and its gradient pe.select_token_grad (PELayerOps.td: one
// token of each sequence, a ViT's class token before its head): the shape
// contract, the reference kernels (every kernel set runs them: there is no
// fast variant) and the registration (ops/OpLibrary.h). The kernels'
// declarations are in stringrt/ops/LayerOps.h; stringc's generated kernels
// of these ops are CpuGen/TokenGen.cpp's, checked here before they run.
#include "../OpLibrary.h"

#include "stringrt/ops/LayerOps.h"

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

// select_token: x [B, T, D], 0 <= index < T, the result [B, D].
template <typename T>
void selectTokenContract(const TensorRef<const T> &x, int64_t index, const TensorRef<T> &y) {
  checkRank("select_token: x", x, 3);
  check(index >= 0 && index < x.dim(1), "select_token",
        "index " + std::to_string(index) + " out of range [0, " + std::to_string(x.dim(1)) + ")");
  checkShape("select_token: result", y, {x.dim(0), x.dim(2)});
}

// select_token_grad: dx [B, T, D], 0 <= index < T, dy [B, D].
template <typename T>
void selectTokenGradContract(const TensorRef<const T> &dy, int64_t index, const TensorRef<T> &dx) {
  checkRank("select_token_grad: dx", dx, 3);
  check(index >= 0 && index < dx.dim(1), "select_token_grad",
        "index " + std::to_string(index) + " out of range [0, " + std::to_string(dx.dim(1)) + ")");
  checkShape("select_token_grad: dy", dy, {dx.dim(0), dx.dim(2)});
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// y[b, :] = x[b, index, :]
template <typename T> void selectToken(TensorRef<const T> x, int64_t index, TensorRef<T> y) {
  ops::selectTokenContract(x, index, y);
  const int64_t B = x.dim(0), Tn = x.dim(1), D = x.dim(2);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t d = 0; d < D; ++d)
      y.data[b * D + d] = x.data[(b * Tn + index) * D + d];
}

// dx[b, t, :] = dy[b, :] if t == index else 0
template <typename T> void selectTokenGrad(TensorRef<const T> dy, int64_t index, TensorRef<T> dx) {
  ops::selectTokenGradContract(dy, index, dx);
  const int64_t B = dx.dim(0), Tn = dx.dim(1), D = dx.dim(2);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tn; ++t)
      for (int64_t d = 0; d < D; ++d)
        dx.data[(b * Tn + t) * D + d] = t == index ? dy.data[b * D + d] : T(0);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void selectToken<T>(TensorRef<const T>, int64_t, TensorRef<T>);                         \
  template void selectTokenGrad<T>(TensorRef<const T>, int64_t, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runSelectToken(const OpContext &c) {
  ref::selectToken<float>(c.in(0), c.op().getInt("index"), c.out(0));
}
void checkSelectToken(const OpContext &c) {
  selectTokenContract<float>(c.in(0), c.op().getInt("index"), c.out(0));
}

void runSelectTokenGrad(const OpContext &c) {
  ref::selectTokenGrad<float>(c.in(0), c.op().getInt("index"), c.out(0));
}
void checkSelectTokenGrad(const OpContext &c) {
  selectTokenGradContract<float>(c.in(0), c.op().getInt("index"), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::SelectToken>(OpRegistry &registry) {
  registry.add(OpCode::SelectToken, {runSelectToken, checkSelectToken});
  registry.add(OpCode::SelectTokenGrad, {runSelectTokenGrad, checkSelectTokenGrad});
}

} // namespace stringrt::ops
