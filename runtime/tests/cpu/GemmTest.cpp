// The private GEMM (src/cpu/Gemm.h), pooled and serial, against a plain
// double-precision product: every transpose pair, odd and multi-block sizes,
// strided operands, alpha / beta, beta = 0 ignoring NaNs in C, K = 0; the
// outer-product kernel of every instruction set the CPU has; the row-tile
// kernel's bits (and gemm()'s, on a CPU where gemm() takes it).
#include "Gemm.h"
#include "GemmOuterProduct.h"
#include "GemmRowTiles.h"

#include "CpuTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace stringrt::cpu;
using namespace stringrt::cpu::testing;

struct Case {
  int64_t M, N, K;
};

// C = alpha op(A) op(B) + beta C in double, C given as floats.
std::vector<float> naive(Trans ta, Trans tb, const Case &c, float alpha, const std::vector<float> &A,
                         int64_t lda, const std::vector<float> &B, int64_t ldb, float beta,
                         std::vector<float> C, int64_t ldc) {
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = ta == Trans::No ? A[i * lda + k] : A[k * lda + i];
        const double b = tb == Trans::No ? B[k * ldb + j] : B[j * ldb + k];
        s += a * b;
      }
      const double prior = beta == 0.0f ? 0.0 : double(beta) * C[i * ldc + j];
      C[i * ldc + j] = static_cast<float>(alpha * s + prior);
    }
  return C;
}

TEST(CpuGemm, MatchesPlainProductEveryTransposeAndSize) {
  const std::vector<Case> cases = {{1, 1, 1},    {5, 17, 3},   {4, 16, 256}, {33, 70, 300},
                                   {64, 128, 9}, {130, 5, 513}, {3, 3, 0},
                                   // A^T B with a long K (the outer-product kernel):
                                   // full tiles, partial rows and columns, a partial chunk
                                   {16, 32, 600}, {37, 45, 777}, {6, 70, 1200}};
  uint32_t seed = 1;
  for (const Case &c : cases)
    for (Trans ta : {Trans::No, Trans::Yes})
      for (Trans tb : {Trans::No, Trans::Yes})
        for (bool serial : {false, true})
          for (float beta : {0.0f, 1.0f, -0.5f}) {
            const std::string name = "M" + std::to_string(c.M) + " N" + std::to_string(c.N) +
                                     " K" + std::to_string(c.K) + (ta == Trans::Yes ? " At" : "") +
                                     (tb == Trans::Yes ? " Bt" : "") +
                                     (serial ? " serial" : " pooled") + " beta " +
                                     std::to_string(beta);
            // Row strides 3 past the logical width: strided operands.
            const int64_t aRows = ta == Trans::No ? c.M : c.K, aCols = ta == Trans::No ? c.K : c.M;
            const int64_t bRows = tb == Trans::No ? c.K : c.N, bCols = tb == Trans::No ? c.N : c.K;
            const int64_t lda = aCols + 3, ldb = bCols + 3, ldc = c.N + 3;
            std::vector<float> A = randomTensor({aRows * lda}, seed++).values;
            std::vector<float> B = randomTensor({bRows * ldb}, seed++).values;
            std::vector<float> C = randomTensor({c.M * ldc}, seed++).values;
            if (beta == 0.0f)
              for (float &v : C)
                v = std::nanf(""); // must be ignored
            const float alpha = 0.75f;
            const std::vector<float> expected = naive(ta, tb, c, alpha, A, lda, B, ldb, beta, C, ldc);
            std::vector<float> got = C;
            if (serial)
              gemmSerial(ta, tb, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), ldb, beta,
                         got.data(), ldc);
            else
              gemm(ta, tb, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), ldb, beta, got.data(),
                   ldc);
            // Only the M x N window of C is compared: the padding columns
            // past N are untouched (NaN stays NaN there).
            TF g = TF::zeros({c.M, c.N}), e = TF::zeros({c.M, c.N});
            for (int64_t i = 0; i < c.M; ++i)
              for (int64_t j = 0; j < c.N; ++j) {
                g.values[i * c.N + j] = got[i * ldc + j];
                e.values[i * c.N + j] = expected[i * ldc + j];
              }
            EXPECT_TRUE(matchesReference(name, g, e));
          }
}

