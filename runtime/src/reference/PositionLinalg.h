// Small dense double-precision linear algebra for the positional-encoding
// reference kernels: n x n row-major matrices held in std::vector<double>.
#pragma once

#include <cstdint>
#include <vector>

namespace stringrt::ref::linalg {

// An n x n matrix, row-major: m[i * n + j] is row i, column j.
using Matrix = std::vector<double>;

Matrix identity(int64_t n);

// a b
Matrix matmul(const Matrix &a, const Matrix &b, int64_t n);

// a^T
Matrix transpose(const Matrix &a, int64_t n);

// alpha a + beta b
Matrix combine(double alpha, const Matrix &a, double beta, const Matrix &b);

// max_j sum_i |a[i, j]| (the 1-norm)
double norm1(const Matrix &a, int64_t n);

// sqrt(sum a[i, j]^2)
double frobenius(const Matrix &a);

// P A = L U with partial pivoting: `lu` holds L (unit lower, below the
// diagonal) and U (on and above it); row i of P A is row perm[i] of A.
struct LU {
  int64_t n = 0;
  Matrix lu;
  std::vector<int64_t> perm;
};

// Factorises a; throws stringrt::Error "<what> (nxn) is singular" when a
// pivot is exactly 0 (`what` names the kernel and the matrix, e.g.
// "cayley: I + S").
LU luFactor(Matrix a, int64_t n, const char *what);

// Overwrites b (n values) with the solution of A x = b.
void luSolve(const LU &f, double *b);

// Overwrites b (n values) with the solution of A^T x = b
// (A^T = U^T L^T P: solve U^T w = b, L^T v = w, then x = P^T v).
void luSolveTransposed(const LU &f, double *b);

// exp(a) by scaling and squaring with the degree-13 Pade approximant
// (Higham 2005): s = max(0, ceil(log2(||a||_1 / theta13))), B = a / 2^s,
// r13(B) = (V - U)^-1 (V + U), exp(a) = r13(B)^(2^s).
Matrix expm(const Matrix &a, int64_t n);

} // namespace stringrt::ref::linalg
