// pe.commutator_norm and its gradient pe.commutator_norm_grad
// (PEPositionOps.td: y = max_{a<b} ||L_a L_b - L_b L_a||_F, the largest
// commutator of the learned generators, which vit_generators penalises so
// that pe-factor-generators' rotations stay close): the shape contracts,
// the reference kernels (every kernel set runs them: there is no fast
// variant) and the registration (ops/OpLibrary.h). The kernels'
// declarations are in stringrt/ops/PositionOps.h; the generators' part of
// the contract, shared with pe.generator_exp, in Generators.h. stringc
// generates no CPU kernel for these ops.
#include "../OpLibrary.h"

#include "../../reference/PositionLinalg.h"
#include "../../reference/PositionUtil.h"
#include "Generators.h"

#include "stringrt/ops/PositionOps.h"

#include <string>
#include <utility>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkShape;
using ref::TensorRef;

// Both ops: generators [K, d, d] with K >= 2, d >= 1 (a pair to commute).
template <typename T> void commutatorOperands(const char *op, const TensorRef<const T> &g) {
  generators::contract<T>(op, g);
  check(g.dim(0) >= 2, op, "needs K >= 2 generators, got " + std::to_string(g.dim(0)));
}

// commutator_norm: generators as above, the result a scalar.
template <typename T>
void commutatorNormContract(const TensorRef<const T> &generators, const TensorRef<T> &y) {
  commutatorOperands<T>("commutator_norm", generators);
  checkShape("commutator_norm: result", y, {});
}

// commutator_norm_grad: generators as above, dy a scalar, the result the
// shape of generators.
template <typename T>
void commutatorNormGradContract(const TensorRef<const T> &generators, const TensorRef<const T> &dy,
                                const TensorRef<T> &dgenerators) {
  commutatorOperands<T>("commutator_norm_grad", generators);
  checkShape("commutator_norm_grad: 'dy'", dy, {});
  checkShape("commutator_norm_grad: result 'dgenerators'", dgenerators, generators.shape);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: the commutators in double
//===----------------------------------------------------------------------===//

namespace stringrt::ref {
namespace {

using linalg::Matrix;

// The commutator of every pair (a, b), a < b, in row-major pair order, and
// the index of the first one of largest Frobenius norm.
struct Commutators {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  std::vector<Matrix> c;
  std::vector<double> norms;
  size_t best = 0;
};

Commutators commutators(const std::vector<Matrix> &gens, int64_t d) {
  Commutators out;
  out.pairs = position::upperPairs(static_cast<int64_t>(gens.size()));
  for (const auto &[a, b] : out.pairs) {
    out.c.push_back(linalg::combine(1.0, linalg::matmul(gens[a], gens[b], d), -1.0,
                                    linalg::matmul(gens[b], gens[a], d)));
    out.norms.push_back(linalg::frobenius(out.c.back()));
  }
  for (size_t m = 1; m < out.norms.size(); ++m)
    if (out.norms[m] > out.norms[out.best]) // strict: ties keep the earlier pair
      out.best = m;
  return out;
}

} // namespace

// y = max_{a<b} ||L_a L_b - L_b L_a||_F.
template <typename T> void commutatorNorm(TensorRef<const T> generators, TensorRef<T> y) {
  ops::commutatorNormContract<T>(generators, y);
  const std::vector<Matrix> gens = ops::generators::read<T>(generators);
  const Commutators c = commutators(gens, generators.dim(1));
  y[0] = static_cast<T>(c.norms[c.best]);
}

// G = dy C / ||C||_F at the first maximising pair (a, b):
// dL_a = G L_b^T - L_b^T G, dL_b = L_a^T G - G L_a^T, 0 elsewhere (all 0 if C = 0).
template <typename T>
void commutatorNormGrad(TensorRef<const T> generators, TensorRef<const T> dy,
                        TensorRef<T> dgenerators) {
  ops::commutatorNormGradContract<T>(generators, dy, dgenerators);
  const std::vector<Matrix> gens = ops::generators::read<T>(generators);
  const int64_t d = generators.dim(1);
  for (int64_t i = 0; i < dgenerators.numel(); ++i)
    dgenerators[i] = T(0);
  const Commutators c = commutators(gens, d);
  const double norm = c.norms[c.best];
  if (norm == 0.0)
    return;
  const auto [a, b] = c.pairs[c.best];
  const Matrix g = linalg::combine(static_cast<double>(dy[0]) / norm, c.c[c.best], 0.0, c.c[c.best]);
  const Matrix la = gens[a], lb = gens[b];
  const Matrix laT = linalg::transpose(la, d), lbT = linalg::transpose(lb, d);
  const Matrix da = linalg::combine(1.0, linalg::matmul(g, lbT, d), -1.0, linalg::matmul(lbT, g, d));
  const Matrix db = linalg::combine(1.0, linalg::matmul(laT, g, d), -1.0, linalg::matmul(g, laT, d));
  for (int64_t i = 0; i < d * d; ++i) {
    dgenerators[a * d * d + i] = static_cast<T>(da[i]);
    dgenerators[b * d * d + i] = static_cast<T>(db[i]);
  }
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void commutatorNorm<T>(TensorRef<const T>, TensorRef<T>);                               \
  template void commutatorNormGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runCommutatorNorm(const OpContext &c) { ref::commutatorNorm<float>(c.in(0), c.out(0)); }

void runCommutatorNormGrad(const OpContext &c) {
  ref::commutatorNormGrad<float>(c.in(0), c.in(1), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::CommutatorNorm>(OpRegistry &registry) {
  registry.add(OpCode::CommutatorNorm, {runCommutatorNorm});
  registry.add(OpCode::CommutatorNormGrad, {runCommutatorNormGrad});
}

} // namespace stringrt::ops
