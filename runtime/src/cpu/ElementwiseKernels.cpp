// Fast elementwise kernels: spd_gate and spd_gate_grad.
//
// The arithmetic is the reference's, value for value: spd_gate computes in
// double, as the reference does, and its dgamma sums each column in row
// order in double, the reference's order. The results are therefore
// bit for bit the reference's, for any thread count.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "KernelUtil.h"

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
