// Reference kernels of the generator ops: generator_exp, generator_exp_grad,
// commutator_norm, commutator_norm_grad.
#include "stringrt/reference/PositionKernels.h"

#include "PositionLinalg.h"
#include "PositionUtil.h"

#include <string>
#include <vector>

namespace stringrt::ref {
namespace {

using linalg::Matrix;
using position::concat;
using position::leadingCount;
using position::leadingShape;

// The generators [K, d, d] as K double matrices.
template <typename T> std::vector<Matrix> readGenerators(const char *what, TensorRef<const T> g) {
  checkRank((std::string(what) + ": 'generators'").c_str(), g, 3);
  const int64_t count = g.dim(0), d = g.dim(1);
  check(count >= 1 && d >= 1 && g.dim(2) == d, what,
        "'generators' must be [K, d, d] with K, d >= 1, got " + shapeToString(g.shape));
  std::vector<Matrix> mats(static_cast<size_t>(count), Matrix(static_cast<size_t>(d * d)));
  for (int64_t k = 0; k < count; ++k)
    for (int64_t i = 0; i < d * d; ++i)
      mats[k][i] = g[k * d * d + i];
  return mats;
}

// Checks r [..., K] against K generators; returns the number of leading
// indices p of r.
template <typename T>
int64_t checkCoefficients(const char *what, TensorRef<const T> r, int64_t count) {
  check(r.rank() >= 1 && r.dim(-1) == count, what,
        "'r' must be [..., " + std::to_string(count) + "] (one coefficient per generator), got " +
            shapeToString(r.shape));
  return leadingCount(r.shape, 1);
}

// A = sum_k r[p, k] L_k
template <typename T>
Matrix combination(TensorRef<const T> r, int64_t p, const std::vector<Matrix> &gens) {
  const int64_t count = static_cast<int64_t>(gens.size());
  Matrix a(gens[0].size(), 0.0);
  for (int64_t k = 0; k < count; ++k) {
    const double c = r[p * count + k];
    for (size_t i = 0; i < a.size(); ++i)
      a[i] += c * gens[k][i];
  }
  return a;
}

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

// R[p] = exp(sum_k r[p, k] L_k).
template <typename T>
void generatorExp(TensorRef<const T> r, TensorRef<const T> generators, TensorRef<T> rotations) {
  const std::vector<Matrix> gens = readGenerators<T>("generator_exp", generators);
  const int64_t d = generators.dim(1);
  const int64_t positions = checkCoefficients<T>("generator_exp", r, generators.dim(0));
  checkShape("generator_exp: result", rotations, concat(leadingShape(r.shape, 1), {d, d}));
  for (int64_t p = 0; p < positions; ++p) {
    const Matrix e = linalg::expm(combination<T>(r, p, gens), d);
    for (int64_t i = 0; i < d * d; ++i)
      rotations[p * d * d + i] = static_cast<T>(e[i]);
  }
}

// dA(p) = top-right block of exp([[A^T, dR], [0, A^T]]); dL_k = sum_p r[p, k] dA(p).
template <typename T>
void generatorExpGrad(TensorRef<const T> r, TensorRef<const T> generators,
                      TensorRef<const T> dy, TensorRef<T> dgenerators) {
  const std::vector<Matrix> gens = readGenerators<T>("generator_exp_grad", generators);
  const int64_t count = generators.dim(0), d = generators.dim(1);
  const int64_t positions = checkCoefficients<T>("generator_exp_grad", r, count);
  checkShape("generator_exp_grad: 'dy'", dy, concat(leadingShape(r.shape, 1), {d, d}));
  checkShape("generator_exp_grad: result 'dgenerators'", dgenerators, generators.shape);
  std::vector<Matrix> sum(static_cast<size_t>(count), Matrix(static_cast<size_t>(d * d), 0.0));
  const int64_t n = 2 * d;
  for (int64_t p = 0; p < positions; ++p) {
    const Matrix at = linalg::transpose(combination<T>(r, p, gens), d);
    Matrix block(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) {
        block[i * n + j] = at[i * d + j];                                      // top-left A^T
        block[(d + i) * n + (d + j)] = at[i * d + j];                          // bottom-right A^T
        block[i * n + (d + j)] = static_cast<double>(dy[(p * d + i) * d + j]); // top-right dR
      }
    const Matrix e = linalg::expm(block, n);
    for (int64_t k = 0; k < count; ++k) {
      const double c = r[p * count + k];
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < d; ++j)
          sum[k][i * d + j] += c * e[i * n + (d + j)];
    }
  }
  for (int64_t k = 0; k < count; ++k)
    for (int64_t i = 0; i < d * d; ++i)
      dgenerators[k * d * d + i] = static_cast<T>(sum[k][i]);
}

// y = max_{a<b} ||L_a L_b - L_b L_a||_F.
template <typename T> void commutatorNorm(TensorRef<const T> generators, TensorRef<T> y) {
  const std::vector<Matrix> gens = readGenerators<T>("commutator_norm", generators);
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
  const std::vector<Matrix> gens = readGenerators<T>("commutator_norm_grad", generators);
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
  template void generatorExp<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);             \
  template void generatorExpGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,    \
                                    TensorRef<T>);                                                 \
  template void commutatorNorm<T>(TensorRef<const T>, TensorRef<T>);                               \
  template void commutatorNormGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref
