// AdamWUpdate.h: the scalar loop and its AVX2 twin.
#include "training/AdamWUpdate.h"

#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define STRINGRT_ADAMW_AVX2 1
#endif

namespace stringrt::detail {

void adamwUpdateScalar(const AdamWConstants &c, const float *grads, float *params, float *m,
                       float *v, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const double g = c.gradScale * static_cast<double>(grads[i]);
    const double w = params[i];
    const double mi = c.beta1 * static_cast<double>(m[i]) + (1.0 - c.beta1) * g;
    const double vi = c.beta2 * static_cast<double>(v[i]) + (1.0 - c.beta2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    const double update =
        mi / c.biasCorrection1 / (std::sqrt(vi / c.biasCorrection2) + c.eps) + c.weightDecay * w;
    params[i] = static_cast<float>(w - c.lr * update);
  }
}

#ifdef STRINGRT_ADAMW_AVX2
namespace {

// "avx2" alone, not "fma", so that the compiler cannot contract a product
// and a sum into one rounding, which would change the bits.
__attribute__((target("avx2"))) void adamwUpdateAvx2(const AdamWConstants &c, const float *grads,
                                                     float *params, float *m, float *v,
                                                     size_t begin, size_t end) {
  const __m256d scale = _mm256_set1_pd(c.gradScale), b1 = _mm256_set1_pd(c.beta1),
                b2 = _mm256_set1_pd(c.beta2), oneMinusB1 = _mm256_set1_pd(1.0 - c.beta1),
                oneMinusB2 = _mm256_set1_pd(1.0 - c.beta2),
                bc1 = _mm256_set1_pd(c.biasCorrection1), bc2 = _mm256_set1_pd(c.biasCorrection2),
                eps = _mm256_set1_pd(c.eps), wd = _mm256_set1_pd(c.weightDecay),
                lr = _mm256_set1_pd(c.lr);
  size_t i = begin;
  for (; i + 4 <= end; i += 4) {
    const __m256d g = _mm256_mul_pd(scale, _mm256_cvtps_pd(_mm_loadu_ps(grads + i)));
    const __m256d w = _mm256_cvtps_pd(_mm_loadu_ps(params + i));
    const __m256d mi = _mm256_add_pd(_mm256_mul_pd(b1, _mm256_cvtps_pd(_mm_loadu_ps(m + i))),
                                     _mm256_mul_pd(oneMinusB1, g));
    const __m256d vi =
        _mm256_add_pd(_mm256_mul_pd(b2, _mm256_cvtps_pd(_mm_loadu_ps(v + i))),
                      _mm256_mul_pd(_mm256_mul_pd(oneMinusB2, g), g));
    _mm_storeu_ps(m + i, _mm256_cvtpd_ps(mi));
    _mm_storeu_ps(v + i, _mm256_cvtpd_ps(vi));
    const __m256d denominator = _mm256_add_pd(_mm256_sqrt_pd(_mm256_div_pd(vi, bc2)), eps);
    const __m256d update =
        _mm256_add_pd(_mm256_div_pd(_mm256_div_pd(mi, bc1), denominator), _mm256_mul_pd(wd, w));
    _mm_storeu_ps(params + i, _mm256_cvtpd_ps(_mm256_sub_pd(w, _mm256_mul_pd(lr, update))));
  }
  adamwUpdateScalar(c, grads, params, m, v, i, end);
}

bool hasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

} // namespace
#endif

void adamwUpdate(const AdamWConstants &c, const float *grads, float *params, float *m, float *v,
                 size_t begin, size_t end) {
#ifdef STRINGRT_ADAMW_AVX2
  if (hasAvx2())
    return adamwUpdateAvx2(c, grads, params, m, v, begin, end);
#endif
  adamwUpdateScalar(c, grads, params, m, v, begin, end);
}

} // namespace stringrt::detail