TEST(CpuGemm, SameResultForEveryThreadCount) {
  // Shapes of the models' products (tokens x features, a weight gradient's
  // long K) and odd ones; every transpose of A.
  const Case cases[] = {{70, 90, 700}, {200, 64, 64}, {6400, 64, 64}, {64, 64, 6400}, {33, 17, 5},
                          {50, 130, 4000}};
  for (const Case &c : cases)
    for (Trans ta : {Trans::No, Trans::Yes}) {
      const std::vector<float> A = randomTensor({c.M * c.K}, 1).values;
      const std::vector<float> B = randomTensor({c.K * c.N}, 2).values;
      const int64_t lda = ta == Trans::No ? c.K : c.M;
      auto run = [&](int threads) {
        ScopedThreads scoped(threads);
        std::vector<float> C(c.M * c.N);
        gemm(ta, Trans::No, c.M, c.N, c.K, 1.0f, A.data(), lda, B.data(), c.N, 0.0f, C.data(),
             c.N);
        return TF({c.M, c.N}, C);
      };
      const TF one = run(1);
      for (int threads : {2, 3, 4, 7})
        EXPECT_TRUE(sameBits("gemm " + std::to_string(c.M) + "x" + std::to_string(c.N) + "x" +
                                 std::to_string(c.K) + " " + std::to_string(threads) +
                                 " threads vs 1",
                             run(threads), one));
    }
}

// The outer-product kernel's bits: each slab's sum in K order, one FMA a
// term, then the slabs in order (GemmOuterProduct.cpp: slabs of at least
// 1024 rows, at most 8, by the shape alone).
std::vector<float> outerProductByFmas(int64_t M, int64_t N, int64_t K, float alpha,
                                      const std::vector<float> &A, const std::vector<float> &B) {
  const int64_t slabs = std::clamp<int64_t>(K / 1024, 1, 8), slabRows = (K + slabs - 1) / slabs;
  std::vector<float> C(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float total = 0.0f;
      for (int64_t s = 0; s < slabs; ++s) {
        float acc = 0.0f;
        for (int64_t k = s * slabRows; k < std::min(K, (s + 1) * slabRows); ++k)
          acc = std::fma(A[k * M + i], B[k * N + j], acc);
        total = s == 0 ? acc : total + acc;
      }
      C[i * N + j] = alpha * total;
    }
  return C;
}

TEST(CpuGemm, OuterProductKernelOfEverySimdLevelTheCpuHas) {
  using util::SimdLevel;
  std::vector<SimdLevel> levels = {SimdLevel::Sse2};
  if (util::widestSimdLevel() != SimdLevel::Sse2)
    levels.push_back(SimdLevel::Avx2); // every AVX-512 CPU has AVX2 and FMA
  if (util::widestSimdLevel() == SimdLevel::Avx512)
    levels.push_back(SimdLevel::Avx512);
  // Whole tiles, partial rows and columns, a partial chunk, several slabs.
  const Case cases[] = {{64, 64, 6400}, {128, 64, 3000}, {37, 45, 777}, {6, 70, 1200}};
  for (const Case &c : cases) {
    ASSERT_TRUE(outerProductGemmSuits(c.M, c.N, c.K));
    const std::vector<float> A = randomTensor({c.K * c.M}, 3).values;
    const std::vector<float> B = randomTensor({c.K * c.N}, 4).values;
    const std::vector<float> byFmas = outerProductByFmas(c.M, c.N, c.K, 0.5f, A, B);
    const std::vector<float> plain =
        naive(Trans::Yes, Trans::No, c, 0.5f, A, c.M, B, c.N, 0.0f, std::vector<float>(c.M * c.N), c.N);
    for (SimdLevel level : levels) {
      forceOuterProductSimdLevel(level);
      std::vector<float> C(static_cast<size_t>(c.M * c.N), std::nanf(""));
      outerProductGemm(c.M, c.N, c.K, 0.5f, A.data(), c.M, B.data(), c.N, 0.0f, C.data(), c.N);
      forceOuterProductSimdLevel(std::nullopt);
      const std::string name = std::to_string(c.M) + "x" + std::to_string(c.N) + "x" +
                               std::to_string(c.K) + " kernel " +
                               std::to_string(static_cast<int>(level));
      // Float sums of thousands of terms: absolute error ~1e-4 where they cancel.
      EXPECT_TRUE(near(name, TF({c.M, c.N}, C), TF({c.M, c.N}, plain), 1e-4, 3e-4));
      if (level != SimdLevel::Sse2) // FMA kernels: exactly the FMA chain
        EXPECT_TRUE(sameBits(name + " vs the FMA chain", TF({c.M, c.N}, C),
                             TF({c.M, c.N}, byFmas)));
    }
  }
}

