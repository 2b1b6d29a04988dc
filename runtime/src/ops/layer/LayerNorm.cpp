// pe.layer_norm and its gradients, pe.layer_norm_grad and the fused
// pe.layer_norm_grad_acc (dx added to a prior gradient; PELayerOps.td,
// PEFusedOps.td): the shape contract, the reference kernels, the fast
// kernels and the registration (ops/OpLibrary.h); layer_norm_grad_acc's
// reference kernel is its composition (ops/Compositions.cpp:
// layer_norm_grad's, then add's on dx). The kernels' declarations are in
// stringrt/ops/LayerOps.h; stringc's generated kernels of these ops
// are CpuGen/NormGen.cpp's, checked here before they run.
#include "../OpLibrary.h"

#include "../../cpu/KernelUtil.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/LayerOps.h"

#include <cmath>
#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::check;
using ref::checkShape;
using ref::TensorRef;

// x [..., D], gamma [D], epsilon > 0; returns D.
template <typename T>
int64_t layerNormInputs(const char *kernel, const TensorRef<const T> &x,
                        const TensorRef<const T> &gamma, double epsilon) {
  ref::layer::checkHasLastDim((std::string(kernel) + ": x").c_str(), x);
  const int64_t D = x.dim(-1);
  checkShape((std::string(kernel) + ": gamma").c_str(), gamma, {D});
  check(epsilon > 0, kernel, "epsilon must be > 0, got " + std::to_string(epsilon));
  return D;
}

// layer_norm: beta [D], the result x's shape.
template <typename T>
int64_t layerNormContract(const TensorRef<const T> &x, const TensorRef<const T> &gamma,
                       const TensorRef<const T> &beta, double epsilon, const TensorRef<T> &y) {
  const int64_t D = layerNormInputs("layer_norm", x, gamma, epsilon);
  checkShape("layer_norm: beta", beta, {D});
  checkShape("layer_norm: result", y, x.shape);
  return D;
}

// layer_norm_grad: dy and dx x's shape, dgamma and dbeta [D].
template <typename T>
int64_t layerNormGradContract(const TensorRef<const T> &x, const TensorRef<const T> &gamma,
                           const TensorRef<const T> &dy, double epsilon, const TensorRef<T> &dx,
                           const TensorRef<T> &dgamma, const TensorRef<T> &dbeta) {
  const int64_t D = layerNormInputs("layer_norm_grad", x, gamma, epsilon);
  checkShape("layer_norm_grad: dy", dy, x.shape);
  checkShape("layer_norm_grad: dx", dx, x.shape);
  checkShape("layer_norm_grad: dgamma", dgamma, {D});
  checkShape("layer_norm_grad: dbeta", dbeta, {D});
  return D;
}

