// Private to the runtime: the d x d double-precision building blocks of the
// fast matrix functions (the fast kernels of the op library's
// fused/CayleyWeight.cpp and position/GeneratorExp.cpp). The reference
// kernels (reference/PositionLinalg.h) work in double with naive loops;
// these keep double and the reference's algorithms, but
// - the products run with unit-stride rows (i k j order), which the compiler
//   vectorises;
// - the inverse is Gauss-Jordan with partial pivoting on [A | B] (the same
//   pivots as the reference's LU: both take the first largest |entry| of the
//   column), vectorised row operations.
#pragma once

#include "stringrt/Error.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

namespace stringrt::cpu::dense {

// c = a b (n x n, row-major), rows of b at unit stride.
inline void matmul(const double *a, const double *b, int64_t n, double *c) {
  for (int64_t i = 0; i < n; ++i) {
    double *ci = c + i * n;
    for (int64_t j = 0; j < n; ++j)
      ci[j] = 0.0;
    for (int64_t k = 0; k < n; ++k) {
      const double aik = a[i * n + k];
      const double *bk = b + k * n;
      for (int64_t j = 0; j < n; ++j)
        ci[j] += aik * bk[j];
    }
  }
}

// c += a b.
inline void matmulAdd(const double *a, const double *b, int64_t n, double *c) {
  for (int64_t i = 0; i < n; ++i) {
    double *ci = c + i * n;
    for (int64_t k = 0; k < n; ++k) {
      const double aik = a[i * n + k];
      const double *bk = b + k * n;
      for (int64_t j = 0; j < n; ++j)
        ci[j] += aik * bk[j];
    }
  }
}

// Solves A X = B in place (A n x n destroyed, B n x m overwritten by X) by
// Gauss-Jordan with partial pivoting (first largest |entry| of the column).
// Returns false when a pivot is exactly 0.
inline bool solveInPlace(double *a, double *b, int64_t n, int64_t m) {
  for (int64_t c = 0; c < n; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r * n + c]) > std::fabs(a[pivot * n + c]))
        pivot = r;
    if (a[pivot * n + c] == 0.0)
      return false;
    if (pivot != c) {
      for (int64_t j = 0; j < n; ++j)
        std::swap(a[c * n + j], a[pivot * n + j]);
      for (int64_t j = 0; j < m; ++j)
        std::swap(b[c * m + j], b[pivot * m + j]);
    }
    const double inv = 1.0 / a[c * n + c];
    for (int64_t j = c; j < n; ++j)
      a[c * n + j] *= inv;
    for (int64_t j = 0; j < m; ++j)
      b[c * m + j] *= inv;
    for (int64_t r = 0; r < n; ++r) {
      if (r == c)
        continue;
      const double f = a[r * n + c];
      if (f == 0.0)
        continue;
      for (int64_t j = c; j < n; ++j)
        a[r * n + j] -= f * a[c * n + j];
      for (int64_t j = 0; j < m; ++j)
        b[r * m + j] -= f * b[c * m + j];
    }
  }
  return true;
}

// Throws "<what> (nxn) is singular", the form of linalg::luFactor's message.
[[noreturn]] inline void singular(const std::string &what, int64_t n) {
  throw Error(what + " (" + std::to_string(n) + "x" + std::to_string(n) + ") is singular");
}

} // namespace stringrt::cpu::dense
