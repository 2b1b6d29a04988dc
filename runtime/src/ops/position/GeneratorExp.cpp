// pe.generator_exp and its gradient pe.generator_exp_grad (PEPositionOps.td:
// R[p] = exp(sum_k r[p, k] L_k), the matrix exponential of a combination
// of K learned generators L_k for every leading index p of r; the gradient
// the adjoint Frechet derivative): the shape contracts, the reference
// kernels, the fast kernels and the registration (ops/OpLibrary.h). The
// kernels' declarations are in stringrt/ops/PositionOps.h; the generators'
// part of the contract, shared with pe.commutator_norm, in Generators.h.
// stringc generates no CPU kernel for these ops.
//
// The fast kernels: the reference kernels (below) work in double with naive
// loops, one matrix after another; the fast ones keep double (see below)
// and the reference's algorithms, but
// - the d x d products run with unit-stride rows (i k j order), which the
//   compiler vectorises (4 doubles a vector with AVX2), and the Pade solve
//   is Gauss-Jordan with partial pivoting (DenseMatrices.h);
// - generator_exp's matrices (one per distinct offset after
//   pe-distinct-offsets: 169 for vit_generators) are spread over the
//   runtime's pool; each result depends only on its own matrix, so every
//   thread count gives the same bits;
// - generator_exp_grad's Frechet derivative is the top-right block of
//   exp([[A^T, E], [0, A^T]]) (the reference's formula), computed on the
//   block-upper-triangular pairs (X, Y) = [[X, Y], [0, X]] directly:
//   (X1, Y1)(X2, Y2) = (X1 X2, X1 Y2 + Y1 X2), three d x d products where
//   the reference multiplies 2d x 2d matrices (eight), and the Pade solve
//   (N1, N2) Z = (P1, P2) as N1 Z1 = P1, N1 Z2 = P2 - N2 Z1 with one
//   factorisation of N1. The squarings are the reference's: the 1-norm of
//   the block matrix is max over columns of the left half (|X| column sums)
//   and the right half (|Y| + |X| column sums). dL_k = sum_p r[p, k] dA(p)
//   is summed in p order after the parallel part.
//
// Why double stays: the matrices are few and small (the products are
// d^3 = 4096 multiply-adds at d = 16), so the exponentials cost well under 1%
// of a vit_generators step in double (docs/results.md), and double keeps
// the results within a float rounding of the reference (tests:
// runtime/tests/cpu/MatrixFunctionsTest.cpp), where an f32 Pade with two or
// three squarings loses ~1e-6 relative and the Frechet sum over 169 offsets
// more.
#include "../OpLibrary.h"

#include "../../cpu/DenseMatrices.h"
#include "../../cpu/KernelUtil.h"
#include "../../reference/PositionLinalg.h"
#include "../../reference/PositionUtil.h"
#include "Generators.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/PositionOps.h"

#include <algorithm>
#include <cmath>
#include <string>
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
using ref::position::concat;
using ref::position::leadingCount;
using ref::position::leadingShape;

// The sizes of both ops: K generators of d x d, and the leading indices p
// of r.
struct GeneratorExpShape {
  int64_t count = 0, d = 0, positions = 0;
};

// Both ops: generators [K, d, d] with K, d >= 1, r [..., K].
template <typename T>
GeneratorExpShape generatorExpOperands(const char *op, const TensorRef<const T> &r,
                                       const TensorRef<const T> &generators) {
  GeneratorExpShape s;
  s.d = generators::contract<T>(op, generators);
  s.count = generators.dim(0);
  check(r.rank() >= 1 && r.dim(-1) == s.count, op,
        "'r' must be [..., " + std::to_string(s.count) +
            "] (one coefficient per generator), got " + shapeToString(r.shape));
  s.positions = leadingCount(r.shape, 1);
  return s;
}

// generator_exp: r and generators as above, the result [..., d, d] (r's
// leading dims).
template <typename T>
GeneratorExpShape generatorExpContract(const TensorRef<const T> &r,
                                       const TensorRef<const T> &generators,
                                       const TensorRef<T> &rotations) {
  const GeneratorExpShape s = generatorExpOperands<T>("generator_exp", r, generators);
  checkShape("generator_exp: result", rotations, concat(leadingShape(r.shape, 1), {s.d, s.d}));
  return s;
}

