// Single-precision GEMM for the fast CPU kernels (private to src/cpu).
//
//   C[M, N] = alpha op(A) op(B) + beta C      (row-major; op(X) = X or X^T)
//
// A is M x K (K x M when transA) with row stride lda, B is K x N (N x K when
// transB) with row stride ldb, C is M x N with row stride ldc. beta = 0
// overwrites C without reading it (NaNs there do not leak through).
//
// gemm() is the big, stand-alone product: OpenBLAS's sgemm (single-threaded)
// on row blocks of C that depend on the shape alone, spread over the thread
// pool, when the runtime is built with OpenBLAS; else the blocked C++ kernel
// below spread over the pool. gemmSerial() always runs on the calling thread
// with the blocked C++ kernel: it is the one to call from inside parallelFor
// (many small per-head products). gemm() of A^T B with K long against M
// and N (a weight gradient) takes the outer-product kernel instead
// (GemmOuterProduct.h), with or without OpenBLAS; on a CPU whose widest
// instruction set is AVX2, A op(B) with a short K and N a multiple of 16 (a
// linear layer's forward and input gradient) takes the row-tile kernel
// (GemmRowTiles.h).
//
// Results never depend on the thread count, bit for bit: the work is cut
// into the same calls (OpenBLAS) or the same K order per element (blocked
// kernel) whatever the pool's size, and neither splits an element's K sum.
#pragma once

#include <cstdint>

namespace stringrt::cpu {

enum class Trans { No, Yes };

void gemm(Trans transA, Trans transB, int64_t M, int64_t N, int64_t K, float alpha,
          const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
          int64_t ldc);

void gemmSerial(Trans transA, Trans transB, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                int64_t ldc);

// Whether the blocked kernel adds each term with one FMA on this CPU (its
// AVX-512 and AVX2 builds; the baseline build multiplies, rounds and adds).
bool blockedGemmUsesFma();

// Whether gemm() goes through OpenBLAS in this build.
bool gemmUsesBlas();

// Called by the thread pool whenever its size is set (to n). Keeps OpenBLAS
// at one thread whatever n: gemm() splits C's rows over the pool itself
// (a no-op without OpenBLAS).
void setBlasThreads(int n);

} // namespace stringrt::cpu
