// Fast elementwise kernels: add / sub / mul with trailing-suffix broadcast,
// scale, dropout, sum_to, spd_gate and spd_gate_grad.
//
// Trailing-suffix broadcasting makes the big operand a stack of rows, each of
// the small operand's size: row r of the big one meets all of the small one.
// The arithmetic is the reference's, value for value: a float sum, difference
// or product computed in double and rounded once is the correctly rounded
// float result, so add / sub / mul are plain float operations; scale and
// spd_gate compute in double, as the reference does; sum_to and spd_gate's
// dgamma sum each column in row order in double, the reference's order. The
// results are therefore bit for bit the reference's, for any thread count.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "KernelUtil.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

// Whether `small` equals the trailing dimensions of `big`.
bool isTrailingSuffix(const std::vector<int64_t> &small, const std::vector<int64_t> &big) {
  if (small.size() > big.size())
    return false;
  const size_t offset = big.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i)
    if (small[i] != big[offset + i])
      return false;
  return true;
}

// y[i] = op(lhs[i % |lhs|], rhs[i % |rhs|]) after the reference's checks.
template <typename Op>
void binary(const char *kernel, TensorRef<const float> lhs, TensorRef<const float> rhs,
            TensorRef<float> y, Op op) {
  const bool lhsBig = lhs.rank() >= rhs.rank();
  const std::vector<int64_t> &big = lhsBig ? lhs.shape : rhs.shape;
  const std::vector<int64_t> &small = lhsBig ? rhs.shape : lhs.shape;
  check(isTrailingSuffix(small, big), kernel,
        "shapes " + ref::shapeToString(lhs.shape) + " and " + ref::shapeToString(rhs.shape) +
            ": neither is a trailing suffix of the other");
  checkShape((std::string(kernel) + ": result").c_str(), y, big);
  const int64_t n = y.numel(), nl = lhs.numel(), nr = rhs.numel();
  if (n == 0)
    return;
  const float *a = lhs.data, *b = rhs.data;
  float *out = y.data;
  if (nl == n && nr == n) { // same size: one flat pass
    parallelFor(0, n, kElementGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        out[i] = op(a[i], b[i]);
    });
    return;
  }
  // Rows of the small operand's size m; the big one steps by a row.
  const int64_t m = nl < nr ? nl : nr, rows = n / m;
  const bool lhsSmall = nl < nr;
  parallelFor(0, rows, rowGrain(m), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float *o = out + r * m;
      if (lhsSmall) {
        const float *br = b + r * m;
        for (int64_t j = 0; j < m; ++j)
          o[j] = op(a[j], br[j]);
      } else {
        const float *ar = a + r * m;
        for (int64_t j = 0; j < m; ++j)
          o[j] = op(ar[j], b[j]);
      }
    }
  });
}

} // namespace

void add(TensorRef<const float> lhs, TensorRef<const float> rhs, TensorRef<float> y) {
  binary("add", lhs, rhs, y, [](float a, float b) { return a + b; });
}

void sub(TensorRef<const float> lhs, TensorRef<const float> rhs, TensorRef<float> y) {
  binary("sub", lhs, rhs, y, [](float a, float b) { return a - b; });
}

void mul(TensorRef<const float> lhs, TensorRef<const float> rhs, TensorRef<float> y) {
  binary("mul", lhs, rhs, y, [](float a, float b) { return a * b; });
}

void scale(TensorRef<const float> x, double factor, double bias, TensorRef<float> y) {
  checkShape("scale: result", y, x.shape);
  const float *in = x.data;
  float *out = y.data;
  parallelFor(0, x.numel(), kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      out[i] = static_cast<float>(factor * static_cast<double>(in[i]) + bias);
  });
}