// generator_exp_grad: r and generators as above, dy [..., d, d] (r's
// leading dims), the result the shape of generators.
template <typename T>
GeneratorExpShape generatorExpGradContract(const TensorRef<const T> &r,
                                           const TensorRef<const T> &generators,
                                           const TensorRef<const T> &dy,
                                           const TensorRef<T> &dgenerators) {
  const GeneratorExpShape s = generatorExpOperands<T>("generator_exp_grad", r, generators);
  checkShape("generator_exp_grad: 'dy'", dy, concat(leadingShape(r.shape, 1), {s.d, s.d}));
  checkShape("generator_exp_grad: result 'dgenerators'", dgenerators, generators.shape);
  return s;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: linalg::expm in double, one matrix after another
//===----------------------------------------------------------------------===//

namespace stringrt::ref {
namespace {

using linalg::Matrix;

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

} // namespace

// R[p] = exp(sum_k r[p, k] L_k).
template <typename T>
void generatorExp(TensorRef<const T> r, TensorRef<const T> generators, TensorRef<T> rotations) {
  const int64_t positions = ops::generatorExpContract<T>(r, generators, rotations).positions;
  const std::vector<Matrix> gens = ops::generators::read<T>(generators);
  const int64_t d = generators.dim(1);
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
  const ops::GeneratorExpShape s = ops::generatorExpGradContract<T>(r, generators, dy, dgenerators);
  const int64_t count = s.count, d = s.d, positions = s.positions;
  const std::vector<Matrix> gens = ops::generators::read<T>(generators);
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

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void generatorExp<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);             \
  template void generatorExpGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,    \
                                    TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: the exponentials in double over the pool, the Frechet
// derivative on block-triangular pairs
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using namespace util;

namespace {

using Mat = std::vector<double>;

using dense::matmul;
using dense::matmulAdd;
using dense::singular;
using dense::solveInPlace;

// The degree-13 Pade coefficients and theta13 (Higham 2005), as the
// reference's linalg::expm.
constexpr double kPade[14] = {64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
                              1187353796428800.0,  129060195264000.0,   10559470521600.0,
                              670442572800.0,      33522128640.0,       1323241920.0,
                              40840800.0,          960960.0,            16380.0,
                              182.0,               1.0};
constexpr double kTheta13 = 5.371920351148152;

int squaringsFor(double norm) {
  return norm > kTheta13 ? static_cast<int>(std::ceil(std::log2(norm / kTheta13))) : 0;
}

// A block-upper-triangular pair (X, Y) = [[X, Y], [0, X]]; Y empty for a
// plain matrix (then only X is computed).
struct Pair {
  Mat x, y;
};

struct PairOps {
  int64_t n;
  bool frechet;
  size_t size() const { return static_cast<size_t>(n * n); }
  Pair zeros() const { return {Mat(size(), 0.0), frechet ? Mat(size(), 0.0) : Mat()}; }
  // c = a b
  void mul(const Pair &a, const Pair &b, Pair &c) const {
    matmul(a.x.data(), b.x.data(), n, c.x.data());
    if (frechet) {
      matmul(a.x.data(), b.y.data(), n, c.y.data());
      matmulAdd(a.y.data(), b.x.data(), n, c.y.data());
    }
  }
  // out = c6 s6 + c4 s4 + c2 s2 + c0 I
  void sum4(const Pair &s6, const Pair &s4, const Pair &s2, double c6, double c4, double c2,
            double c0, Pair &out) const {
    for (size_t i = 0; i < size(); ++i)
      out.x[i] = c6 * s6.x[i] + c4 * s4.x[i] + c2 * s2.x[i];
    for (int64_t i = 0; i < n; ++i)
      out.x[i * n + i] += c0;
    if (frechet)
      for (size_t i = 0; i < size(); ++i)
        out.y[i] = c6 * s6.y[i] + c4 * s4.y[i] + c2 * s2.y[i];
  }
};

// exp of the pair a (scaled by 2^-squarings first), the reference's
// scaling and squaring with the degree-13 Pade approximant.
Pair expmPair(const PairOps &ops, Pair s, int squarings) {
  const double scale = std::ldexp(1.0, -squarings);
  for (double &v : s.x)
    v *= scale;
  for (double &v : s.y)
    v *= scale;
  Pair s2 = ops.zeros(), s4 = ops.zeros(), s6 = ops.zeros(), t = ops.zeros(), w = ops.zeros();
  ops.mul(s, s, s2);
  ops.mul(s2, s2, s4);
  ops.mul(s4, s2, s6);
  // U = S [S6 (b13 S6 + b11 S4 + b9 S2) + b7 S6 + b5 S4 + b3 S2 + b1 I]
  ops.sum4(s6, s4, s2, kPade[13], kPade[11], kPade[9], 0.0, t);
  ops.mul(s6, t, w);
  ops.sum4(s6, s4, s2, kPade[7], kPade[5], kPade[3], kPade[1], t);
  for (size_t i = 0; i < ops.size(); ++i)
    w.x[i] += t.x[i];
  if (ops.frechet)
    for (size_t i = 0; i < ops.size(); ++i)
      w.y[i] += t.y[i];
  Pair u = ops.zeros();
  ops.mul(s, w, u);
  // V = S6 (b12 S6 + b10 S4 + b8 S2) + b6 S6 + b4 S4 + b2 S2 + b0 I
  ops.sum4(s6, s4, s2, kPade[12], kPade[10], kPade[8], 0.0, t);
  Pair v = ops.zeros();
  ops.mul(s6, t, v);
  ops.sum4(s6, s4, s2, kPade[6], kPade[4], kPade[2], kPade[0], t);
  // N = V - U (into t), P = V + U (into v).
  for (size_t i = 0; i < ops.size(); ++i) {
    const double vx = v.x[i] + t.x[i];
    t.x[i] = vx - u.x[i];
    v.x[i] = vx + u.x[i];
  }
  if (ops.frechet)
    for (size_t i = 0; i < ops.size(); ++i) {
      const double vy = v.y[i] + t.y[i];
      t.y[i] = vy - u.y[i];
      v.y[i] = vy + u.y[i];
    }
  // r13 = N^-1 P: N1 Z1 = P1, then N1 Z2 = P2 - N2 Z1 (one matrix N1).
  Mat n1 = t.x;
  if (!solveInPlace(n1.data(), v.x.data(), ops.n, ops.n))
    singular("expm: V - U", ops.n * (ops.frechet ? 2 : 1));
  if (ops.frechet) {
    matmul(t.y.data(), v.x.data(), ops.n, w.x.data()); // N2 Z1
    for (size_t i = 0; i < ops.size(); ++i)
      v.y[i] -= w.x[i];
    n1 = t.x;
    solveInPlace(n1.data(), v.y.data(), ops.n, ops.n); // N1 is nonsingular: Z1 was solved
  }
  Pair r = std::move(v), next = ops.zeros();
  for (int i = 0; i < squarings; ++i) {
    ops.mul(r, r, next);
    std::swap(r, next);
  }
  return r;
}

// A = sum_k r[p, k] L_k in double (k ascending, as the reference).
void combination(const TensorRef<const float> &r, const TensorRef<const float> &g, int64_t p,
                 int64_t count, int64_t d, double *a) {
  for (int64_t i = 0; i < d * d; ++i)
    a[i] = 0.0;
  for (int64_t k = 0; k < count; ++k) {
    const double c = r.data[p * count + k];
    const float *l = g.data + k * d * d;
    for (int64_t i = 0; i < d * d; ++i)
      a[i] += c * static_cast<double>(l[i]);
  }
}

double norm1(const double *a, int64_t n) {
  double best = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i)
      sum += std::fabs(a[i * n + j]);
    best = std::max(best, sum);
  }
  return best;
}

// Matrices per parallelFor chunk (a 16 x 16 exponential is ~20 us).
constexpr int64_t kMatrixGrain = 4;

} // namespace

