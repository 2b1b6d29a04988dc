// The outer-product GEMM of GemmOuterProduct.h.
//
// K is cut into slabs (their number from the shape alone). A task owns a
// slab and a partial C: for each micro tile of C (8 or 4 rows x 32 floats
// in registers, below) it adds the slab's outer products, row by row: a
// broadcast of A per row and two 16-float rows of B per k. The slab's A and B
// (about 1 MB at the models' widths) come from memory once and stay in L2;
// the slab is walked in chunks of kChunkRows rows, each chunk by every micro
// tile in turn, so that a chunk's rows of B are read from L1 by all the
// micro tiles of a column block (10% faster than whole slabs per micro tile
// on vit_rope). C = alpha (P_0 + P_1 + ...) + beta C then adds the partials
// in slab order.
//
// The AVX2 kernel walks 64-row chunks and prefetches the next chunk's rows
// of A and B, a share of the lines before each micro tile: a weight
// gradient's X was written long before (in memory, not cache), and on a Zen 3
// EPYC (32 KB L1) the hardware prefetcher left one core's kernel at 60
// GFLOP/s on such cold rows, 78-80 with this (82 when the slab is in L2).
//
// Tried first, on a 2-core Sapphire Rapids VM (vit_rope's step): tasks by
// tiles of C over all of K (A and B read from memory once per tile) were
// slower than OpenBLAS, and chunks of 32 rows (with 4-row tiles) spent their
// time moving the partial C through L1.
//
// The micro tile (RegisterTile.h) is 8 rows x 32 floats with AVX-512 (16 of
// its 32 registers hold the accumulators), 6 x 16 with AVX2 (12 of its 16)
// and 4 x 8 in the baseline build (SSE2). Its shape never changes a result.
// Shapes whose M or N is not a multiple of 8 x 32 copy each slab into
// zero-padded scratch first.
#include "GemmOuterProduct.h"

#include "stringrt/cpu/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace stringrt::cpu {
namespace {

using util::addOuterProducts;
using util::SimdLevel;

constexpr int64_t kTileCols = 32;          // N padded to a multiple of every micro tile's columns
constexpr int64_t kPadRows = 8;            // M padded to a multiple of 8 (slabAvx2: 6-row tiles, then one of 2 or 4)
constexpr int64_t kSlabRows = 1024;        // K rows per slab, at least
constexpr int64_t kMaxSlabs = 8;
constexpr int64_t kChunkRows = 128;        // K rows per pass over the micro tiles
constexpr int64_t kChunkRowsAvx2 = 64;     // the same for the AVX2 kernel (measured on Zen 3)
constexpr int64_t kMaxPartial = 64 * 1024; // padded M x N, floats

// The rows of A and B the chunk after this one reads (none past the slab):
// what a kernel may prefetch while it works on this one.
struct NextChunk {
  const float *a, *b;
  int64_t rows;
};

// One chunk of a slab into a partial C of width accLd (rows a multiple of
// kPadRows, columns of kTileCols), per instruction set.
using SlabKernel = void (*)(int64_t kc, int64_t rows, int64_t cols, const float *a, int64_t lda,
                            const float *b, int64_t ldb, float *acc, int64_t accLd,
                            const NextChunk &next);

// Micro tiles of Rows x Cols (dividing kPadRows x kTileCols): the AVX-512
// and baseline builds.
template <int Rows, int Lanes, int Cols>
STRINGRT_INLINE_INTO_CALLER void
slabTiles(int64_t kc, int64_t rows, int64_t cols, const float *a, int64_t lda, const float *b,
          int64_t ldb, float *acc, int64_t accLd) {
  static_assert(kPadRows % Rows == 0 && kTileCols % Cols == 0, "tiles divide the padding");
  for (int64_t j0 = 0; j0 < cols; j0 += Cols)
    for (int64_t m0 = 0; m0 < rows; m0 += Rows)
      addOuterProducts<Rows, Lanes, Cols>(kc, a + m0, lda, b + j0, ldb, acc + m0 * accLd + j0,
                                          accLd);
}

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
// AVX-512 and AVX2 contract each update to one FMA: the same bits.
__attribute__((target("avx512f"))) void slabAvx512(int64_t kc, int64_t rows, int64_t cols,
                                                   const float *a, int64_t lda, const float *b,
                                                   int64_t ldb, float *acc, int64_t accLd,
                                                   const NextChunk &) {
  slabTiles<8, 16, 32>(kc, rows, cols, a, lda, b, ldb, acc, accLd); // 16 of 32 zmm
}
// Prefetches the lines of the next chunk's rows of A (lda floats each) and
// then of B, `perTile` lines a call (before each micro tile).
class ChunkPrefetcher {
public:
  ChunkPrefetcher(const NextChunk &next, int64_t lda, int64_t ldb, int64_t tiles)
      : a_(reinterpret_cast<const char *>(next.a)), b_(reinterpret_cast<const char *>(next.b)),
        linesA_(lineCount(next.rows, lda)), lines_(linesA_ + lineCount(next.rows, ldb)),
        perTile_((lines_ + tiles - 1) / tiles) {}

