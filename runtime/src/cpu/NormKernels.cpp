// Fast layer_norm and gelu kernels and their backward ops: rows (or
// elements) in parallel, float arithmetic.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "KernelUtil.h"

#include <cmath>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

// Mean and 1/sqrt(biased variance + epsilon) of one row, two-pass (the
// variance of the centred values, not E[x^2] - mean^2, which cancels badly).
void rowStatistics(const float *row, int64_t D, double epsilon, float &mean, float &rstd) {
  float sum = 0.0f;
  for (int64_t d = 0; d < D; ++d)
    sum += row[d];
  mean = sum / static_cast<float>(D);
  float sq = 0.0f;
  for (int64_t d = 0; d < D; ++d) {
    const float c = row[d] - mean;
    sq += c * c;
  }
  rstd = static_cast<float>(1.0 / std::sqrt(static_cast<double>(sq) / D + epsilon));
}

int64_t checkLayerNormShapes(const std::string &kernel, const TensorRef<const float> &x,
                             const TensorRef<const float> &gamma, double epsilon) {
  checkHasLastDim(kernel + ": x", x);
  const int64_t D = x.dim(-1);
  checkShape((kernel + ": gamma").c_str(), gamma, {D});
  check(epsilon > 0, kernel.c_str(), "epsilon must be > 0, got " + std::to_string(epsilon));
  return D;
}

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f; // sqrt(2 / pi)
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1 / sqrt(2 pi)
constexpr float kGeluC = 0.044715f;

float geluValue(float x, bool approximate) {
  if (approximate)
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x)));
  return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
}

float geluDerivative(float x, bool approximate) {
  if (approximate) {
    const float t = std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x));
    return 0.5f * (1.0f + t) +
           0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluC * x * x);
  }
  const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
  const float pdf = std::exp(-0.5f * x * x) * kInvSqrt2Pi;
  return cdf + x * pdf;
}

} // namespace

void layerNorm(TensorRef<const float> x, TensorRef<const float> gamma,
               TensorRef<const float> beta, double epsilon, TensorRef<float> y) {
  const int64_t D = checkLayerNormShapes("layer_norm", x, gamma, epsilon);
  checkShape("layer_norm: beta", beta, {D});
  checkShape("layer_norm: result", y, x.shape);
  const int64_t N = rowCount(x.shape);
  parallelFor(0, N, rowGrain(D), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const float *row = x.data + n * D;
      float *out = y.data + n * D;
      float mean, rstd;
      rowStatistics(row, D, epsilon, mean, rstd);
      for (int64_t d = 0; d < D; ++d)
        out[d] = (row[d] - mean) * rstd * gamma.data[d] + beta.data[d];
    }
  });
}

namespace {

// Pass 1, rows in parallel: the row statistics (kept) and
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),  g = dy gamma,
// plus prior (when given) as dx is stored: prior + dx rounded after dx, the
// bits of the add after it.
// Pass 2, columns in parallel: dgamma = sum_rows dy xhat, dbeta = sum_rows dy,
// each column in row order - a sum split over rows would depend on the
// thread count.
void layerNormGradWithPrior(const float *prior, TensorRef<const float> x,
                            TensorRef<const float> gamma, TensorRef<const float> dy,
                            double epsilon, TensorRef<float> dx, TensorRef<float> dgamma,
                            TensorRef<float> dbeta) {
  const int64_t D = checkLayerNormShapes("layer_norm_grad", x, gamma, epsilon);
  checkShape("layer_norm_grad: dy", dy, x.shape);
  checkShape("layer_norm_grad: dx", dx, x.shape);
  checkShape("layer_norm_grad: dgamma", dgamma, {D});
  checkShape("layer_norm_grad: dbeta", dbeta, {D});
  const int64_t N = rowCount(x.shape);
  std::vector<float> means(static_cast<size_t>(N)), rstds(static_cast<size_t>(N));

  parallelFor(0, N, rowGrain(D), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const float *row = x.data + n * D;
      const float *dyRow = dy.data + n * D;
      float mean, rstd;
      rowStatistics(row, D, epsilon, mean, rstd);
      means[n] = mean;
      rstds[n] = rstd;
      float sumG = 0.0f, sumGXhat = 0.0f;
      for (int64_t d = 0; d < D; ++d) {
        const float g = dyRow[d] * gamma.data[d];
        sumG += g;
        sumGXhat += g * (row[d] - mean) * rstd;
      }
      const float meanG = sumG / static_cast<float>(D);
      const float meanGXhat = sumGXhat / static_cast<float>(D);
      float *out = dx.data + n * D;
      for (int64_t d = 0; d < D; ++d) {
        const float xhat = (row[d] - mean) * rstd;
        out[d] = rstd * (dyRow[d] * gamma.data[d] - meanG - xhat * meanGXhat);
      }
      if (prior)
        for (int64_t d = 0; d < D; ++d)
          out[d] = prior[n * D + d] + out[d];
    }
  });

  parallelFor(0, D, 16, [&](int64_t d0, int64_t d1) {
    std::vector<double> dg(static_cast<size_t>(d1 - d0), 0.0), db(static_cast<size_t>(d1 - d0), 0.0);
    for (int64_t n = 0; n < N; ++n) {
      const float *row = x.data + n * D;
      const float *dyRow = dy.data + n * D;
      for (int64_t d = d0; d < d1; ++d) {
        const float xhat = (row[d] - means[n]) * rstds[n];
        dg[d - d0] += static_cast<double>(dyRow[d] * xhat);
        db[d - d0] += dyRow[d];
      }
    }
    for (int64_t d = d0; d < d1; ++d) {
      dgamma.data[d] = static_cast<float>(dg[d - d0]);
      dbeta.data[d] = static_cast<float>(db[d - d0]);
    }
  });
}

} // namespace

void layerNormGrad(TensorRef<const float> x, TensorRef<const float> gamma,
                   TensorRef<const float> dy, double epsilon, TensorRef<float> dx,
                   TensorRef<float> dgamma, TensorRef<float> dbeta) {
  layerNormGradWithPrior(nullptr, x, gamma, dy, epsilon, dx, dgamma, dbeta);
}

void layerNormGradAcc(TensorRef<const float> prior, TensorRef<const float> x,
                      TensorRef<const float> gamma, TensorRef<const float> dy, double epsilon,
                      TensorRef<float> dx, TensorRef<float> dgamma, TensorRef<float> dbeta) {
  checkShape("layer_norm_grad_acc: prior", prior, x.shape);
  layerNormGradWithPrior(prior.data, x, gamma, dy, epsilon, dx, dgamma, dbeta);
}

void gelu(TensorRef<const float> x, bool approximate, TensorRef<float> y) {
  checkShape("gelu: result", y, x.shape);
  parallelFor(0, x.numel(), kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      y.data[i] = geluValue(x.data[i], approximate);
  });
}

void geluGrad(TensorRef<const float> x, TensorRef<const float> dy, bool approximate,
              TensorRef<float> dx) {
  checkShape("gelu_grad: dy", dy, x.shape);
  checkShape("gelu_grad: dx", dx, x.shape);
  parallelFor(0, x.numel(), kElementGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      dx.data[i] = dy.data[i] * geluDerivative(x.data[i], approximate);
  });
}

} // namespace stringrt::cpu
