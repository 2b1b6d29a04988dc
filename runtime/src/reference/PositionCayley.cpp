// Reference kernels of the Cayley transform: cayley, cayley_grad (the skew
// builders are in the op library, ops/position/Skew.cpp and SparseSkew.cpp).
#include "stringrt/reference/PositionKernels.h"

#include "PositionLinalg.h"
#include "PositionUtil.h"

#include <string>
#include <vector>

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

template <typename T> void checkCayley(const char *what, TensorRef<const T> x, TensorRef<const T> s) {
  check(x.rank() >= 1, what, "'x' must be [..., D], got a scalar");
  const int64_t d = x.dim(-1);
  checkShape((std::string(what) + ": 's'").c_str(), s, {d, d});
}

} // namespace

// (I + S) z = x (one LU of I + S), y = (I - S) z, per token.
template <typename T> void cayley(TensorRef<const T> x, TensorRef<const T> s, TensorRef<T> y) {
  checkCayley<T>("cayley", x, s);
  checkShape("cayley: result", y, x.shape);
  const int64_t d = x.dim(-1), tokens = leadingCount(x.shape, 1);
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
  checkCayley<T>("cayley_grad", x, s);
  checkShape("cayley_grad: 'dy'", dy, x.shape);
  checkShape("cayley_grad: result 'dx'", dx, x.shape);
  checkShape("cayley_grad: result 'ds'", ds, s.shape);
  const int64_t d = x.dim(-1), tokens = leadingCount(x.shape, 1);
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
