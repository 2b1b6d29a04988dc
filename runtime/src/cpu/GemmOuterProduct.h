// C[M, N] = alpha A^T B + beta C as a sum of K outer products, for the
// long-K, small-M x N products of weight gradients (dW = X^T dY, K the
// rows of a batch). A is K x M (row stride lda), B is K x N (ldb): row k of
// each is contiguous, so row k's outer product a_k b_k^T streams both
// operands in memory order with no packing. OpenBLAS packs both K-long
// operands on every call (as much memory traffic as the arithmetic at
// M = 64, K = 6400), and gemm()'s row blocks pack B once per block. (The
// same register tile without packing for the forward products, X W at
// K = 64, was tried: 5% slower than OpenBLAS there, so those stay on it.)
//
// K is cut into slabs by the shape alone; each element's sum runs in K
// order inside a slab, then over the slabs in order, whatever the pool's
// size: the same bits on any thread count.
#pragma once

#include "RegisterTile.h"

#include <cstdint>
#include <optional>

namespace stringrt::cpu {

// Whether the shape is one the outer-product kernel runs faster than the
// packed GEMMs: K long against M and N, and C small enough for its tiles.
bool outerProductGemmSuits(int64_t M, int64_t N, int64_t K);

// On the pool; beta = 0 overwrites C without reading it.
void outerProductGemm(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

// For tests: run the kernel built for `level` (one the CPU has) instead of
// the widest (RegisterTile.h); nullopt undoes it.
void forceOuterProductSimdLevel(std::optional<util::SimdLevel> level);

} // namespace stringrt::cpu