void generatorExp(TensorRef<const float> r, TensorRef<const float> generators,
                  TensorRef<float> rotations) {
  const ops::GeneratorExpShape s = ops::generatorExpContract<float>(r, generators, rotations);
  const int64_t count = s.count, d = s.d, positions = s.positions;
  const PairOps ops{d, false};
  parallelFor(0, positions, kMatrixGrain, [&](int64_t p0, int64_t p1) {
    Pair a = ops.zeros();
    for (int64_t p = p0; p < p1; ++p) {
      combination(r, generators, p, count, d, a.x.data());
      const Pair e = expmPair(ops, a, squaringsFor(norm1(a.x.data(), d)));
      float *out = rotations.data + p * d * d;
      for (int64_t i = 0; i < d * d; ++i)
        out[i] = static_cast<float>(e.x[i]);
    }
  });
}

void generatorExpGrad(TensorRef<const float> r, TensorRef<const float> generators,
                      TensorRef<const float> dy, TensorRef<float> dgenerators) {
  const ops::GeneratorExpShape s =
      ops::generatorExpGradContract<float>(r, generators, dy, dgenerators);
  const int64_t count = s.count, d = s.d, positions = s.positions;
  const int64_t dd = d * d;
  Mat da(static_cast<size_t>(positions * dd));
  const PairOps ops{d, true};
  parallelFor(0, positions, 1, [&](int64_t p0, int64_t p1) {
    Mat a(static_cast<size_t>(dd));
    Pair block = ops.zeros();
    for (int64_t p = p0; p < p1; ++p) {
      combination(r, generators, p, count, d, a.data());
      // (A^T, dR): the 2d x 2d matrix [[A^T, dR], [0, A^T]].
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < d; ++j) {
          block.x[i * d + j] = a[j * d + i];
          block.y[i * d + j] = static_cast<double>(dy.data[p * dd + i * d + j]);
        }
      // Its 1-norm: left columns |X|, right columns |Y| + |X|.
      double norm = 0.0;
      for (int64_t j = 0; j < d; ++j) {
        double left = 0.0, right = 0.0;
        for (int64_t i = 0; i < d; ++i) {
          left += std::fabs(block.x[i * d + j]);
          right += std::fabs(block.y[i * d + j]);
        }
        norm = std::max(norm, std::max(left, right + left));
      }
      const Pair e = expmPair(ops, block, squaringsFor(norm));
      std::copy(e.y.begin(), e.y.end(), da.begin() + p * dd);
    }
  });
  // dL_k = sum_p r[p, k] dA(p), p ascending.
  Mat sum(static_cast<size_t>(count * dd), 0.0);
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t k = 0; k < count; ++k) {
      const double c = r.data[p * count + k];
      double *out = sum.data() + k * dd;
      const double *in = da.data() + p * dd;
      for (int64_t i = 0; i < dd; ++i)
        out[i] += c * in[i];
    }
  for (int64_t i = 0; i < count * dd; ++i)
    dgenerators.data[i] = static_cast<float>(sum[i]);
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runGeneratorExp(const OpContext &c) {
  ref::generatorExp<float>(c.in(0), c.in(1), c.out(0));
}

void runFastGeneratorExp(const OpContext &c) { cpu::generatorExp(c.in(0), c.in(1), c.out(0)); }

void runGeneratorExpGrad(const OpContext &c) {
  ref::generatorExpGrad<float>(c.in(0), c.in(1), c.in(2), c.out(0));
}

void runFastGeneratorExpGrad(const OpContext &c) {
  cpu::generatorExpGrad(c.in(0), c.in(1), c.in(2), c.out(0));
}

} // namespace

template <> void registerOps<OpCode::GeneratorExp>(OpRegistry &registry) {
  registry.add(OpCode::GeneratorExp, {runGeneratorExp, nullptr, runFastGeneratorExp});
  registry.add(OpCode::GeneratorExpGrad, {runGeneratorExpGrad, nullptr, runFastGeneratorExpGrad});
}

} // namespace stringrt::ops
