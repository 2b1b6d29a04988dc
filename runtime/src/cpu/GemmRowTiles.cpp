// The row-tile GEMM of GemmRowTiles.h.
#include "GemmRowTiles.h"
#include "RegisterTile.h"

#include "stringrt/cpu/ThreadPool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace stringrt::cpu {
namespace {

constexpr int64_t kTileRows = 6;
constexpr int64_t kTileCols = 16;
constexpr int64_t kRowTileMaxK = 1024; // B's 16-column slice (64 KB at most) stays in L2
constexpr int64_t kBlockRows = 16 * kTileRows; // rows per task of the pool

// What is added to the products as C is stored (rowTile's Addend for the
// whole of C): C itself (beta 1) or a bias row, then a residual matrix.
struct Epilogue {
  bool addToC = false;
  const float *bias = nullptr;     // [N]
  const float *residual = nullptr; // M x N, rows ldr apart
  int64_t ldr = 0;
};

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define STRINGRT_ROW_TILES_AVX2 1
using Vec = util::SimdOf<8>::type;

// What a tile's sums are added to as they are stored: nothing (beta 0), C
// itself (beta 1), or a row vector, the same for every row (a bias: the
// bits of beta 1 over C filled with it, without that pass over C), and then
// a matrix of C's shape (a residual: r + (b + sum), the bits of the linear
// layer followed by the residual add).
struct Addend {
  bool toC = false;
  const float *row = nullptr;      // 16 floats from the tile's first column
  const float *residual = nullptr; // the tile's first element, rows ldr apart
  int64_t ldr = 0;
};

// Rows x 16 of C from rows of A (a[m * lda + k]) and columns of B
// (b[k * ldb + :16]): per element an FMA chain over k from 0 (the register
// tile of RegisterTile.h, from zeros), then the addend added (addend + sum)
// and stored. Inlined into rowBlock's AVX2 build.
template <int Rows>
STRINGRT_INLINE_INTO_CALLER void rowTile(int64_t K, const float *a, int64_t lda, const float *b,
                                         int64_t ldb, Addend addend, float *c, int64_t ldc) {
  util::Tile<Rows, 8, kTileCols> tile;
  for (int m = 0; m < Rows; ++m)
    tile.v[m][0] = tile.v[m][1] = Vec{};
  util::addOuterProductsTo(tile, K, a, 1, lda, b, ldb);
  for (int m = 0; m < Rows; ++m)
    for (int part = 0; part < 2; ++part) {
      float *out = c + m * ldc + 8 * part;
      Vec v = tile.v[m][part];
      if (addend.toC || addend.row) {
        Vec prior;
        std::memcpy(&prior, addend.toC ? out : addend.row + 8 * part, sizeof prior);
        v = prior + v;
      }
      if (addend.residual) {
        Vec r;
        std::memcpy(&r, addend.residual + m * addend.ldr + 8 * part, sizeof r);
        v = r + v;
      }
      std::memcpy(out, &v, sizeof v);
    }
}

// Rows [0, rows) of C.
__attribute__((target("avx2,fma"))) void rowBlock(int64_t rows, int64_t N, int64_t K,
                                                  const float *A, int64_t lda, const float *B,
                                                  int64_t ldb, const Epilogue &epilogue,
                                                  float *C, int64_t ldc) {
  auto addend = [&](int64_t m0, int64_t j0) {
    return Addend{epilogue.addToC, epilogue.bias ? epilogue.bias + j0 : nullptr,
                  epilogue.residual ? epilogue.residual + m0 * epilogue.ldr + j0 : nullptr,
                  epilogue.ldr};
  };
  int64_t m0 = 0;
  for (; m0 + kTileRows <= rows; m0 += kTileRows)
    for (int64_t j0 = 0; j0 < N; j0 += kTileCols)
      rowTile<kTileRows>(K, A + m0 * lda, lda, B + j0, ldb, addend(m0, j0), C + m0 * ldc + j0,
                         ldc);
  const float *a = A + m0 * lda;
  for (int64_t j0 = 0; j0 < N; j0 += kTileCols) {
    float *c = C + m0 * ldc + j0;
    switch (rows - m0) {
    case 5: rowTile<5>(K, a, lda, B + j0, ldb, addend(m0, j0), c, ldc); break;
    case 4: rowTile<4>(K, a, lda, B + j0, ldb, addend(m0, j0), c, ldc); break;
    case 3: rowTile<3>(K, a, lda, B + j0, ldb, addend(m0, j0), c, ldc); break;
    case 2: rowTile<2>(K, a, lda, B + j0, ldb, addend(m0, j0), c, ldc); break;
    case 1: rowTile<1>(K, a, lda, B + j0, ldb, addend(m0, j0), c, ldc); break;
    default: break;
    }
  }
}
#else
// Elsewhere (never chosen by gemm(): rowTileGemmRuns() is false): the same
// FMA chains, one element at a time.
void rowBlock(int64_t rows, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
              int64_t ldb, const Epilogue &epilogue, float *C, int64_t ldc) {
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k)
        acc = std::fma(A[m * lda + k], B[k * ldb + n], acc);
      float v = epilogue.addToC ? C[m * ldc + n] + acc
                : epilogue.bias ? epilogue.bias[n] + acc
                                : acc;
      if (epilogue.residual)
        v = epilogue.residual[m * epilogue.ldr + n] + v;
      C[m * ldc + n] = v;
    }
}
#endif

} // namespace

