// The register tile of the CPU GEMMs (private to src/cpu): a Rows x Cols
// block of C in SIMD registers, updated by outer products of a column of A
// and a row of B, one k at a time. The packed GEMM (Gemm.cpp) runs it on
// packed panels, the outer-product GEMM (GemmOuterProduct.cpp) on the rows
// of A and B in place.
//
// A row of the tile is Cols / Lanes SIMD values of Lanes floats, Lanes the
// instruction set's width (16 with AVX-512, 8 with AVX2, 4 with SSE2; GCC /
// Clang vector extensions). A 16-float type built for AVX2 made GCC 12 move
// the accumulators through the stack on every update: on a Zen 3 EPYC the
// weight gradients took 82% of vit_rope's step, 539 ms of 657. Each element
// gets acc + a b in k order; the AVX-512 and AVX2 builds contract the update
// to one FMA (the same bits), the SSE2 build multiplies, rounds and adds.
#pragma once

#include <cstdint>
#include <cstring>

namespace stringrt::cpu::util {

// The instruction sets the tile kernels are built for, widest first. AVX-512
// and AVX2 (with FMA) add each term with one FMA and give the same bits;
// SSE2, the x86-64 baseline (and every other CPU), multiplies, rounds and adds.
enum class SimdLevel { Avx512, Avx2, Sse2 };

// The widest of them the running CPU has (decided once per process).
inline SimdLevel widestSimdLevel() {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  static const SimdLevel widest = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
      return SimdLevel::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return SimdLevel::Avx2;
    return SimdLevel::Sse2;
  }();
  return widest;
#else
  return SimdLevel::Sse2;
#endif
}

// Inlined into each instruction set's build of the caller.
#if defined(__GNUC__)
#define STRINGRT_INLINE_INTO_CALLER __attribute__((always_inline)) inline

template <int Lanes> struct SimdOf {
  typedef float type __attribute__((vector_size(Lanes * sizeof(float))));
};

// A Rows x Cols tile in registers: Cols / Lanes SIMD values per row.
template <int Rows, int Lanes, int Cols> struct Tile {
  static_assert(Cols % Lanes == 0, "a tile row is whole SIMD values");
  static constexpr int kParts = Cols / Lanes;
  typename SimdOf<Lanes>::type v[Rows][kParts];
};

// tile[m, :Cols] += sum_k a[k * aStepK + m * aStepM] b[k * ldb + :Cols] for
// m < Rows, k = 0..kc-1 in order. Columns of A^T-shaped panels (GEMM
// packing, weight gradients) have aStepM 1; rows of A (GemmRowTiles.cpp)
// aStepK 1. The tile stays in registers (callers inline it and pass a local).
template <int Rows, int Lanes, int Cols>
STRINGRT_INLINE_INTO_CALLER void addOuterProductsTo(Tile<Rows, Lanes, Cols> &tile, int64_t kc,
                                                    const float *__restrict a, int64_t aStepK,
                                                    int64_t aStepM, const float *__restrict b,
                                                    int64_t ldb) {
  using Vec = typename SimdOf<Lanes>::type;
  constexpr int kParts = Tile<Rows, Lanes, Cols>::kParts;
  for (int64_t k = 0; k < kc; ++k) {
    Vec bk[kParts];
    for (int part = 0; part < kParts; ++part) // rows need not be aligned
      std::memcpy(&bk[part], b + k * ldb + part * Lanes, sizeof(Vec));
    // Row by row, each broadcast of a used at once: with the parts outside
    // (every broadcast live at once), GCC 12 spilled three of the 12
    // accumulators of the AVX2 6 x 16 tile through the stack.
    for (int m = 0; m < Rows; ++m) {
      const float am = a[k * aStepK + m * aStepM];
      for (int part = 0; part < kParts; ++part)
        tile.v[m][part] += am * bk[part];
    }
  }
}

// acc[m, :Cols] += sum_k a[k * lda + m] b[k * ldb + :Cols] for m < Rows,
// k = 0..kc-1 in order (columns of A^T); acc's rows are accLd apart.
template <int Rows, int Lanes, int Cols>
STRINGRT_INLINE_INTO_CALLER void
addOuterProducts(int64_t kc, const float *__restrict a, int64_t lda, const float *__restrict b,
                 int64_t ldb, float *__restrict acc, int64_t accLd) {
  using Vec = typename SimdOf<Lanes>::type;
  Tile<Rows, Lanes, Cols> tile;
  for (int m = 0; m < Rows; ++m)
    for (int part = 0; part < tile.kParts; ++part)
      std::memcpy(&tile.v[m][part], acc + m * accLd + part * Lanes, sizeof(Vec));
  addOuterProductsTo(tile, kc, a, lda, 1, b, ldb);
  for (int m = 0; m < Rows; ++m)
    for (int part = 0; part < tile.kParts; ++part)
      std::memcpy(acc + m * accLd + part * Lanes, &tile.v[m][part], sizeof(Vec));
}
#else
#define STRINGRT_INLINE_INTO_CALLER inline

template <int Rows, int Lanes, int Cols>
void addOuterProducts(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                      float *acc, int64_t accLd) {
  for (int64_t k = 0; k < kc; ++k)
    for (int m = 0; m < Rows; ++m)
      for (int64_t n = 0; n < Cols; ++n)
        acc[m * accLd + n] += a[k * lda + m] * b[k * ldb + n];
}
#endif

} // namespace stringrt::cpu::util
