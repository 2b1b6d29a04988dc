// pe.cayley_weight and its gradient pe.cayley_weight_grad (PEFusedOps.td:
// the Cayley transform as a weight matrix, W = U^T with U = (I - S)(I +
// S)^-1, which pe-hoist builds once per step per S so that pe.cayley
// becomes a pe.linear; the gradient's optional `weight` operand, the
// forward's W, is for the CUDA kernels and the CPU's do not read it): the
// shape contracts, the reference kernels, the fast kernels and the
// registration (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/FusedOps.h. stringc generates no CPU kernel for these ops.
//
// The fast kernels keep double and the reference's algorithm (one inverse
// of I + S, no GEMM): the inverse by Gauss-Jordan with partial pivoting
// (the reference's pivots) and the d x d products with unit-stride rows
// (cpu/DenseMatrices.h), which the compiler vectorises; they are
// single-threaded, so every thread count gives the same bits.
#include "../OpLibrary.h"

#include "../../cpu/DenseMatrices.h"
#include "../../reference/PositionLinalg.h"

#include "stringrt/ops/FusedOps.h"

#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::checkRank;
using ref::checkShape;
using ref::TensorRef;

// Both ops: s [D, D]. Returns D.
template <typename T> int64_t cayleyWeightOperand(const char *op, const TensorRef<const T> &s) {
  checkRank((std::string(op) + ": 's'").c_str(), s, 2);
  const int64_t d = s.dim(0);
  checkShape((std::string(op) + ": 's'").c_str(), s, {d, d});
  return d;
}

// cayley_weight: s [D, D], the result [D, D]. Returns D.
template <typename T>
int64_t cayleyWeightContract(const TensorRef<const T> &s, const TensorRef<T> &w) {
  const int64_t d = cayleyWeightOperand<T>("cayley_weight", s);
  checkShape("cayley_weight: result", w, {d, d});
  return d;
}

