// C[M, N] = A op(B), or C + A op(B): the products of a linear layer's
// forward (X W, beta 1 over the bias already in C) and input gradient
// (dY W^T) on CPUs whose widest instruction set is AVX2 (private to src/cpu).
// A is M x K (rows of a batch, row stride lda, not transposed), B is K x N
// (N x K when transB, packed to K x N first: a layer's weight, small), C is
// M x N with row stride ldc.
//
// C is cut into register tiles of 6 rows x 16 floats (12 of AVX2's 16 ymm
// registers accumulate; the last rows by one tile of 1-5 rows). A tile reads
// a broadcast of A per row and two 8-float vectors of B per k, and no
// packing of A at all: the 6 rows of A stay in L1 while the tile walks K.
// OpenBLAS (0.3.21, its ZEN kernels) packs A on every call and zero-fills C
// first for beta 0; on a Zen 3 core this kernel ran vit_rope's shapes
// 1.05-1.38x faster than its sgemm (hot caches, one thread).
//
// Each element of C is one chain of FMAs over k = 0..K-1 in order from 0,
// then added to C for beta 1: the same bits whatever the tiling and the
// thread count. (OpenBLAS's kernels differ from that chain in about 11% of
// the elements, so the bits change where this kernel replaces it.)
#pragma once

#include "Gemm.h"

#include <cstdint>

namespace stringrt::cpu {

// Whether gemm(transA, transB, M, N, K, alpha, ..., beta, ...) takes this
// kernel on this CPU: A not transposed, alpha 1, beta 0 or 1, N a multiple
// of 16, K at most kRowTileMaxK, and AVX2 the widest instruction set (with
// AVX-512 the packed kernels stay on OpenBLAS, which was faster there).
bool rowTileGemmSuits(Trans transA, int64_t N, int64_t K, float alpha, float beta);

// Whether the CPU can run the kernel at all (AVX2 and FMA), for tests.
bool rowTileGemmRuns();

// On the pool; beta 0 overwrites C without reading it. Needs
// rowTileGemmRuns(), N % 16 == 0 and beta 0 or 1.
void rowTileGemm(Trans transB, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

// C = bias + A op(B), the row vector bias [N] added to every row as the
// tiles are stored: the bits of beta 1 over C filled with the bias, without
// that pass over C (a linear layer's forward). Same requirements as
// rowTileGemm with beta 1.
void rowTileGemmBias(Trans transB, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                     const float *B, int64_t ldb, const float *bias, float *C, int64_t ldc);

// C = residual + (bias + A op(B)) (bias may be null: residual + A op(B)),
// the residual M x N with row stride ldr, added as the tiles are stored:
// the bits of a linear layer followed by the residual add, without the
// linear's result ever written (pe.linear_residual). C must not overlap the
// residual. Same requirements as rowTileGemm with beta 1.
void rowTileGemmResidual(Trans transB, int64_t M, int64_t N, int64_t K, const float *A,
                         int64_t lda, const float *B, int64_t ldb, const float *bias,
                         const float *residual, int64_t ldr, float *C, int64_t ldc);

} // namespace stringrt::cpu
