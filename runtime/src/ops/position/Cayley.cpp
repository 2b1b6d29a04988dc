// pe.cayley and its gradient pe.cayley_grad (PEPositionOps.td: the Cayley
// transform y = (I - S)(I + S)^-1 x of every token vector x [..., D], S
// [D, D], orthogonal for a skew S; the formulas hold for any S with I + S
// invertible): the shape contracts, the reference kernels, the fast kernels
// and the registration (ops/OpLibrary.h). The kernels' declarations are in
// stringrt/ops/PositionOps.h. stringc generates no CPU kernel for these ops
// (pe-hoist rewrites pe.cayley to pe.linear of the fused family's
// pe.cayley_weight).
//
// The fast kernels do the d x d work once per call, in double: I + S is
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
// so ds is a [d, d] GEMM over the tokens (A = DY^T X + DX^T X: float GEMMs
// per block of tokens, the blocks summed in double) and a d x d product in
// double. The float GEMMs make the results match the reference to float
// accuracy (~1e-6 relative) rather than bit for bit.
#include "../OpLibrary.h"

#include "../../cpu/Gemm.h"
#include "../../cpu/KernelUtil.h"
#include "../../reference/PositionLinalg.h"
#include "../../reference/PositionUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/PositionOps.h"

#include <algorithm>
#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkShape;
using ref::TensorRef;

// Both ops: x [..., D] (not a scalar), s [D, D]. Returns D.
template <typename T>
int64_t cayleyOperands(const char *op, const TensorRef<const T> &x, const TensorRef<const T> &s) {
  check(x.rank() >= 1, op, "'x' must be [..., D], got a scalar");
  const int64_t d = x.dim(-1);
  checkShape((std::string(op) + ": 's'").c_str(), s, {d, d});
  return d;
}

// cayley: x, s as above, the result the shape of x. Returns D.
template <typename T>
int64_t cayleyContract(const TensorRef<const T> &x, const TensorRef<const T> &s,
                       const TensorRef<T> &y) {
  const int64_t d = cayleyOperands<T>("cayley", x, s);
  checkShape("cayley: result", y, x.shape);
  return d;
}