// cayley_weight_grad: s and dw [D, D], the result [D, D]. Returns D.
template <typename T>
int64_t cayleyWeightGradContract(const TensorRef<const T> &s, const TensorRef<const T> &dw,
                                 const TensorRef<T> &ds) {
  const int64_t d = cayleyWeightOperand<T>("cayley_weight_grad", s);
  checkShape("cayley_weight_grad: 'dw'", dw, {d, d});
  checkShape("cayley_weight_grad: result", ds, {d, d});
  return d;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: an LU of I + S and its inverse, in double
//===----------------------------------------------------------------------===//

namespace stringrt::ref {
namespace {

template <typename T>
linalg::Matrix identityPlus(double sign, const TensorRef<const T> &s, int64_t d) {
  linalg::Matrix m = linalg::identity(d);
  for (int64_t i = 0; i < d * d; ++i)
    m[i] += sign * static_cast<double>(s[i]);
  return m;
}

// M = (I + S)^-1 and U = (I - S) M, in double (s [d, d], checked).
template <typename T>
void cayleyFactors(const char *what, const TensorRef<const T> &s, int64_t d, linalg::Matrix &m,
                   linalg::Matrix &u) {
  const linalg::LU lu =
      linalg::luFactor(identityPlus(1.0, s, d), d, (std::string(what) + ": I + S").c_str());
  m = linalg::identity(d);
  std::vector<double> column(static_cast<size_t>(d));
  for (int64_t c = 0; c < d; ++c) {
    for (int64_t r = 0; r < d; ++r)
      column[r] = r == c ? 1.0 : 0.0;
    linalg::luSolve(lu, column.data());
    for (int64_t r = 0; r < d; ++r)
      m[r * d + c] = column[r];
  }
  u = linalg::matmul(identityPlus(-1.0, s, d), m, d);
}

} // namespace

// W = U^T.
template <typename T> void cayleyWeight(TensorRef<const T> s, TensorRef<T> w) {
  const int64_t d = ops::cayleyWeightContract<T>(s, w);
  linalg::Matrix m, u;
  cayleyFactors("cayley_weight", s, d, m, u);
  for (int64_t r = 0; r < d; ++r)
    for (int64_t c = 0; c < d; ++c)
      w[r * d + c] = static_cast<T>(u[c * d + r]);
}

// ds = -(M dw (I + U))^T.
template <typename T>
void cayleyWeightGrad(TensorRef<const T> s, TensorRef<const T> dw, TensorRef<T> ds) {
  const int64_t d = ops::cayleyWeightGradContract<T>(s, dw, ds);
  linalg::Matrix m, u;
  cayleyFactors("cayley_weight_grad", s, d, m, u);
  linalg::Matrix g(static_cast<size_t>(d * d));
  for (int64_t i = 0; i < d * d; ++i)
    g[i] = static_cast<double>(dw[i]);
  const linalg::Matrix prod =
      linalg::matmul(linalg::matmul(m, g, d), linalg::combine(1.0, linalg::identity(d), 1.0, u), d);
  for (int64_t r = 0; r < d; ++r)
    for (int64_t c = 0; c < d; ++c)
      ds[r * d + c] = static_cast<T>(-prod[c * d + r]);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void cayleyWeight<T>(TensorRef<const T>, TensorRef<T>);                                 \
  template void cayleyWeightGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: Gauss-Jordan and vectorised products, in double
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {
namespace {

using Mat = std::vector<double>;

// M = (I + S)^-1 in double.
Mat cayleyInverse(const char *what, const TensorRef<const float> &s, int64_t d) {
  Mat a(static_cast<size_t>(d * d)), m(static_cast<size_t>(d * d), 0.0);
  for (int64_t i = 0; i < d * d; ++i)
    a[i] = static_cast<double>(s.data[i]);
  for (int64_t i = 0; i < d; ++i) {
    a[i * d + i] += 1.0;
    m[i * d + i] = 1.0;
  }
  if (!dense::solveInPlace(a.data(), m.data(), d, d))
    dense::singular(std::string(what) + ": I + S", d);
  return m;
}

} // namespace

void cayleyWeight(TensorRef<const float> s, TensorRef<float> w) {
  const int64_t d = ops::cayleyWeightContract<float>(s, w);
  const Mat m = cayleyInverse("cayley_weight", s, d);
  // W = U^T with U = (I - S) M = 2 M - I: W[r, c] = 2 M[c, r] - [r = c].
  for (int64_t r = 0; r < d; ++r)
    for (int64_t c = 0; c < d; ++c)
      w.data[r * d + c] = static_cast<float>(2.0 * m[c * d + r] - (r == c ? 1.0 : 0.0));
}

void cayleyWeightGrad(TensorRef<const float> s, TensorRef<const float> dw, TensorRef<float> ds) {
  const int64_t d = ops::cayleyWeightGradContract<float>(s, dw, ds);
  const Mat m = cayleyInverse("cayley_weight_grad", s, d);
  // ds = -(M dw (I + U))^T = -2 (M dw M)^T  (I + U = 2 M).
  Mat g(static_cast<size_t>(d * d)), t(g.size()), prod(g.size());
  for (int64_t i = 0; i < d * d; ++i)
    g[i] = static_cast<double>(dw.data[i]);
  dense::matmul(m.data(), g.data(), d, t.data());
  dense::matmul(t.data(), m.data(), d, prod.data());
  for (int64_t r = 0; r < d; ++r)
    for (int64_t c = 0; c < d; ++c)
      ds.data[r * d + c] = static_cast<float>(-2.0 * prod[c * d + r]);
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runCayleyWeight(const OpContext &c) { ref::cayleyWeight<float>(c.in(0), c.out(0)); }

void runFastCayleyWeight(const OpContext &c) { cpu::cayleyWeight(c.in(0), c.out(0)); }

// Operands s, dw and the optional weight, which the CPU kernels do not read.
void runCayleyWeightGrad(const OpContext &c) {
  ref::cayleyWeightGrad<float>(c.in(0), c.in(1), c.out(0));
}

void runFastCayleyWeightGrad(const OpContext &c) {
  cpu::cayleyWeightGrad(c.in(0), c.in(1), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::CayleyWeight>(OpRegistry &registry) {
  registry.add(OpCode::CayleyWeight, {runCayleyWeight, nullptr, runFastCayleyWeight});
  registry.add(OpCode::CayleyWeightGrad, {runCayleyWeightGrad, nullptr, runFastCayleyWeightGrad});
}

} // namespace stringrt::ops