// The blocked kernel's bits on an FMA CPU: per K block of 256, a chain of
// FMAs of alpha a (A is packed pre-scaled) and b from 0, added to C block by
// block (beta = 0: C starts at 0).
TEST(CpuGemm, SerialKernelAddsEachTermWithOneFma) {
  if (!blockedGemmUsesFma())
    GTEST_SKIP() << "this CPU runs the baseline (no FMA) build of the kernel";
  const Case cases[] = {{50, 50, 16}, {50, 16, 50}, {9, 37, 600}};
  for (const Case &c : cases)
    for (Trans ta : {Trans::No, Trans::Yes}) {
      const std::vector<float> A = randomTensor({c.M * c.K}, 5).values;
      const std::vector<float> B = randomTensor({c.K * c.N}, 6).values;
      const int64_t lda = ta == Trans::No ? c.K : c.M;
      const float alpha = 0.3f;
      std::vector<float> expected(static_cast<size_t>(c.M * c.N), 0.0f);
      for (int64_t i = 0; i < c.M; ++i)
        for (int64_t j = 0; j < c.N; ++j)
          for (int64_t k0 = 0; k0 < c.K; k0 += 256) {
            float acc = 0.0f;
            for (int64_t k = k0; k < std::min(c.K, k0 + 256); ++k) {
              const float a = ta == Trans::No ? A[i * lda + k] : A[k * lda + i];
              acc = std::fma(alpha * a, B[k * c.N + j], acc);
            }
            expected[i * c.N + j] += acc;
          }
      std::vector<float> got(static_cast<size_t>(c.M * c.N), std::nanf(""));
      gemmSerial(ta, Trans::No, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), c.N, 0.0f,
                 got.data(), c.N);
      EXPECT_TRUE(sameBits("gemmSerial " + std::to_string(c.M) + "x" + std::to_string(c.N) + "x" +
                               std::to_string(c.K) + (ta == Trans::Yes ? " At" : ""),
                           TF({c.M, c.N}, got), TF({c.M, c.N}, expected)));
    }
}

