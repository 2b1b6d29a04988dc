// Value-returning wrappers of the positional-encoding reference kernels and
// small helpers for their tests (PositionKernelsTest.cpp,
// PositionGradTest.cpp).
#pragma once

#include "stringrt/ops/PositionOps.h"
#include "stringrt/reference/Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

namespace stringrt::ref::postest {

template <typename T> using Ten = Tensor<T>;
using D = Tensor<double>;

// The shape of x with its leading dimensions replaced by `lead`.
inline std::vector<int64_t> withLead(std::vector<int64_t> lead, std::vector<int64_t> tail) {
  lead.insert(lead.end(), tail.begin(), tail.end());
  return lead;
}

// max |a - b| over all elements (shapes must agree).
template <typename A, typename B> double maxAbsDiff(const Tensor<A> &a, const Tensor<B> &b) {
  checkShape("maxAbsDiff", b.cref(), a.shape);
  double m = 0.0;
  for (size_t i = 0; i < a.values.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a.values[i]) - static_cast<double>(b.values[i])));
  return m;
}

template <typename T> double maxAbs(const Tensor<T> &a) {
  double m = 0.0;
  for (T v : a.values)
    m = std::max(m, std::fabs(static_cast<double>(v)));
  return m;
}

// elementwise alpha a + beta b
inline D lincomb(double alpha, const D &a, double beta, const D &b) {
  D c = D::zeros(a.shape);
  for (size_t i = 0; i < a.values.size(); ++i)
    c.values[i] = alpha * a.values[i] + beta * b.values[i];
  return c;
}

// ------------------------------------------------------------- tables --

template <typename T = double> Ten<T> seqPos(int64_t length, int64_t special) {
  auto p = Ten<T>::zeros({special + length, 1});
  seqPositions<T>(length, special, p.ref());
  return p;
}

template <typename T = double> Ten<T> gridPos(int64_t rows, int64_t cols, int64_t special) {
  auto p = Ten<T>::zeros({special + rows * cols, 2});
  gridPositions<T>(rows, cols, special, p.ref());
  return p;
}

template <typename T = double>
Ten<T> freqTable(FreqsKind kind, int64_t dim, int64_t heads, double base) {
  auto f = Ten<T>::zeros({dim / 2, kind == FreqsKind::Seq ? 1 : 2});
  ropeFreqs<T>(kind, dim, heads, base, f.ref());
  return f;
}

template <typename T> Ten<T> relPos(const Ten<T> &pos) {
  auto r = Ten<T>::zeros({pos.shape[0], pos.shape[0], pos.shape[1]});
  relativePositions<T>(pos.cref(), r.ref());
  return r;
}

// -------------------------------------------------------------- rotary --

template <typename T> Ten<T> ropeOf(const Ten<T> &x, const Ten<T> &pos, const Ten<T> &f) {
  auto y = Ten<T>::zeros(x.shape);
  rope<T>(x.cref(), pos.cref(), f.cref(), y.ref());
  return y;
}

template <typename T>
Ten<T> ropeGradFreqsOf(const Ten<T> &x, const Ten<T> &pos, const Ten<T> &f, const Ten<T> &dy) {
  auto df = Ten<T>::zeros(f.shape);
  ropeGradFreqs<T>(x.cref(), pos.cref(), f.cref(), dy.cref(), df.ref());
  return df;
}

template <typename T>
Ten<T> householderOf(const Ten<T> &x, const Ten<T> &pos, const Ten<T> &f1, const Ten<T> &f2) {
  auto y = Ten<T>::zeros(x.shape);
  householder<T>(x.cref(), pos.cref(), f1.cref(), f2.cref(), y.ref());
  return y;
}

template <typename T>
std::pair<Ten<T>, Ten<T>> householderGradFreqsOf(const Ten<T> &x, const Ten<T> &pos,
                                                 const Ten<T> &f1, const Ten<T> &f2,
                                                 const Ten<T> &dy) {
  auto df1 = Ten<T>::zeros(f1.shape), df2 = Ten<T>::zeros(f2.shape);
  householderGradFreqs<T>(x.cref(), pos.cref(), f1.cref(), f2.cref(), dy.cref(), df1.ref(),
                          df2.ref());
  return {df1, df2};
}

// ---------------------------------------------------------------- skew --

template <typename T> Ten<T> skewOf(const Ten<T> &p, int64_t dim) {
  std::vector<int64_t> shape(p.shape.begin(), p.shape.end() - 1);
  auto s = Ten<T>::zeros(withLead(shape, {dim, dim}));
  skew<T>(p.cref(), dim, s.ref());
  return s;
}

template <typename T> Ten<T> skewGradOf(const Ten<T> &dy, int64_t dim) {
  std::vector<int64_t> shape(dy.shape.begin(), dy.shape.end() - 2);
  auto dp = Ten<T>::zeros(withLead(shape, {dim * (dim - 1) / 2}));
  skewGrad<T>(dy.cref(), dim, dp.ref());
  return dp;
}

template <typename T>
Ten<T> sparseSkewOf(const Ten<T> &p, int64_t dim, const std::vector<int64_t> &support) {
  auto s = Ten<T>::zeros({dim, dim});
  sparseSkew<T>(p.cref(), dim, support, s.ref());
  return s;
}

