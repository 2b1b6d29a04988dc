// Single-precision GEMM: OpenBLAS when built with it, else a blocked,
// packed C++ kernel (GotoBLAS layout, small enough to read) on the pool.
#include "Gemm.h"
#include "GemmOuterProduct.h"
#include "GemmRowTiles.h"
#include "RegisterTile.h"

#include "stringrt/cpu/ThreadPool.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#ifdef STRINGRT_HAVE_OPENBLAS
#include "stringrt/Error.h"

#include <cblas.h>
#include <cstdlib>
#include <dlfcn.h>
#include <string>
#endif

namespace stringrt::cpu {
namespace {

#ifdef STRINGRT_HAVE_OPENBLAS
// OpenBLAS, opened with dlopen on first use rather than linked. libopenblas
// starts worker threads when it loads (sized by OPENBLAS_NUM_THREADS, else
// the core count), and each allocates a 128 MiB buffer when it first runs.
// The runtime never uses them (OpenBLAS runs single-threaded, gemm() splits
// over the pool), and under a tight address-space limit (`ulimit -v`) such
// a thread retried its allocation forever and the program hung at exit
// joining it (`stringrun --help` under `ulimit -v 150000`). So the runtime
// sets OPENBLAS_NUM_THREADS=1, unless the user set it, before the library
// loads: it starts no thread.
struct OpenBlas {
  decltype(&::cblas_sgemm) sgemm = nullptr;
  void (*setNumThreads)(int) = nullptr;
};

const OpenBlas &openBlas() {
  static const OpenBlas loaded = [] {
    setenv("OPENBLAS_NUM_THREADS", "1", /*overwrite=*/0);
    std::string errors;
    void *library = nullptr;
    // The runtime's soname first, then the library found when it was built.
    for (const char *name : {"libopenblas.so.0", STRINGRT_OPENBLAS_PATH}) {
      if ((library = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
      const char *why = dlerror();
      errors += std::string(errors.empty() ? "" : "; ") + (why ? why : name);
    }
    if (!library)
      throw Error("the CPU GEMMs need OpenBLAS (this runtime was built with it), which "
                  "cannot be loaded: " + errors);
    OpenBlas blas;
    blas.sgemm = reinterpret_cast<decltype(blas.sgemm)>(dlsym(library, "cblas_sgemm"));
    blas.setNumThreads =
        reinterpret_cast<decltype(blas.setNumThreads)>(dlsym(library, "openblas_set_num_threads"));
    if (!blas.sgemm || !blas.setNumThreads)
      throw Error("the OpenBLAS library loaded has no cblas_sgemm or openblas_set_num_threads");
    return blas;
  }();
  return loaded;
}
#endif

//===----------------------------------------------------------------------===//
// Blocked C++ kernel
//
// C is cut into tiles of MC x NC. For a tile, the K sum runs in blocks of KC:
// the KC-slices of op(A) and op(B) are packed into contiguous panels (MR rows
// of A interleaved per k, NR columns of B per k, zero-padded at the edges, A
// pre-scaled by alpha), and a register-sized MR x NR micro kernel walks them.
// The packing makes every inner access unit-stride whatever the transposes,
// and lets one micro kernel serve all four transpose combinations.
//===----------------------------------------------------------------------===//

constexpr int64_t kMR = 4;   // micro-tile rows
constexpr int64_t kNR = 16;  // micro-tile columns (one AVX-512 register of floats)
constexpr int64_t kKC = 256; // K block: one A panel + one B panel stay in L1/L2
constexpr int64_t kMC = 64;  // default tile rows (multiple of kMR)
constexpr int64_t kNC = 256; // default tile columns (multiple of kNR)

struct GemmArgs {
  Trans transA, transB;
  int64_t M, N, K;
  float alpha;
  const float *A;
  int64_t lda;
  const float *B;
  int64_t ldb;
  float beta;
  float *C;
  int64_t ldc;

};

// Rows [i0, i0 + mc) x K-slice [p0, p0 + kc) of alpha op(A), as ceil(mc/MR)
// panels; panel r holds out[(r kc + k) MR + m] = alpha op(A)[i0 + r MR + m, p0 + k],
// zero for rows past mc. The loops follow A's memory order in either layout.
void packA(const GemmArgs &g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float *out) {
  for (int64_t r = 0; r * kMR < mc; ++r) {
    float *panel = out + r * kc * kMR;
    const int64_t rows = std::min(kMR, mc - r * kMR);
    if (rows < kMR)
      std::fill(panel, panel + kc * kMR, 0.0f);
    if (g.transA == Trans::No) {
      for (int64_t m = 0; m < rows; ++m) {
        const float *src = g.A + (i0 + r * kMR + m) * g.lda + p0;
        for (int64_t k = 0; k < kc; ++k)
          panel[k * kMR + m] = g.alpha * src[k];
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        const float *src = g.A + (p0 + k) * g.lda + i0 + r * kMR;
        for (int64_t m = 0; m < rows; ++m)
          panel[k * kMR + m] = g.alpha * src[m];
      }
    }
  }
}

// K-slice [p0, p0 + kc) x columns [j0, j0 + nc) of op(B), as ceil(nc/NR)
// panels; panel c holds out[(c kc + k) NR + n] = op(B)[p0 + k, j0 + c NR + n],
// zero for columns past nc.
void packB(const GemmArgs &g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float *out) {
  for (int64_t c = 0; c * kNR < nc; ++c) {
    float *panel = out + c * kc * kNR;
    const int64_t cols = std::min(kNR, nc - c * kNR);
    if (cols < kNR)
      std::fill(panel, panel + kc * kNR, 0.0f);
    if (g.transB == Trans::No) {
      for (int64_t k = 0; k < kc; ++k) {
        const float *src = g.B + (p0 + k) * g.ldb + j0 + c * kNR;
        std::copy(src, src + cols, panel + k * kNR);
      }
    } else {
      for (int64_t n = 0; n < cols; ++n) {
        const float *src = g.B + (j0 + c * kNR + n) * g.ldb + p0;
        for (int64_t k = 0; k < kc; ++k)
          panel[k * kNR + n] = src[k];
      }
    }
  }
}

// out[m NR + n] = sum_k a[k MR + m] b[k NR + n]: one MR x NR block of A B
// over a K-slice, in registers (RegisterTile.h: a vector type per
// instruction set's width; left to the auto-vectoriser, the same loops came
// out as a slow shuffle mess).
using MicroKernel = void (*)(int64_t kc, const float *a, const float *b, float *out);

template <int Lanes>
STRINGRT_INLINE_INTO_CALLER void microKernelOf(int64_t kc, const float *a, const float *b,
                                               float *out) {
  std::memset(out, 0, kMR * kNR * sizeof(float));
  util::addOuterProducts<kMR, Lanes, kNR>(kc, a, kMR, b, kNR, out, kNR);
}

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
// AVX-512 and AVX2 contract each update to one FMA: the same bits.
__attribute__((target("avx512f"))) void microKernelAvx512(int64_t kc, const float *a,
                                                          const float *b, float *out) {
  microKernelOf<16>(kc, a, b, out);
}
__attribute__((target("avx2,fma"))) void microKernelAvx2(int64_t kc, const float *a,
                                                         const float *b, float *out) {
  microKernelOf<8>(kc, a, b, out);
}
#endif
void microKernelBaseline(int64_t kc, const float *a, const float *b, float *out) {
  microKernelOf<4>(kc, a, b, out);
}

MicroKernel microKernel() {
  switch (util::widestSimdLevel()) {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  case util::SimdLevel::Avx512:
    return &microKernelAvx512;
  case util::SimdLevel::Avx2:
    return &microKernelAvx2;
#else
  case util::SimdLevel::Avx512:
  case util::SimdLevel::Avx2:
#endif
  case util::SimdLevel::Sse2:
    break;
  }
  return &microKernelBaseline;
}

// One C tile [i0, i0 + mc) x [j0, j0 + nc): beta first, then every K block.
void gemmTile(const GemmArgs &g, int64_t i0, int64_t mc, int64_t j0, int64_t nc) {
  for (int64_t i = i0; i < i0 + mc; ++i) {
    float *row = g.C + i * g.ldc + j0;
    if (g.beta == 0.0f) // overwrite: C may hold garbage, even NaN
      std::fill(row, row + nc, 0.0f);
    else if (g.beta != 1.0f)
      for (int64_t j = 0; j < nc; ++j)
        row[j] *= g.beta;
  }
  // Per-thread scratch, reused across calls: no allocation in steady state.
  thread_local std::vector<float> packedA, packedB;
  const int64_t panelsA = (mc + kMR - 1) / kMR, panelsB = (nc + kNR - 1) / kNR;
  packedA.resize(static_cast<size_t>(panelsA * kMR * kKC));
  packedB.resize(static_cast<size_t>(panelsB * kNR * kKC));
  float acc[kMR * kNR];
  const MicroKernel kernel = microKernel();
  for (int64_t p0 = 0; p0 < g.K; p0 += kKC) {
    const int64_t kc = std::min(kKC, g.K - p0);
    packA(g, i0, mc, p0, kc, packedA.data());
    packB(g, p0, kc, j0, nc, packedB.data());
    for (int64_t r = 0; r < panelsA; ++r)
      for (int64_t c = 0; c < panelsB; ++c) {
        kernel(kc, packedA.data() + r * kc * kMR, packedB.data() + c * kc * kNR, acc);
        const int64_t rows = std::min(kMR, mc - r * kMR), cols = std::min(kNR, nc - c * kNR);
        for (int64_t m = 0; m < rows; ++m) {
          float *out = g.C + (i0 + r * kMR + m) * g.ldc + j0 + c * kNR;
          for (int64_t n = 0; n < cols; ++n)
            out[n] += acc[m * kNR + n];
        }
      }
  }
}

// The tiles of C, in row-major tile order.
struct Tiling {
  int64_t mc, nc, tilesM, tilesN;
  int64_t count() const { return tilesM * tilesN; }
};

Tiling tiling(int64_t M, int64_t N, int64_t mc, int64_t nc) {
  return {mc, nc, (M + mc - 1) / mc, (N + nc - 1) / nc};
}

void blockedGemm(const GemmArgs &g, bool parallel) {
  Tiling t = tiling(g.M, g.N, kMC, kNC);
  if (parallel) {
    // Smaller tiles until every thread has a couple of them (a long-K,
    // small-MN product such as a weight gradient is otherwise one tile).
    // The tile shape never changes a result: each element's K order is fixed.
    const int64_t want = 2 * numThreads();
    while (t.count() < want && (t.nc > kNR || t.mc > kMR)) {
      const int64_t nc = t.nc > kNR ? t.nc / 2 : t.nc, mc = t.nc > kNR ? t.mc : t.mc / 2;
      t = tiling(g.M, g.N, mc, nc);
    }
  }
  auto runTiles = [&](int64_t begin, int64_t end) {
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t i0 = (tile / t.tilesN) * t.mc, j0 = (tile % t.tilesN) * t.nc;
      gemmTile(g, i0, std::min(t.mc, g.M - i0), j0, std::min(t.nc, g.N - j0));
    }
  };
  if (parallel)
    parallelFor(0, t.count(), 1, runTiles);
  else
    runTiles(0, t.count());
}

GemmArgs makeArgs(Trans transA, Trans transB, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                  int64_t ldc) {
  return {transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
}

#ifdef STRINGRT_HAVE_OPENBLAS
bool fitsBlasInt(int64_t v) { return v <= INT_MAX; }

// Rows per OpenBLAS call: M in up to ~16 blocks (enough for the pool to
// balance), multiples of 16 rows, at least 32 (each call packs all of
// op(B), so a block must be tall enough to pay for it). M <= 32 is one call.
int64_t blasRowBlock(int64_t M) {
  constexpr int64_t kTargetBlocks = 16, kMultiple = 16, kMinRows = 32;
  const int64_t even = (M + kTargetBlocks - 1) / kTargetBlocks;
  return std::max(kMinRows, (even + kMultiple - 1) / kMultiple * kMultiple);
}

void blasGemm(const GemmArgs &g, int64_t row0, int64_t rows) {
  // Rows [row0, row0 + rows) of C: the same rows of op(A).
  const float *a = g.transA == Trans::No ? g.A + row0 * g.lda : g.A + row0;
  openBlas().sgemm(CblasRowMajor, g.transA == Trans::No ? CblasNoTrans : CblasTrans,
              g.transB == Trans::No ? CblasNoTrans : CblasTrans, static_cast<int>(rows),
              static_cast<int>(g.N), static_cast<int>(g.K), g.alpha, a, static_cast<int>(g.lda),
              g.B, static_cast<int>(g.ldb), g.beta, g.C + row0 * g.ldc, static_cast<int>(g.ldc));
}
#endif

} // namespace

void gemmSerial(Trans transA, Trans transB, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                int64_t ldc) {
  if (M <= 0 || N <= 0)
    return;
  blockedGemm(makeArgs(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), false);
}

void gemm(Trans transA, Trans transB, int64_t M, int64_t N, int64_t K, float alpha,
          const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
          int64_t ldc) {
  if (M <= 0 || N <= 0)
    return;
  if (transA == Trans::Yes && transB == Trans::No && outerProductGemmSuits(M, N, K)) {
    // A weight gradient's shape: no packing at all (GemmOuterProduct.h).
    outerProductGemm(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (rowTileGemmSuits(transA, N, K, alpha, beta)) {
    // A linear layer's X W or dY W^T on an AVX2 CPU (GemmRowTiles.h).
    rowTileGemm(transB, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const GemmArgs g = makeArgs(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#ifdef STRINGRT_HAVE_OPENBLAS
  // K = 0 is only beta C, which the blocked path does without BLAS's
  // leading-dimension rules; sizes past BLAS's 32-bit ints go there too.
  if (K > 0 && fitsBlasInt(M) && fitsBlasInt(N) && fitsBlasInt(K) && fitsBlasInt(lda) &&
      fitsBlasInt(ldb) && fitsBlasInt(ldc)) {
    // OpenBLAS runs single-threaded (setBlasThreads) and the pool splits C's
    // rows: OpenBLAS's own workers would spin (sched_yield) between calls
    // while the pool runs the other kernels, taking the cores from them.
    // The row blocks depend on the shape alone, never on the thread count:
    // OpenBLAS's kernels may sum an element's K terms in another order for
    // another M (edge micro-tiles, small-matrix paths), so every thread
    // count makes exactly the same calls and gets the same bits.
    const int64_t rows = blasRowBlock(M);
    const int64_t blocks = (M + rows - 1) / rows;
    parallelFor(0, blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        blasGemm(g, b * rows, std::min(rows, M - b * rows));
    });
    return;
  }
#endif
  blockedGemm(g, true);
}

bool blockedGemmUsesFma() { return util::widestSimdLevel() != util::SimdLevel::Sse2; }

bool gemmUsesBlas() {
#ifdef STRINGRT_HAVE_OPENBLAS
  return true;
#else
  return false;
#endif
}

void setBlasThreads(int n) {
#ifdef STRINGRT_HAVE_OPENBLAS
  // One thread: gemm() parallelises over the pool instead (see there).
  (void)n;
  openBlas().setNumThreads(1);
#else
  (void)n;
#endif
}

} // namespace stringrt::cpu