void dropout(TensorRef<const float> x, double p, bool perSample, int64_t stream,
             const StepKey &key, TensorRef<float> y) {
  check(x.rank() >= 1, "dropout", "x must have the batch dimension first, found rank 0");
  checkShape("dropout: result", y, x.shape);
  const int64_t samples = x.shape[0];
  const int64_t perRow = samples > 0 ? x.numel() / samples : 0;
  const std::string why = dropoutDomainError(p, stream, key, samples, perRow);
  check(why.empty(), "dropout", why);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  const float *in = x.data;
  float *out = y.data;
  if (perSample) { // one draw a sample: element 0's
    parallelFor(0, samples, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(perRow, 1)),
                [&](int64_t b0, int64_t b1) {
                  for (int64_t b = b0; b < b1; ++b) {
                    const bool keep = dropoutKeeps(
                        dropoutBlock(key, stream, key.firstSample + b, 0)[0], p);
                    for (int64_t r = b * perRow; r < (b + 1) * perRow; ++r)
                      out[r] = keep ? in[r] * scale : 0.0f;
                  }
                });
    return;
  }
  const int64_t groups = (perRow + 3) / 4; // one Philox block each
  parallelFor(0, samples * groups, kElementGrain / 4, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t b = g / groups, group = g % groups;
      const Philox4x32::Counter words = dropoutBlock(key, stream, key.firstSample + b, group);
      const int64_t first = group * 4, last = std::min(first + 4, perRow);
      for (int64_t r = first; r < last; ++r) {
        const int64_t i = b * perRow + r;
        out[i] = dropoutKeeps(words[size_t(r - first)], p) ? in[i] * scale : 0.0f;
      }
    }
  });
}

void sumTo(TensorRef<const float> x, TensorRef<float> y) {
  check(isTrailingSuffix(y.shape, x.shape), "sum_to",
        "result shape " + ref::shapeToString(y.shape) + " is not a trailing suffix of " +
            ref::shapeToString(x.shape));
  const int64_t ny = y.numel();
  if (ny == 0)
    return;
  // x as [rows, ny]: column sums in row order, in double (the reference's order).
  columnSums(x.data, x.numel() / ny, ny, y.data);
}

namespace {

// exp(gamma) in double after the reference's check (gamma a trailing suffix of x).
std::vector<double> gate(const char *what, TensorRef<const float> x,
                         TensorRef<const float> gamma) {
  check(gamma.rank() >= 1 && isTrailingSuffix(gamma.shape, x.shape), what,
        "the shape of 'gamma' " + ref::shapeToString(gamma.shape) +
            " must be a trailing suffix of the shape of 'x' " + ref::shapeToString(x.shape));
  std::vector<double> e(static_cast<size_t>(gamma.numel()));
  for (int64_t i = 0; i < gamma.numel(); ++i)
    e[i] = std::exp(static_cast<double>(gamma.data[i]));
  return e;
}

} // namespace

void spdGate(TensorRef<const float> x, TensorRef<const float> gamma, TensorRef<float> y) {
  const std::vector<double> e = gate("spd_gate", x, gamma);
  checkShape("spd_gate: result", y, x.shape);
  const int64_t g = gamma.numel();
  if (g == 0 || x.numel() == 0)
    return;
  const float *in = x.data;
  float *out = y.data;
  parallelFor(0, x.numel() / g, rowGrain(g), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < g; ++j)
        out[r * g + j] = static_cast<float>(static_cast<double>(in[r * g + j]) * e[j]);
  });
}

void spdGateGrad(TensorRef<const float> x, TensorRef<const float> gamma,
                 TensorRef<const float> dy, TensorRef<float> dx, TensorRef<float> dgamma) {
  const std::vector<double> e = gate("spd_gate_grad", x, gamma);
  checkShape("spd_gate_grad: 'dy'", dy, x.shape);
  checkShape("spd_gate_grad: result 'dx'", dx, x.shape);
  checkShape("spd_gate_grad: result 'dgamma'", dgamma, gamma.shape);
  const int64_t g = gamma.numel();
  if (g == 0)
    return;
  const int64_t rows = x.numel() / g;
  parallelFor(0, rows, rowGrain(g), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < g; ++j)
        dx.data[r * g + j] = static_cast<float>(static_cast<double>(dy.data[r * g + j]) * e[j]);
  });
  // dgamma[j] = sum_r dy x e_j, each column in row order (column blocks in parallel).
  parallelFor(0, g, 16, [&](int64_t j0, int64_t j1) {
    std::vector<double> acc(static_cast<size_t>(j1 - j0), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = j0; j < j1; ++j)
        acc[j - j0] += static_cast<double>(dy.data[r * g + j]) *
                       static_cast<double>(x.data[r * g + j]) * e[j];
    for (int64_t j = j0; j < j1; ++j)
      dgamma.data[j] = static_cast<float>(acc[j - j0]);
  });
}

} // namespace stringrt::cpu
