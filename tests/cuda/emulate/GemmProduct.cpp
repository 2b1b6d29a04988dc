// The emulator GEMM's products (EmulatedGemm.h, gemmProduct): an f32 FMA
// chain in k order for every element, as std::fma computes it one element at
// a time, eight elements to a vector where the host has AVX2 and FMA.
//
// The same bits as std::fma in every case: an FMA rounds once, whatever
// the width of the instruction, and the operands keep glibc's order in
// fmaf (vfmadd213: a * b + c with a as the first operand), which decides
// which NaN comes out when several are NaN. Inline assembly keeps that
// order: a compiler may swap an FMA's multiplicands.
#include "EmulatedGemm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace stringrt::emulator {
namespace {

void productPortable(const float *a, const float *b, float *product, int m, int n, int k) {
  for (int j = 0; j < n; ++j) {
    float *column = product + size_t(j) * m;
    for (int i = 0; i < m; ++i)
      column[i] = 0.0f;
    for (int p = 0; p < k; ++p) {
      const float bp = b[size_t(j) * k + p];
      const float *ap = a + size_t(p) * m;
      for (int i = 0; i < m; ++i)
        column[i] = std::fma(ap[i], bp, column[i]);
    }
  }
}

#if defined(__x86_64__)
// a * b + c, rounded once; NaN priority a, b, c (glibc's fmaf).
__attribute__((target("avx2,fma"))) inline __m256 fma8(__m256 a, __m256 b, __m256 c) {
  asm("vfmadd213ps %[c], %[b], %[a]" : [a] "+x"(a) : [b] "x"(b), [c] "x"(c));
  return a;
}
__attribute__((target("avx2,fma"))) inline float fma1(float a, float b, float c) {
  __m128 x = _mm_set_ss(a), y = _mm_set_ss(b), z = _mm_set_ss(c);
  asm("vfmadd213ss %[c], %[b], %[a]" : [a] "+x"(x) : [b] "x"(y), [c] "x"(z));
  return _mm_cvtss_f32(x);
}

// Columns j .. j + 3 (fewer at the end), rows in tiles of 16 then one at a
// time; every element's chain starts at +0 and runs p = 0 .. k - 1.
__attribute__((target("avx2,fma"))) void productAvx2(const float *a, const float *b,
                                                     float *product, int m, int n, int k) {
  constexpr int kCols = 4;
  for (int j = 0; j < n; j += kCols) {
    const int cols = std::min(kCols, n - j);
    const float *bj[kCols];
    float *out[kCols];
    for (int c = 0; c < kCols; ++c) {
      const int column = j + std::min(c, cols - 1); // repeats the last: computed, not stored
      bj[c] = b + size_t(column) * k;
      out[c] = product + size_t(column) * m;
    }
    int i = 0;
    for (; i + 16 <= m; i += 16) {
      __m256 acc[kCols][2];
      for (int c = 0; c < kCols; ++c)
        acc[c][0] = acc[c][1] = _mm256_setzero_ps();
      for (int p = 0; p < k; ++p) {
        const float *ap = a + size_t(p) * m + i;
        const __m256 a0 = _mm256_loadu_ps(ap), a1 = _mm256_loadu_ps(ap + 8);
        for (int c = 0; c < kCols; ++c) {
          const __m256 bp = _mm256_broadcast_ss(bj[c] + p);
          acc[c][0] = fma8(a0, bp, acc[c][0]);
          acc[c][1] = fma8(a1, bp, acc[c][1]);
        }
      }
      for (int c = 0; c < cols; ++c) {
        _mm256_storeu_ps(out[c] + i, acc[c][0]);
        _mm256_storeu_ps(out[c] + i + 8, acc[c][1]);
      }
    }
    for (; i < m; ++i)
      for (int c = 0; c < cols; ++c) {
        float sum = 0.0f;
        for (int p = 0; p < k; ++p)
          sum = fma1(a[size_t(p) * m + i], bj[c][p], sum);
        out[c][i] = sum;
      }
  }
}

bool hostHasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
#endif

} // namespace

void gemmProduct(const float *a, const float *b, float *product, int m, int n, int k) {
#if defined(__x86_64__)
  if (hostHasAvx2Fma())
    return productAvx2(a, b, product, m, n, k);
#endif
  productPortable(a, b, product, m, n, k);
}

} // namespace stringrt::emulator