bool rowTileGemmRuns() {
#ifdef STRINGRT_ROW_TILES_AVX2
  return util::widestSimdLevel() != util::SimdLevel::Sse2;
#else
  return false;
#endif
}

bool rowTileGemmSuits(Trans transA, int64_t N, int64_t K, float alpha, float beta) {
  return transA == Trans::No && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) && N > 0 &&
         N % kTileCols == 0 && K > 0 && K <= kRowTileMaxK &&
         util::widestSimdLevel() == util::SimdLevel::Avx2;
}

namespace {
void rowTiles(Trans transB, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
              const float *B, int64_t ldb, const Epilogue &epilogue, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0)
    return;
  // op(B) as K x N rows: B itself, or B^T packed once (a weight: small).
  thread_local std::vector<float> packed; // per calling thread, reused
  if (transB == Trans::Yes) {
    packed.resize(static_cast<size_t>(K * N));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        packed[k * N + n] = B[n * ldb + k];
    B = packed.data(), ldb = N;
  }
  const int64_t blocks = (M + kBlockRows - 1) / kBlockRows;
  parallelFor(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t row0 = blk * kBlockRows;
      Epilogue rows = epilogue;
      if (rows.residual)
        rows.residual += row0 * rows.ldr;
      rowBlock(std::min(kBlockRows, M - row0), N, K, A + row0 * lda, lda, B, ldb, rows,
               C + row0 * ldc, ldc);
    }
  });
}
} // namespace

void rowTileGemm(Trans transB, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  rowTiles(transB, M, N, K, A, lda, B, ldb, Epilogue{beta == 1.0f}, C, ldc);
}

void rowTileGemmBias(Trans transB, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                     const float *B, int64_t ldb, const float *bias, float *C, int64_t ldc) {
  rowTiles(transB, M, N, K, A, lda, B, ldb, Epilogue{false, bias}, C, ldc);
}

void rowTileGemmResidual(Trans transB, int64_t M, int64_t N, int64_t K, const float *A,
                         int64_t lda, const float *B, int64_t ldb, const float *bias,
                         const float *residual, int64_t ldr, float *C, int64_t ldc) {
  rowTiles(transB, M, N, K, A, lda, B, ldb, Epilogue{false, bias, residual, ldr}, C, ldc);
}

} // namespace stringrt::cpu