  void prefetchShare() {
    for (const int64_t end = std::min(lines_, next_ + perTile_); next_ < end; ++next_)
      __builtin_prefetch(next_ < linesA_ ? a_ + next_ * kLine : b_ + (next_ - linesA_) * kLine);
  }

private:
  static constexpr int64_t kLine = 64; // bytes
  static int64_t lineCount(int64_t rows, int64_t ld) {
    return (rows * ld * static_cast<int64_t>(sizeof(float)) + kLine - 1) / kLine;
  }
  const char *a_, *b_;
  int64_t linesA_, lines_, perTile_, next_ = 0;
};

// AVX2: tiles of 6 x 16 (12 of the 16 ymm hold accumulators, 12 independent
// FMA chains for the 2 FMA units' 4-cycle latency), the rows past the last
// multiple of 6 (2 or 4, rows being a multiple of kPadRows) by one 4- or
// 2-row tile.
__attribute__((target("avx2,fma"))) void slabAvx2(int64_t kc, int64_t rows, int64_t cols,
                                                  const float *a, int64_t lda, const float *b,
                                                  int64_t ldb, float *acc, int64_t accLd,
                                                  const NextChunk &next) {
  constexpr int kCols = 16;
  ChunkPrefetcher prefetcher(next, lda, ldb, (cols / kCols) * ((rows + 5) / 6));
  for (int64_t j0 = 0; j0 < cols; j0 += kCols) {
    int64_t m0 = 0;
    for (; m0 + 6 <= rows; m0 += 6) {
      prefetcher.prefetchShare();
      addOuterProducts<6, 8, kCols>(kc, a + m0, lda, b + j0, ldb, acc + m0 * accLd + j0, accLd);
    }
    if (rows - m0 >= 4) {
      prefetcher.prefetchShare();
      addOuterProducts<4, 8, kCols>(kc, a + m0, lda, b + j0, ldb, acc + m0 * accLd + j0, accLd);
      m0 += 4;
    }
    if (rows - m0 >= 2) {
      prefetcher.prefetchShare();
      addOuterProducts<2, 8, kCols>(kc, a + m0, lda, b + j0, ldb, acc + m0 * accLd + j0, accLd);
    }
  }
}
#endif
void slabBaseline(int64_t kc, int64_t rows, int64_t cols, const float *a, int64_t lda,
                  const float *b, int64_t ldb, float *acc, int64_t accLd, const NextChunk &) {
  slabTiles<4, 4, 8>(kc, rows, cols, a, lda, b, ldb, acc, accLd); // 8 of 16 xmm
}

SlabKernel slabKernel(SimdLevel level) {
  switch (level) {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  case SimdLevel::Avx512:
    return &slabAvx512;
  case SimdLevel::Avx2:
    return &slabAvx2;
#else
  case SimdLevel::Avx512:
  case SimdLevel::Avx2:
#endif
  case SimdLevel::Sse2:
    break;
  }
  return &slabBaseline;
}

// The widest kernel the running CPU has, or the one a test forced.
std::atomic<int> forcedLevel{-1};

SimdLevel chosenLevel() {
  const int forced = forcedLevel.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<SimdLevel>(forced) : util::widestSimdLevel();
}

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// kc rows of cols floats from src (row stride ld) into dst[kc][width],
// zeros past cols.
void copyPadded(const float *src, int64_t ld, int64_t kc, int64_t cols, int64_t width,
                float *dst) {
  for (int64_t k = 0; k < kc; ++k) {
    std::copy(src + k * ld, src + k * ld + cols, dst + k * width);
    std::fill(dst + k * width + cols, dst + (k + 1) * width, 0.0f);
  }
}

struct Problem {
  int64_t M, N, K;
  const float *A;
  int64_t lda;
  const float *B;
  int64_t ldb;
  int64_t paddedM, paddedN;
};

// partial[paddedM x paddedN] = the outer products of rows [k0, k1).
void sumSlab(const Problem &p, int64_t k0, int64_t k1, float *partial) {
  std::fill(partial, partial + p.paddedM * p.paddedN, 0.0f);
  const int64_t kc = k1 - k0;
  const float *a = p.A + k0 * p.lda, *b = p.B + k0 * p.ldb;
  int64_t lda = p.lda, ldb = p.ldb;
  std::vector<float> paddedA, paddedB;
  if (p.paddedM != p.M) {
    paddedA.resize(static_cast<size_t>(kc * p.paddedM));
    copyPadded(a, p.lda, kc, p.M, p.paddedM, paddedA.data());
    a = paddedA.data(), lda = p.paddedM;
  }
  if (p.paddedN != p.N) {
    paddedB.resize(static_cast<size_t>(kc * p.paddedN));
    copyPadded(b, p.ldb, kc, p.N, p.paddedN, paddedB.data());
    b = paddedB.data(), ldb = p.paddedN;
  }
  const SimdLevel level = chosenLevel();
  const SlabKernel kernel = slabKernel(level);
  const int64_t chunkRows = level == SimdLevel::Avx2 ? kChunkRowsAvx2 : kChunkRows;
  for (int64_t c0 = 0; c0 < kc; c0 += chunkRows) {
    const int64_t c1 = std::min(kc, c0 + chunkRows);
    const NextChunk next{a + c1 * lda, b + c1 * ldb, std::min(chunkRows, kc - c1)};
    kernel(c1 - c0, p.paddedM, p.paddedN, a + c0 * lda, lda, b + c0 * ldb, ldb, partial,
           p.paddedN, next);
  }
}

} // namespace