// layer_norm_grad_acc: prior x's shape, then layer_norm_grad's.
template <typename T>
int64_t layerNormGradAccContract(const TensorRef<const T> &prior, const TensorRef<const T> &x,
                              const TensorRef<const T> &gamma, const TensorRef<const T> &dy,
                              double epsilon, const TensorRef<T> &dx, const TensorRef<T> &dgamma,
                              const TensorRef<T> &dbeta) {
  checkShape("layer_norm_grad_acc: prior", prior, x.shape);
  return layerNormGradContract(x, gamma, dy, epsilon, dx, dgamma, dbeta);
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;
using layer::rowCount;

namespace {

// Mean and 1/sqrt(biased variance + epsilon) of one row of D values.
template <typename T> void rowStatistics(const T *row, int64_t D, double epsilon, Acc &mu, Acc &rstd) {
  Acc sum = 0;
  for (int64_t d = 0; d < D; ++d)
    sum += row[d];
  mu = sum / Acc(D);
  Acc sq = 0;
  for (int64_t d = 0; d < D; ++d)
    sq += (Acc(row[d]) - mu) * (Acc(row[d]) - mu);
  rstd = 1.0 / std::sqrt(sq / Acc(D) + epsilon);
}

} // namespace

// y = (x - mu) rstd gamma + beta, row by row.
template <typename T>
void layerNorm(TensorRef<const T> x, TensorRef<const T> gamma, TensorRef<const T> beta,
               double epsilon, TensorRef<T> y) {
  const int64_t D = ops::layerNormContract(x, gamma, beta, epsilon, y);
  const int64_t N = rowCount(x.shape);
  for (int64_t n = 0; n < N; ++n) {
    const T *row = x.data + n * D;
    Acc mu, rstd;
    rowStatistics(row, D, epsilon, mu, rstd);
    for (int64_t d = 0; d < D; ++d)
      y.data[n * D + d] =
          static_cast<T>((Acc(row[d]) - mu) * rstd * Acc(gamma.data[d]) + Acc(beta.data[d]));
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma;
// dgamma += dy xhat, dbeta += dy over the rows.
template <typename T>
void layerNormGrad(TensorRef<const T> x, TensorRef<const T> gamma, TensorRef<const T> dy,
                   double epsilon, TensorRef<T> dx, TensorRef<T> dgamma, TensorRef<T> dbeta) {
  const int64_t D = ops::layerNormGradContract(x, gamma, dy, epsilon, dx, dgamma, dbeta);
  const int64_t N = rowCount(x.shape);
  std::vector<Acc> dgammaAcc(static_cast<size_t>(D), 0), dbetaAcc(static_cast<size_t>(D), 0);
  std::vector<Acc> xhat(static_cast<size_t>(D)), g(static_cast<size_t>(D));
  for (int64_t n = 0; n < N; ++n) {
    const T *row = x.data + n * D;
    const T *dyRow = dy.data + n * D;
    Acc mu, rstd;
    rowStatistics(row, D, epsilon, mu, rstd);
    Acc meanG = 0, meanGXhat = 0;
    for (int64_t d = 0; d < D; ++d) {
      xhat[d] = (Acc(row[d]) - mu) * rstd;
      g[d] = Acc(dyRow[d]) * Acc(gamma.data[d]);
      meanG += g[d];
      meanGXhat += g[d] * xhat[d];
      dgammaAcc[d] += Acc(dyRow[d]) * xhat[d];
      dbetaAcc[d] += Acc(dyRow[d]);
    }
    meanG /= Acc(D);
    meanGXhat /= Acc(D);
    for (int64_t d = 0; d < D; ++d)
      dx.data[n * D + d] = static_cast<T>(rstd * (g[d] - meanG - xhat[d] * meanGXhat));
  }
  for (int64_t d = 0; d < D; ++d) {
    dgamma.data[d] = static_cast<T>(dgammaAcc[d]);
    dbeta.data[d] = static_cast<T>(dbetaAcc[d]);
  }
}

#define STRINGRT_INSTANTIATE(T)                                                                    \
  template void layerNorm<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>, double,   \
                             TensorRef<T>);                                                        \
  template void layerNormGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,       \
                                 double, TensorRef<T>, TensorRef<T>, TensorRef<T>);
STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: rows in parallel, float arithmetic
//===----------------------------------------------------------------------===//

namespace stringrt::cpu {

using util::rowCount;
using util::rowGrain;

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

} // namespace

void layerNorm(TensorRef<const float> x, TensorRef<const float> gamma,
               TensorRef<const float> beta, double epsilon, TensorRef<float> y) {
  const int64_t D = ops::layerNormContract(x, gamma, beta, epsilon, y);
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
// thread count. The caller has checked the arguments.
void layerNormGradWithPrior(const float *prior, TensorRef<const float> x,
                            TensorRef<const float> gamma, TensorRef<const float> dy,
                            double epsilon, int64_t D, TensorRef<float> dx,
                            TensorRef<float> dgamma, TensorRef<float> dbeta) {
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
  const int64_t D = ops::layerNormGradContract(x, gamma, dy, epsilon, dx, dgamma, dbeta);
  layerNormGradWithPrior(nullptr, x, gamma, dy, epsilon, D, dx, dgamma, dbeta);
}

void layerNormGradAcc(TensorRef<const float> prior, TensorRef<const float> x,
                      TensorRef<const float> gamma, TensorRef<const float> dy, double epsilon,
                      TensorRef<float> dx, TensorRef<float> dgamma, TensorRef<float> dbeta) {
  const int64_t D = ops::layerNormGradAccContract(prior, x, gamma, dy, epsilon, dx, dgamma, dbeta);
  layerNormGradWithPrior(prior.data, x, gamma, dy, epsilon, D, dx, dgamma, dbeta);
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

void runLayerNorm(const OpContext &c) {
  ref::layerNorm<float>(c.in(0), c.in(1), c.in(2), attrs::LayerNorm{c.op()}.epsilon(), c.out(0));
}
void checkLayerNorm(const OpContext &c) {
  layerNormContract<float>(c.in(0), c.in(1), c.in(2), attrs::LayerNorm{c.op()}.epsilon(), c.out(0));
}
void runFastLayerNorm(const OpContext &c) {
  cpu::layerNorm(c.in(0), c.in(1), c.in(2), attrs::LayerNorm{c.op()}.epsilon(), c.out(0));
}

void runLayerNormGrad(const OpContext &c) {
  ref::layerNormGrad<float>(c.in(0), c.in(1), c.in(2), attrs::LayerNormGrad{c.op()}.epsilon(),
                            c.out(0), c.out(1), c.out(2));
}
void checkLayerNormGrad(const OpContext &c) {
  layerNormGradContract<float>(c.in(0), c.in(1), c.in(2), attrs::LayerNormGrad{c.op()}.epsilon(),
                            c.out(0), c.out(1), c.out(2));
}
void runFastLayerNormGrad(const OpContext &c) {
  cpu::layerNormGrad(c.in(0), c.in(1), c.in(2), attrs::LayerNormGrad{c.op()}.epsilon(), c.out(0),
                     c.out(1), c.out(2));
}

// Operands prior, x, gamma, dy. The contract alone runs before a compiled
// kernel and before the composition (runComposition).
void checkLayerNormGradAcc(const OpContext &c) {
  layerNormGradAccContract<float>(c.in(0), c.in(1), c.in(2), c.in(3),
                               attrs::LayerNormGradAcc{c.op()}.epsilon(), c.out(0), c.out(1),
                               c.out(2));
}
void runFastLayerNormGradAcc(const OpContext &c) {
  cpu::layerNormGradAcc(c.in(0), c.in(1), c.in(2), c.in(3),
                        attrs::LayerNormGradAcc{c.op()}.epsilon(), c.out(0), c.out(1), c.out(2));
}

} // namespace

template <> void registerOps<OpCode::LayerNorm>(OpRegistry &registry) {
  registry.add(OpCode::LayerNorm, {runLayerNorm, checkLayerNorm, runFastLayerNorm});
  registry.add(OpCode::LayerNormGrad, {runLayerNormGrad, checkLayerNormGrad, runFastLayerNormGrad});
  registry.add(OpCode::LayerNormGradAcc,
               {nullptr, checkLayerNormGradAcc, runFastLayerNormGradAcc});
}

} // namespace stringrt::ops
