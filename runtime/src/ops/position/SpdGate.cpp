// pe.spd_gate and its gradient pe.spd_gate_grad (PEPositionOps.td: y =
// x exp(gamma), the positive diagonal of the polar decomposition, gamma's
// shape a trailing suffix of x's and repeated over its leading dims): the
// shape contracts, the reference kernels, the fast kernels and the
// registration (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/PositionOps.h. stringc generates no CPU kernel for these ops.
//
// The fast kernels' arithmetic is the reference's, value for value: exp in
// double, each product in double, and dgamma sums each column in row order
// in double, the reference's order. Their results are therefore bit for bit
// the reference's, for any thread count.
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"
#include "../../reference/PositionUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/PositionOps.h"

#include <cmath>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkShape;
using ref::shapeToString;
using ref::TensorRef;

// Both ops: gamma's shape a (non-empty) trailing suffix of x's.
template <typename T>
void gateContract(const char *op, const TensorRef<const T> &x, const TensorRef<const T> &gamma) {
  check(gamma.rank() >= 1 && ref::position::isTrailingSuffix(gamma.shape, x.shape), op,
        "the shape of 'gamma' " + shapeToString(gamma.shape) +
            " must be a trailing suffix of the shape of 'x' " + shapeToString(x.shape));
}

// spd_gate: x, gamma as above, the result the shape of x.
template <typename T>
void spdGateContract(const TensorRef<const T> &x, const TensorRef<const T> &gamma,
                     const TensorRef<T> &y) {
  gateContract<T>("spd_gate", x, gamma);
  checkShape("spd_gate: result", y, x.shape);
}

// spd_gate_grad: x, gamma as above, dy and dx the shape of x, dgamma that
// of gamma.
template <typename T>
void spdGateGradContract(const TensorRef<const T> &x, const TensorRef<const T> &gamma,
                         const TensorRef<const T> &dy, const TensorRef<T> &dx,
                         const TensorRef<T> &dgamma) {
  gateContract<T>("spd_gate_grad", x, gamma);
  checkShape("spd_gate_grad: 'dy'", dy, x.shape);
  checkShape("spd_gate_grad: result 'dx'", dx, x.shape);
  checkShape("spd_gate_grad: result 'dgamma'", dgamma, gamma.shape);
}

// exp(gamma) in double, the factors of both ops' kernels.
template <typename T> std::vector<double> gateFactors(const TensorRef<const T> &gamma) {
  std::vector<double> e(static_cast<size_t>(gamma.numel()));
  for (int64_t i = 0; i < gamma.numel(); ++i)
    e[i] = std::exp(static_cast<double>(gamma[i]));
  return e;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: in double, each result rounded once to T
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

// y = x exp(gamma), gamma repeated over the leading dims of x.
template <typename T>
void spdGate(TensorRef<const T> x, TensorRef<const T> gamma, TensorRef<T> y) {
  ops::spdGateContract<T>(x, gamma, y);
  const std::vector<double> e = ops::gateFactors<T>(gamma);
  const int64_t g = gamma.numel();
  for (int64_t i = 0; i < x.numel(); ++i)
    y[i] = static_cast<T>(static_cast<double>(x[i]) * e[i % g]);
}

// dx = dy exp(gamma); dgamma = sum_lead dy x exp(gamma).
template <typename T>
void spdGateGrad(TensorRef<const T> x, TensorRef<const T> gamma, TensorRef<const T> dy,
                 TensorRef<T> dx, TensorRef<T> dgamma) {
  ops::spdGateGradContract<T>(x, gamma, dy, dx, dgamma);
  const std::vector<double> e = ops::gateFactors<T>(gamma);
  const int64_t g = gamma.numel();
  std::vector<double> dg(static_cast<size_t>(g), 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double grad = dy[i];
    dx[i] = static_cast<T>(grad * e[i % g]);
    dg[i % g] += grad * static_cast<double>(x[i]) * e[i % g];
  }
  for (int64_t i = 0; i < g; ++i)
    dgamma[i] = static_cast<T>(dg[i]);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void spdGate<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);                  \
  template void spdGateGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,         \
                               TensorRef<T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: the rows (and dgamma's column blocks) in parallel
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using util::rowGrain;

void spdGate(TensorRef<const float> x, TensorRef<const float> gamma, TensorRef<float> y) {
  ops::spdGateContract<float>(x, gamma, y);
  const std::vector<double> e = ops::gateFactors<float>(gamma);
  const int64_t g = gamma.numel();
  if (g == 0 || x.numel() == 0)
    return;
  const float *in = x.data;
  float *out = y.data;
  parallelFor(0, x.numel() / g, rowGrain(g), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < g; ++j)
        out[r * g + j] = static_cast<float>(static_cast<double>(in[r * g + j]) * e[j]);
  });
}

void spdGateGrad(TensorRef<const float> x, TensorRef<const float> gamma,
                 TensorRef<const float> dy, TensorRef<float> dx, TensorRef<float> dgamma) {
  ops::spdGateGradContract<float>(x, gamma, dy, dx, dgamma);
  const std::vector<double> e = ops::gateFactors<float>(gamma);
  const int64_t g = gamma.numel();
  if (g == 0)
    return;
  const int64_t rows = x.numel() / g;
  parallelFor(0, rows, rowGrain(g), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < g; ++j)
        dx.data[r * g + j] = static_cast<float>(static_cast<double>(dy.data[r * g + j]) * e[j]);
  });
  // dgamma[j] = sum_r dy x e_j, each column in row order (column blocks in parallel).
  parallelFor(0, g, 16, [&](int64_t j0, int64_t j1) {
    std::vector<double> acc(static_cast<size_t>(j1 - j0), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = j0; j < j1; ++j)
        acc[j - j0] += static_cast<double>(dy.data[r * g + j]) *
                       static_cast<double>(x.data[r * g + j]) * e[j];
    for (int64_t j = j0; j < j1; ++j)
      dgamma.data[j] = static_cast<float>(acc[j - j0]);
  });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runSpdGate(const OpContext &c) { ref::spdGate<float>(c.in(0), c.in(1), c.out(0)); }

void runFastSpdGate(const OpContext &c) { cpu::spdGate(c.in(0), c.in(1), c.out(0)); }

void runSpdGateGrad(const OpContext &c) {
  ref::spdGateGrad<float>(c.in(0), c.in(1), c.in(2), c.out(0), c.out(1));
}

void runFastSpdGateGrad(const OpContext &c) {
  cpu::spdGateGrad(c.in(0), c.in(1), c.in(2), c.out(0), c.out(1));
}

} // namespace

template <> void registerOps<OpCode::SpdGate>(OpRegistry &registry) {
  registry.add(OpCode::SpdGate, {runSpdGate, nullptr, runFastSpdGate});
  registry.add(OpCode::SpdGateGrad, {runSpdGateGrad, nullptr, runFastSpdGateGrad});
}

} // namespace stringrt::ops
