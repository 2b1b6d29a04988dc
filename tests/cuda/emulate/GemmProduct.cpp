// The emulator GEMM's products (EmulatedGemm.h, gemmProduct): an f32 FMA
// chain in k order for every element, as std::fma computes it one element at
// a time, eight elements to a vector where the host has AVX2 and FMA.
//
// The same bits as fmaf one element at a time: an FMA rounds once, whatever
// the width of the instruction. The instruction's operand order decides
// which NaN comes out when several operands are NaN: glibc's fmaf(x, y, z)
// is vfmadd213 with x first, and the emulator's GEMM called it as
// fmaf(b, a, c) (GCC swapped std::fma(a, b, c)'s multiplicands; in some of
// its bf16-input paths it did not, so there two NaN multiplicands of
// different payloads may now give the other one). Inline assembly keeps
// the order: a compiler may swap an FMA's multiplicands.
#include "EmulatedGemm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

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
        column[i] = std::fma(bp, ap[i], column[i]);
    }
  }
}

#if defined(__x86_64__)
// x * y + z, rounded once, as glibc's fmaf(x, y, z) (vfmadd213, x first).
__attribute__((target("avx2,fma"))) inline __m256 fma8(__m256 x, __m256 y, __m256 z) {
  asm("vfmadd213ps %[z], %[y], %[x]" : [x] "+x"(x) : [y] "x"(y), [z] "x"(z));
  return x;
}
__attribute__((target("avx2,fma"))) inline float fma1(float x, float y, float z) {
  __m128 a = _mm_set_ss(x), b = _mm_set_ss(y), c = _mm_set_ss(z);
  asm("vfmadd213ss %[c], %[b], %[a]" : [a] "+x"(a) : [b] "x"(b), [c] "x"(c));
  return _mm_cvtss_f32(a);
}

// Rows in tiles of 16 (a tile of op(A) copied first, p-major, so that the
// chains read it in order), columns four at a time (fewer at the end); the
// rows past the last tile one at a time. Every element's chain starts at +0
// and runs p = 0 .. k - 1.
__attribute__((target("avx2,fma"))) void productAvx2(const float *a, const float *b,
                                                     float *product, int m, int n, int k) {
  constexpr int kRows = 16, kCols = 4;
  std::vector<float> tile(size_t(k) * kRows);
  const int tiled = m - m % kRows;
  for (int i = 0; i < tiled; i += kRows) {
    for (int p = 0; p < k; ++p)
      std::copy(a + size_t(p) * m + i, a + size_t(p) * m + i + kRows,
                tile.data() + size_t(p) * kRows);
    for (int j = 0; j < n; j += kCols) {
      const int cols = std::min(kCols, n - j);
      const float *bj[kCols];
      for (int c = 0; c < kCols; ++c) // the last column repeated: computed, not stored
        bj[c] = b + size_t(j + std::min(c, cols - 1)) * k;
      __m256 acc[kCols][2];
      for (int c = 0; c < kCols; ++c)
        acc[c][0] = acc[c][1] = _mm256_setzero_ps();
      for (int p = 0; p < k; ++p) {
        const float *ap = tile.data() + size_t(p) * kRows;
        const __m256 a0 = _mm256_loadu_ps(ap), a1 = _mm256_loadu_ps(ap + 8);
        for (int c = 0; c < kCols; ++c) {
          const __m256 bp = _mm256_broadcast_ss(bj[c] + p);
          acc[c][0] = fma8(bp, a0, acc[c][0]);
          acc[c][1] = fma8(bp, a1, acc[c][1]);
        }
      }
      for (int c = 0; c < cols; ++c) {
        float *out = product + size_t(j + c) * m + i;
        _mm256_storeu_ps(out, acc[c][0]);
        _mm256_storeu_ps(out + 8, acc[c][1]);
      }
    }
  }
  for (int i = tiled; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int p = 0; p < k; ++p)
        sum = fma1(b[size_t(j) * k + p], a[size_t(p) * m + i], sum);
      product[size_t(j) * m + i] = sum;
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