// The row-tile kernel (GemmRowTiles.h): each element the FMA chain over k
// from 0, stored (beta 0, over NaNs) or added to C (beta 1); whole and
// partial 6-row tiles, one and several 16-column blocks, several row blocks
// of the pool, strided operands, B and B^T. Where gemm() takes the kernel
// (an AVX2 CPU), gemm() must give the same bits.
TEST(CpuGemm, RowTileKernelIsOneFmaChainPerElement) {
  if (!rowTileGemmRuns())
    GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const Case cases[] = {{1, 16, 1}, {5, 48, 64}, {6, 16, 7}, {7, 64, 130}, {200, 32, 64},
                        {97, 128, 17}};
  for (const Case &c : cases)
    for (Trans tb : {Trans::No, Trans::Yes})
      for (float beta : {0.0f, 1.0f}) {
        const int64_t lda = c.K + 3, ldb = (tb == Trans::No ? c.N : c.K) + 2, ldc = c.N + 5;
        const std::vector<float> A = randomTensor({c.M * lda}, 7).values;
        const std::vector<float> B =
            randomTensor({(tb == Trans::No ? c.K : c.N) * ldb}, 8).values;
        const std::vector<float> prior = randomTensor({c.M * ldc}, 9).values;
        std::vector<float> expected = prior;
        for (int64_t i = 0; i < c.M; ++i)
          for (int64_t j = 0; j < c.N; ++j) {
            float acc = 0.0f;
            for (int64_t k = 0; k < c.K; ++k)
              acc = std::fma(A[i * lda + k], tb == Trans::No ? B[k * ldb + j] : B[j * ldb + k], acc);
            expected[i * ldc + j] = beta == 1.0f ? prior[i * ldc + j] + acc : acc;
          }
        const std::string name = "M" + std::to_string(c.M) + " N" + std::to_string(c.N) + " K" +
                                 std::to_string(c.K) + (tb == Trans::Yes ? " Bt" : "") +
                                 " beta " + std::to_string(beta);
        auto run = [&](bool viaGemm) {
          std::vector<float> C = prior;
          if (beta == 0.0f) // must not be read
            for (int64_t i = 0; i < c.M; ++i)
              std::fill(C.begin() + i * ldc, C.begin() + i * ldc + c.N, std::nanf(""));
          if (viaGemm)
            gemm(Trans::No, tb, c.M, c.N, c.K, 1.0f, A.data(), lda, B.data(), ldb, beta,
                 C.data(), ldc);
          else
            rowTileGemm(tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
          return C;
        };
        EXPECT_TRUE(sameBits(name, TF({c.M, ldc}, run(false)), TF({c.M, ldc}, expected)));
        if (rowTileGemmSuits(Trans::No, c.N, c.K, 1.0f, beta))
          EXPECT_TRUE(sameBits(name + " through gemm()", TF({c.M, ldc}, run(true)),
                               TF({c.M, ldc}, expected)));
      }
}

// rowTileGemmBias: the bias added to every row as the tiles are stored, the
// bits of filling C's rows with the bias and running the kernel with beta 1
// (a linear layer's forward before it), C never read (NaNs).
TEST(CpuGemm, RowTileBiasIsTheFillAndBetaOne) {
  if (!rowTileGemmRuns())
    GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const Case cases[] = {{1, 16, 1}, {5, 48, 64}, {7, 64, 130}, {200, 32, 64}, {97, 128, 17}};
  for (const Case &c : cases) {
    const int64_t lda = c.K + 3, ldc = c.N + 5;
    const std::vector<float> A = randomTensor({c.M * lda}, 17).values;
    const std::vector<float> B = randomTensor({c.K * c.N}, 18).values;
    const std::vector<float> bias = randomTensor({c.N}, 19).values;
    std::vector<float> filled(static_cast<size_t>(c.M * ldc), 0.0f);
    for (int64_t i = 0; i < c.M; ++i)
      std::copy(bias.begin(), bias.end(), filled.begin() + i * ldc);
    rowTileGemm(Trans::No, c.M, c.N, c.K, A.data(), lda, B.data(), c.N, 1.0f, filled.data(), ldc);
    std::vector<float> fused(static_cast<size_t>(c.M * ldc), 0.0f);
    for (int64_t i = 0; i < c.M; ++i)
      std::fill(fused.begin() + i * ldc, fused.begin() + i * ldc + c.N, std::nanf(""));
    rowTileGemmBias(Trans::No, c.M, c.N, c.K, A.data(), lda, B.data(), c.N, bias.data(),
                    fused.data(), ldc);
    const std::string name = "M" + std::to_string(c.M) + " N" + std::to_string(c.N) + " K" +
                             std::to_string(c.K);
    EXPECT_TRUE(sameBits(name, TF({c.M, ldc}, fused), TF({c.M, ldc}, filled)));
    // Not just the bias: the products are there.
    EXPECT_NE(fused[0], bias[0]) << name;
  }
}

} // namespace