void forceOuterProductSimdLevel(std::optional<util::SimdLevel> level) {
  forcedLevel.store(level ? static_cast<int>(*level) : -1, std::memory_order_relaxed);
}

bool outerProductGemmSuits(int64_t M, int64_t N, int64_t K) {
  // K at least 16 times the larger side (the packed GEMMs' packing of the
  // K-long operands then costs about as much as their arithmetic), and the
  // partial C small enough to stay in cache beside a slab.
  return M > 0 && N > 0 && K >= 16 * std::max(M, N) &&
         roundUp(M, kPadRows) * roundUp(N, kTileCols) <= kMaxPartial;
}

void outerProductGemm(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0)
    return;
  const Problem p{M, N, K, A, lda, B, ldb, roundUp(M, kPadRows), roundUp(N, kTileCols)};
  const int64_t slabs = std::clamp<int64_t>(K / kSlabRows, 1, kMaxSlabs);
  const int64_t slabRows = (K + slabs - 1) / slabs;
  const int64_t size = p.paddedM * p.paddedN;
  thread_local std::vector<float> partials; // per calling thread, reused
  partials.resize(static_cast<size_t>(slabs * size));
  float *P = partials.data();
  parallelFor(0, slabs, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s)
      sumSlab(p, std::min(K, s * slabRows), std::min(K, (s + 1) * slabRows), P + s * size);
  });
  parallelFor(0, M, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float *c = C + i * ldc;
      for (int64_t j = 0; j < N; ++j) {
        float sum = P[i * p.paddedN + j];
        for (int64_t s = 1; s < slabs; ++s)
          sum += P[s * size + i * p.paddedN + j];
        c[j] = beta == 0.0f ? alpha * sum : alpha * sum + beta * c[j];
      }
    }
  });
}

} // namespace stringrt::cpu
