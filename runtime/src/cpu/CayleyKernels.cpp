// Fast Cayley transform and its gradient.
//
// The reference solves (I + S) z = x and multiplies by (I - S) once per
// token. Here the d x d work is done once per call, in double: I + S is
// factorised (the reference's partial-pivoting LU, so a singular I + S fails
// with the same message), inverted, M = (I + S)^-1, and
//
//   U = (I - S) M,
//
// rounded to float. Every token is then one row of a single GEMM over the
// flattened leading dims, the rows of x being row vectors:
//
//   cayley:       y = U x            ->  Y  = X U^T
//   cayley_grad:  dx = U^T dy        ->  DX = DY U
//                 (dx solves (I + S)^T dx = (I - S)^T dy: dx = M^T (I - S)^T dy = U^T dy)
//                 ds = -sum_n (dy_n + dx_n) z_n^T, z_n = M x_n
//                    = -(DY + DX)^T X M^T = -(DY^T X + DX^T X) M^T
//
// so ds is a [d, d] GEMM over the tokens (A = DY^T X + DX^T X: float GEMMs per
// block of tokens, the blocks summed in double) and a d x d product in double. The formulas hold for any
// S, skew or not. The float GEMMs make the results match the reference to
// float accuracy (~1e-6 relative) rather than bit for bit.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "Gemm.h"
#include "KernelUtil.h"

#include "../reference/PositionLinalg.h"

#include <algorithm>
#include <string>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

namespace linalg = ref::linalg;

// cayley_grad's token sum is split into at most this many blocks (of at
// least 256 tokens each).
constexpr int64_t kMaxBlocks = 64;

// The reference's checks: x [..., D], s [D, D].
int64_t checkCayley(const char *what, const TensorRef<const float> &x,
                    const TensorRef<const float> &s) {
  check(x.rank() >= 1, what, "'x' must be [..., D], got a scalar");
  const int64_t d = x.dim(-1);
  checkShape((std::string(what) + ": 's'").c_str(), s, {d, d});
  return d;
}

// The factors of one call, in double: M = (I + S)^-1 and U = (I - S) M.
struct CayleyFactors {
  linalg::Matrix inverse; // M
  std::vector<float> u;   // U, rounded to float (the GEMM operand)
};

CayleyFactors cayleyFactors(const TensorRef<const float> &s, int64_t d, const char *what) {
  linalg::Matrix plus = linalg::identity(d), minus = linalg::identity(d);
  for (int64_t i = 0; i < d * d; ++i) {
    plus[i] += static_cast<double>(s.data[i]);
    minus[i] -= static_cast<double>(s.data[i]);
  }
  const linalg::LU lu = linalg::luFactor(std::move(plus), d, what);
  // M column by column: (I + S) m_j = e_j.
  CayleyFactors f;
  f.inverse.assign(static_cast<size_t>(d * d), 0.0);
  std::vector<double> column(static_cast<size_t>(d));
  for (int64_t j = 0; j < d; ++j) {
    std::fill(column.begin(), column.end(), 0.0);
    column[j] = 1.0;
    linalg::luSolve(lu, column.data());
    for (int64_t i = 0; i < d; ++i)
      f.inverse[i * d + j] = column[i];
  }
  // U = (I - S) M, row by row (i k j order: unit-stride rows of M).
  f.u.assign(static_cast<size_t>(d * d), 0.0f);
  std::vector<double> row(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t k = 0; k < d; ++k) {
      const double a = minus[i * d + k];
      if (a == 0.0)
        continue;
      const double *mk = f.inverse.data() + k * d;
      for (int64_t j = 0; j < d; ++j)
        row[j] += a * mk[j];
    }
    for (int64_t j = 0; j < d; ++j)
      f.u[i * d + j] = static_cast<float>(row[j]);
  }
  return f;
}

} // namespace

void cayley(TensorRef<const float> x, TensorRef<const float> s, TensorRef<float> y) {
  const int64_t d = checkCayley("cayley", x, s);
  checkShape("cayley: result", y, x.shape);
  const int64_t tokens = rowCount(x.shape);
  const CayleyFactors f = cayleyFactors(s, d, "cayley: I + S");
  if (tokens == 0 || d == 0)
    return;
  // Y [N, d] = X [N, d] U^T.
  gemm(Trans::No, Trans::Yes, tokens, d, d, 1.0f, x.data, d, f.u.data(), d, 0.0f, y.data, d);
}

void cayleyGrad(TensorRef<const float> x, TensorRef<const float> s, TensorRef<const float> dy,
                TensorRef<float> dx, TensorRef<float> ds) {
  const int64_t d = checkCayley("cayley_grad", x, s);
  checkShape("cayley_grad: 'dy'", dy, x.shape);
  checkShape("cayley_grad: result 'dx'", dx, x.shape);
  checkShape("cayley_grad: result 'ds'", ds, s.shape);
  const int64_t tokens = rowCount(x.shape);
  const CayleyFactors f = cayleyFactors(s, d, "cayley_grad: I + S");
  if (d == 0)
    return;
  if (tokens == 0) {
    std::fill(ds.data, ds.data + d * d, 0.0f);
    return;
  }
  // DX [N, d] = DY [N, d] U.
  gemm(Trans::No, Trans::No, tokens, d, d, 1.0f, dy.data, d, f.u.data(), d, 0.0f, dx.data, d);
  // A [d, d] = DY^T X + DX^T X, the sum over the tokens: per block of tokens
  // one float GEMM pair (blocks in parallel), the blocks' partial sums then
  // added in block order in double - a float sum over only a block's tokens,
  // and the same order for any thread count.
  const int64_t block = std::max<int64_t>(256, (tokens + kMaxBlocks - 1) / kMaxBlocks);
  const int64_t blocks = (tokens + block - 1) / block;
  std::vector<float> partial(static_cast<size_t>(blocks * d * d));
  parallelFor(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * block, rows = std::min(block, tokens - n0);
      float *p = partial.data() + b * d * d;
      gemmSerial(Trans::Yes, Trans::No, d, d, rows, 1.0f, dy.data + n0 * d, d, x.data + n0 * d,
                 d, 0.0f, p, d);
      gemmSerial(Trans::Yes, Trans::No, d, d, rows, 1.0f, dx.data + n0 * d, d, x.data + n0 * d,
                 d, 1.0f, p, d);
    }
  });
  std::vector<double> a(static_cast<size_t>(d * d), 0.0);
  for (int64_t b = 0; b < blocks; ++b) {
    const float *p = partial.data() + b * d * d;
    for (int64_t i = 0; i < d * d; ++i)
      a[i] += p[i];
  }
  // ds[i, j] = -sum_k A[i, k] M[j, k]: rows of A against rows of M.
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j) {
      double sum = 0.0;
      const double *ai = a.data() + i * d;
      const double *mj = f.inverse.data() + j * d;
      for (int64_t k = 0; k < d; ++k)
        sum += ai[k] * mj[k];
      ds.data[i * d + j] = static_cast<float>(-sum);
    }
}

} // namespace stringrt::cpu
