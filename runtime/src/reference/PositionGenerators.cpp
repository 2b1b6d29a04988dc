// Reference kernels of the generators' commutator: commutator_norm,
// commutator_norm_grad (generator_exp is in the op library,
// ops/position/GeneratorExp.cpp).
#include "stringrt/reference/PositionKernels.h"

#include "../ops/position/Generators.h"
#include "PositionLinalg.h"
#include "PositionUtil.h"

#include <string>
#include <vector>

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

void checkAtLeastTwo(const char *what, size_t count) {
  check(count >= 2, what, "needs K >= 2 generators, got " + std::to_string(count));
}

} // namespace

// y = max_{a<b} ||L_a L_b - L_b L_a||_F.
template <typename T> void commutatorNorm(TensorRef<const T> generators, TensorRef<T> y) {
  ops::generators::contract<T>("commutator_norm", generators);
  const std::vector<Matrix> gens = ops::generators::read<T>(generators);
  checkAtLeastTwo("commutator_norm", gens.size());
  checkShape("commutator_norm: result", y, {});
  const Commutators c = commutators(gens, generators.dim(1));
  y[0] = static_cast<T>(c.norms[c.best]);
}

// G = dy C / ||C||_F at the first maximising pair (a, b):
// dL_a = G L_b^T - L_b^T G, dL_b = L_a^T G - G L_a^T, 0 elsewhere (all 0 if C = 0).
template <typename T>
void commutatorNormGrad(TensorRef<const T> generators, TensorRef<const T> dy,
                        TensorRef<T> dgenerators) {
  ops::generators::contract<T>("commutator_norm_grad", generators);
  const std::vector<Matrix> gens = ops::generators::read<T>(generators);
  checkAtLeastTwo("commutator_norm_grad", gens.size());
  checkShape("commutator_norm_grad: 'dy'", dy, {});
  checkShape("commutator_norm_grad: result 'dgenerators'", dgenerators, generators.shape);
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
