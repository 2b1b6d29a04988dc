// Small dense double-precision linear algebra (PositionLinalg.h).
#include "PositionLinalg.h"

#include "stringrt/Error.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace stringrt::ref::linalg {

Matrix identity(int64_t n) {
  Matrix m(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    m[i * n + i] = 1.0;
  return m;
}

Matrix matmul(const Matrix &a, const Matrix &b, int64_t n) {
  Matrix c(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t k = 0; k < n; ++k)
        sum += a[i * n + k] * b[k * n + j];
      c[i * n + j] = sum;
    }
  return c;
}

Matrix transpose(const Matrix &a, int64_t n) {
  Matrix t(a.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      t[j * n + i] = a[i * n + j];
  return t;
}

Matrix combine(double alpha, const Matrix &a, double beta, const Matrix &b) {
  Matrix c(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    c[i] = alpha * a[i] + beta * b[i];
  return c;
}

double norm1(const Matrix &a, int64_t n) {
  double best = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    double column = 0.0;
    for (int64_t i = 0; i < n; ++i)
      column += std::fabs(a[i * n + j]);
    best = std::max(best, column);
  }
  return best;
}

double frobenius(const Matrix &a) {
  double sum = 0.0;
  for (double v : a)
    sum += v * v;
  return std::sqrt(sum);
}

LU luFactor(Matrix a, int64_t n, const char *what) {
  LU f;
  f.n = n;
  f.perm.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    f.perm[i] = i;
  for (int64_t k = 0; k < n; ++k) {
    // Partial pivoting: the largest |a[i, k]| on or below the diagonal.
    int64_t pivot = k;
    for (int64_t i = k + 1; i < n; ++i)
      if (std::fabs(a[i * n + k]) > std::fabs(a[pivot * n + k]))
        pivot = i;
    if (a[pivot * n + k] == 0.0)
      throw Error(std::string(what) + " (" + std::to_string(n) + "x" + std::to_string(n) +
                  ") is singular");
    if (pivot != k) {
      for (int64_t j = 0; j < n; ++j)
        std::swap(a[k * n + j], a[pivot * n + j]);
      std::swap(f.perm[k], f.perm[pivot]);
    }
    for (int64_t i = k + 1; i < n; ++i) {
      const double l = a[i * n + k] / a[k * n + k];
      a[i * n + k] = l;
      for (int64_t j = k + 1; j < n; ++j)
        a[i * n + j] -= l * a[k * n + j];
    }
  }
  f.lu = std::move(a);
  return f;
}

void luSolve(const LU &f, double *b) {
  const int64_t n = f.n;
  const Matrix &m = f.lu;
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) // P b
    x[i] = b[f.perm[i]];
  for (int64_t i = 0; i < n; ++i) // L w = P b (unit diagonal)
    for (int64_t j = 0; j < i; ++j)
      x[i] -= m[i * n + j] * x[j];
  for (int64_t i = n - 1; i >= 0; --i) { // U x = w
    for (int64_t j = i + 1; j < n; ++j)
      x[i] -= m[i * n + j] * x[j];
    x[i] /= m[i * n + i];
  }
  std::copy(x.begin(), x.end(), b);
}

void luSolveTransposed(const LU &f, double *b) {
  const int64_t n = f.n;
  const Matrix &m = f.lu;
  std::vector<double> v(b, b + n);
  for (int64_t i = 0; i < n; ++i) { // U^T w = b (lower triangular)
    for (int64_t j = 0; j < i; ++j)
      v[i] -= m[j * n + i] * v[j];
    v[i] /= m[i * n + i];
  }
  for (int64_t i = n - 1; i >= 0; --i) // L^T v = w (unit upper triangular)
    for (int64_t j = i + 1; j < n; ++j)
      v[i] -= m[j * n + i] * v[j];
  for (int64_t i = 0; i < n; ++i) // x = P^T v
    b[f.perm[i]] = v[i];
}

Matrix expm(const Matrix &a, int64_t n) {
  // Coefficients of the degree-13 Pade approximant of exp, and the largest
  // 1-norm for which it is accurate to double precision (Higham 2005).
  static const double b[14] = {64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
                               1187353796428800.0,  129060195264000.0,   10559470521600.0,
                               670442572800.0,      33522128640.0,       1323241920.0,
                               40840800.0,          960960.0,            16380.0,
                               182.0,               1.0};
  const double theta13 = 5.371920351148152;

  const double norm = norm1(a, n);
  int squarings = 0;
  if (norm > theta13)
    squarings = static_cast<int>(std::ceil(std::log2(norm / theta13)));
  const Matrix s = combine(std::ldexp(1.0, -squarings), a, 0.0, a);

  const Matrix eye = identity(n);
  const Matrix s2 = matmul(s, s, n);
  const Matrix s4 = matmul(s2, s2, n);
  const Matrix s6 = matmul(s4, s2, n);
  auto sum4 = [&](double c6, double c4, double c2, double c0) {
    Matrix m(s.size());
    for (size_t i = 0; i < m.size(); ++i)
      m[i] = c6 * s6[i] + c4 * s4[i] + c2 * s2[i] + c0 * eye[i];
    return m;
  };
  // U = S [S6 (b13 S6 + b11 S4 + b9 S2) + b7 S6 + b5 S4 + b3 S2 + b1 I]
  // V =    S6 (b12 S6 + b10 S4 + b8 S2) + b6 S6 + b4 S4 + b2 S2 + b0 I
  const Matrix u = matmul(
      s, combine(1.0, matmul(s6, sum4(b[13], b[11], b[9], 0.0), n), 1.0, sum4(b[7], b[5], b[3], b[1])),
      n);
  const Matrix v =
      combine(1.0, matmul(s6, sum4(b[12], b[10], b[8], 0.0), n), 1.0, sum4(b[6], b[4], b[2], b[0]));

  // r13 = (V - U)^-1 (V + U), one column at a time.
  const LU f = luFactor(combine(1.0, v, -1.0, u), n, "expm: V - U");
  const Matrix rhs = combine(1.0, v, 1.0, u);
  Matrix r(rhs.size());
  std::vector<double> column(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < n; ++i)
      column[i] = rhs[i * n + j];
    luSolve(f, column.data());
    for (int64_t i = 0; i < n; ++i)
      r[i * n + j] = column[i];
  }
  for (int i = 0; i < squarings; ++i)
    r = matmul(r, r, n);
  return r;
}

} // namespace stringrt::ref::linalg