template <typename T>
Ten<T> sparseSkewGradOf(const Ten<T> &dy, int64_t dim, const std::vector<int64_t> &support) {
  auto dp = Ten<T>::zeros({static_cast<int64_t>(support.size())});
  sparseSkewGrad<T>(dy.cref(), dim, support, dp.ref());
  return dp;
}

template <typename T> Ten<T> cayleyOf(const Ten<T> &x, const Ten<T> &s) {
  auto y = Ten<T>::zeros(x.shape);
  cayley<T>(x.cref(), s.cref(), y.ref());
  return y;
}

template <typename T>
std::pair<Ten<T>, Ten<T>> cayleyGradOf(const Ten<T> &x, const Ten<T> &s, const Ten<T> &dy) {
  auto dx = Ten<T>::zeros(x.shape), ds = Ten<T>::zeros(s.shape);
  cayleyGrad<T>(x.cref(), s.cref(), dy.cref(), dx.ref(), ds.ref());
  return {dx, ds};
}

// ---------------------------------------------------------- generators --

template <typename T> Ten<T> generatorExpOf(const Ten<T> &r, const Ten<T> &gens) {
  std::vector<int64_t> lead(r.shape.begin(), r.shape.end() - 1);
  auto R = Ten<T>::zeros(withLead(lead, {gens.shape[1], gens.shape[2]}));
  generatorExp<T>(r.cref(), gens.cref(), R.ref());
  return R;
}

template <typename T>
Ten<T> generatorExpGradOf(const Ten<T> &r, const Ten<T> &gens, const Ten<T> &dy) {
  auto dg = Ten<T>::zeros(gens.shape);
  generatorExpGrad<T>(r.cref(), gens.cref(), dy.cref(), dg.ref());
  return dg;
}

template <typename T> Ten<T> commutatorNormOf(const Ten<T> &gens) {
  auto y = Ten<T>::zeros({});
  commutatorNorm<T>(gens.cref(), y.ref());
  return y;
}

template <typename T> Ten<T> commutatorNormGradOf(const Ten<T> &gens, double dy) {
  auto g = Ten<T>(std::vector<int64_t>{}, std::vector<T>{static_cast<T>(dy)});
  auto dg = Ten<T>::zeros(gens.shape);
  commutatorNormGrad<T>(gens.cref(), g.cref(), dg.ref());
  return dg;
}

template <typename T>
Ten<T> applyRotationOf(const Ten<T> &x, const Ten<T> &rot, int64_t heads) {
  auto y = Ten<T>::zeros(x.shape);
  applyRotation<T>(x.cref(), rot.cref(), heads, y.ref());
  return y;
}

template <typename T>
std::pair<Ten<T>, Ten<T>> applyRotationGradOf(const Ten<T> &x, const Ten<T> &rot,
                                              const Ten<T> &dy, int64_t heads) {
  auto dx = Ten<T>::zeros(x.shape), dr = Ten<T>::zeros(rot.shape);
  applyRotationGrad<T>(x.cref(), rot.cref(), dy.cref(), heads, dx.ref(), dr.ref());
  return {dx, dr};
}

template <typename T> Ten<T> spdGateOf(const Ten<T> &x, const Ten<T> &gamma) {
  auto y = Ten<T>::zeros(x.shape);
  spdGate<T>(x.cref(), gamma.cref(), y.ref());
  return y;
}

template <typename T>
std::pair<Ten<T>, Ten<T>> spdGateGradOf(const Ten<T> &x, const Ten<T> &gamma, const Ten<T> &dy) {
  auto dx = Ten<T>::zeros(x.shape), dg = Ten<T>::zeros(gamma.shape);
  spdGateGrad<T>(x.cref(), gamma.cref(), dy.cref(), dx.ref(), dg.ref());
  return {dx, dg};
}

// ------------------------------------------------------- small matrices --

// Row-major d x d product.
inline std::vector<double> matmul(const double *a, const double *b, int64_t d) {
  std::vector<double> c(static_cast<size_t>(d * d), 0.0);
  for (int64_t i = 0; i < d; ++i)
    for (int64_t k = 0; k < d; ++k)
      for (int64_t j = 0; j < d; ++j)
        c[i * d + j] += a[i * d + k] * b[k * d + j];
  return c;
}

// Commuting skew generators on R^d (d even): generator k turns 2x2 block q
// at rate w[k][q], L_k = blockdiag(w[k][q] [[0, -1], [1, 0]]).
inline D blockGenerators(const std::vector<std::vector<double>> &w) {
  const int64_t count = static_cast<int64_t>(w.size());
  const int64_t d = 2 * static_cast<int64_t>(w[0].size());
  D g = D::zeros({count, d, d});
  for (int64_t k = 0; k < count; ++k)
    for (int64_t q = 0; q < d / 2; ++q) {
      g.values[(k * d + 2 * q) * d + 2 * q + 1] = -w[k][q];
      g.values[(k * d + 2 * q + 1) * d + 2 * q] = w[k][q];
    }
  return g;
}

} // namespace stringrt::ref::postest