// cayley_grad: x, s as above, dy and dx the shape of x, ds that of s.
// Returns D.
template <typename T>
int64_t cayleyGradContract(const TensorRef<const T> &x, const TensorRef<const T> &s,
                           const TensorRef<const T> &dy, const TensorRef<T> &dx,
                           const TensorRef<T> &ds) {
  const int64_t d = cayleyOperands<T>("cayley_grad", x, s);
  checkShape("cayley_grad: 'dy'", dy, x.shape);
  checkShape("cayley_grad: result 'dx'", dx, x.shape);
  checkShape("cayley_grad: result 'ds'", ds, s.shape);
  return d;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: one LU of I + S, a solve per token, in double
//===----------------------------------------------------------------------===//

namespace stringrt::ref {
namespace {

using position::leadingCount;

// I + sign * S in double, S = s [d, d].
template <typename T>
linalg::Matrix identityPlus(double sign, TensorRef<const T> s, int64_t d) {
  linalg::Matrix m = linalg::identity(d);
  for (int64_t i = 0; i < d * d; ++i)
    m[i] += sign * static_cast<double>(s[i]);
  return m;
}

// y = M v for a d x d matrix M.
std::vector<double> apply(const linalg::Matrix &m, const std::vector<double> &v, int64_t d) {
  std::vector<double> y(static_cast<size_t>(d), 0.0);
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j)
      y[i] += m[i * d + j] * v[j];
  return y;
}

} // namespace

// (I + S) z = x (one LU of I + S), y = (I - S) z, per token.
template <typename T> void cayley(TensorRef<const T> x, TensorRef<const T> s, TensorRef<T> y) {
  const int64_t d = ops::cayleyContract<T>(x, s, y);
  const int64_t tokens = leadingCount(x.shape, 1);
  const linalg::LU plus = linalg::luFactor(identityPlus<T>(1.0, s, d), d, "cayley: I + S");
  const linalg::Matrix minus = identityPlus<T>(-1.0, s, d);
  std::vector<double> z(static_cast<size_t>(d));
  for (int64_t n = 0; n < tokens; ++n) {
    for (int64_t i = 0; i < d; ++i)
      z[i] = x[n * d + i];
    linalg::luSolve(plus, z.data());
    const std::vector<double> out = apply(minus, z, d);
    for (int64_t i = 0; i < d; ++i)
      y[n * d + i] = static_cast<T>(out[i]);
  }
}

// z = (I + S)^-1 x; (I + S)^T dx = (I - S)^T dy; ds = -sum_tokens (dy + dx) z^T.
template <typename T>
void cayleyGrad(TensorRef<const T> x, TensorRef<const T> s, TensorRef<const T> dy,
                TensorRef<T> dx, TensorRef<T> ds) {
  const int64_t d = ops::cayleyGradContract<T>(x, s, dy, dx, ds);
  const int64_t tokens = leadingCount(x.shape, 1);
  const linalg::LU plus = linalg::luFactor(identityPlus<T>(1.0, s, d), d, "cayley_grad: I + S");
  const linalg::Matrix minusT = linalg::transpose(identityPlus<T>(-1.0, s, d), d);
  linalg::Matrix dsum(static_cast<size_t>(d * d), 0.0);
  std::vector<double> z(static_cast<size_t>(d)), g(static_cast<size_t>(d));
  for (int64_t n = 0; n < tokens; ++n) {
    for (int64_t i = 0; i < d; ++i) {
      z[i] = x[n * d + i];
      g[i] = dy[n * d + i];
    }
    linalg::luSolve(plus, z.data());
    std::vector<double> gx = apply(minusT, g, d);
    linalg::luSolveTransposed(plus, gx.data());
    for (int64_t i = 0; i < d; ++i) {
      dx[n * d + i] = static_cast<T>(gx[i]);
      for (int64_t j = 0; j < d; ++j)
        dsum[i * d + j] -= (g[i] + gx[i]) * z[j];
    }
  }
  for (int64_t i = 0; i < d * d; ++i)
    ds[i] = static_cast<T>(dsum[i]);
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void cayley<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<T>);                   \
  template void cayleyGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,          \
                              TensorRef<T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: the factors once per call, then GEMMs over the tokens
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using namespace util;

namespace {

namespace linalg = ref::linalg;

// cayley_grad's token sum is split into at most this many blocks (of at
// least 256 tokens each).
constexpr int64_t kMaxBlocks = 64;

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
  const int64_t d = ops::cayleyContract<float>(x, s, y);
  const int64_t tokens = rowCount(x.shape);
  const CayleyFactors f = cayleyFactors(s, d, "cayley: I + S");
  if (tokens == 0 || d == 0)
    return;
  // Y [N, d] = X [N, d] U^T.
  gemm(Trans::No, Trans::Yes, tokens, d, d, 1.0f, x.data, d, f.u.data(), d, 0.0f, y.data, d);
}

void cayleyGrad(TensorRef<const float> x, TensorRef<const float> s, TensorRef<const float> dy,
                TensorRef<float> dx, TensorRef<float> ds) {
  const int64_t d = ops::cayleyGradContract<float>(x, s, dy, dx, ds);
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

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runCayley(const OpContext &c) { ref::cayley<float>(c.in(0), c.in(1), c.out(0)); }

void runFastCayley(const OpContext &c) { cpu::cayley(c.in(0), c.in(1), c.out(0)); }

void runCayleyGrad(const OpContext &c) {
  ref::cayleyGrad<float>(c.in(0), c.in(1), c.in(2), c.out(0), c.out(1));
}

void runFastCayleyGrad(const OpContext &c) {
  cpu::cayleyGrad(c.in(0), c.in(1), c.in(2), c.out(0), c.out(1));
}

} // namespace

template <> void registerOps<OpCode::Cayley>(OpRegistry &registry) {
  registry.add(OpCode::Cayley, {runCayley, nullptr, runFastCayley});
  registry.add(OpCode::CayleyGrad, {runCayleyGrad, nullptr, runFastCayleyGrad});
}

} // namespace stringrt::ops
