// The register-tiled inner work of the attention with relative rotations
// (private to src/cpu; RelativeAttention.cpp builds it per instruction set).
//
// R_ij is the same for every batch and head, so the work of a pair (i, j)
// over a block of tasks is a small GEMM with R_ij as the shared operand
// (M = the block's batches of one head, K = N = Dh): the register tile of
// RegisterTile.h (addOuterProductsTo) holds the block's rows in SIMD
// registers, and each R_ij row loaded feeds Rows FMAs. Three products, each
// T^2 Dh^2 per task:
//   scores  w_b = R_ij k_b (tile rows: batches; A = their rows of k at j,
//           B = R_ij^T), then s_b = scale q_b . w_b;
//   dk      dk_b += sum_i x_ib^T R_ij, x_ib = c_bij q_b at i (tile rows:
//           batches; A = x, B = R_ij), i ascending;
//   drel    drel_ij = sum_b x_b k_b^T over every task (tile rows: d; A = x
//           across the batches, B = the batches' rows of k at j).
// Each element is one FMA chain in a fixed order (k ascending, the tasks
// head-major in drel), whatever the tile's height: a block of fewer rows
// than a tile goes one row at a time, and the last rows of a longer block
// by a tile overlapping the one before (rows recomputed, the same bits), so
// the results do not depend on how the blocks are cut.
#pragma once

#include "AttentionGeometry.h"
#include "RegisterTile.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace stringrt::cpu::util::rel {

#if defined(__GNUC__)

// Lanes-wide SIMD values are summed lane-pairwise (halves, then halves
// again): the same order for every element.
template <int Lanes>
STRINGRT_INLINE_INTO_CALLER float laneSum(typename SimdOf<Lanes>::type v) {
  if constexpr (Lanes == 1) {
    return v[0];
  } else {
    using Half = typename SimdOf<Lanes / 2>::type;
    Half lo, hi;
    std::memcpy(&lo, &v, sizeof lo);
    std::memcpy(&hi, reinterpret_cast<const char *>(&v) + sizeof lo, sizeof hi);
    return laneSum<Lanes / 2>(lo + hi);
  }
}

// q and k reach the tiles packed, [T][heads][B][Dh] (packRows in
// RelativeAttention.cpp): a tile's batches of one head at one token are
// consecutive rows of Dh floats. Row (token r, head h, batch b) starts at
// packedRow(g, r, h, b).
inline int64_t packedRow(const AttentionGeometry &g, int64_t r, int64_t h, int64_t b) {
  return ((r * g.heads + h) * g.B + b) * g.Dh;
}

// Tiles of `rows` over [0, n), n >= rows: for r = 0, rows, ... < n the
// tile at tileStart(r, n, rows), the last one overlapping the one before.
// (Loops, not a helper taking lambdas: a lambda would not be built for the
// caller's instruction set.)
inline int64_t tileStart(int64_t r, int64_t n, int64_t rows) { return std::min(r, n - rows); }

// The kernels for head dim DH on Lanes-wide SIMD values: tiles of Rows
// batches (12 accumulators), and of DrelRows rows of drel.
template <int Lanes, int DH> struct Tiles {
  using Vec = typename SimdOf<Lanes>::type;
  static constexpr int kParts = DH / Lanes;
  static constexpr int kRows = kParts >= 12 ? 1 : 12 / kParts;
  static constexpr int kDrelRows = std::min(kRows, 8);

  // For the batches [b0, b1) of head h at query i, every visible key j:
  // S[task, i, j] = scale q . (R_ij k_j), and W[j][b - b0] = R_ij k_j
  // (Dh floats each) when W is given. RtRow holds R_ij^T for every j.
  template <int Rows>
  STRINGRT_INLINE_INTO_CALLER static void scoreTile(const AttentionGeometry &g,
                                                    const float *RtRow, const float *q,
                                                    const float *k, int64_t i, int64_t visible,
                                                    int64_t h, int64_t b0, int64_t b1,
                                                    int64_t bStart, float scale, float *S,
                                                    float *W) {
    const int64_t T = g.T;
    const float *qRows = q + packedRow(g, i, h, bStart);
    for (int64_t j = 0; j < visible; ++j) {
      Tile<Rows, Lanes, DH> tile;
      for (int m = 0; m < Rows; ++m)
        for (int p = 0; p < kParts; ++p)
          tile.v[m][p] = Vec{};
      addOuterProductsTo(tile, DH, k + packedRow(g, j, h, bStart), 1, DH, RtRow + j * DH * DH,
                         DH);
      for (int m = 0; m < Rows; ++m) {
        Vec qv[kParts];
        std::memcpy(qv, qRows + m * DH, sizeof qv);
        Vec dot = qv[0] * tile.v[m][0];
        for (int p = 1; p < kParts; ++p)
          dot += qv[p] * tile.v[m][p];
        const int64_t task = (bStart + m) * g.heads + h;
        S[(task * T + i) * T + j] = scale * laneSum<Lanes>(dot);
        if (W)
          std::memcpy(W + (j * (b1 - b0) + bStart + m - b0) * DH, tile.v[m], sizeof tile.v[m]);
      }
    }
  }

  STRINGRT_INLINE_INTO_CALLER static void scores(const AttentionGeometry &g, const float *RtRow,
                                                 const float *q, const float *k, int64_t i,
                                                 int64_t visible, int64_t h, int64_t b0,
                                                 int64_t b1, float scale, float *S, float *W) {
    const int64_t n = b1 - b0;
    for (int64_t r = 0; r < n; r += n < kRows ? 1 : kRows)
      if (n < kRows)
        scoreTile<1>(g, RtRow, q, k, i, visible, h, b0, b1, b0 + r, scale, S, W);
      else
        scoreTile<kRows>(g, RtRow, q, k, i, visible, h, b0, b1, b0 + tileStart(r, n, kRows),
                         scale, S, W);
  }

  // dk of the batches [bStart, bStart + Rows) of head h at key j: the sum
  // over the queries i that see j of x_i^T R_ij, x_i = c[task, i, j] q_i;
  // cT[task, j, i] holds c transposed.
  template <int Rows>
  STRINGRT_INLINE_INTO_CALLER static void dkTile(const AttentionGeometry &g, const float *rel,
                                                 const float *q, const float *cT, int64_t j,
                                                 int64_t h, int64_t bStart, bool causal,
                                                 float *dk) {
    const int64_t T = g.T, stride = T * g.D;
    Tile<Rows, Lanes, DH> tile;
    for (int m = 0; m < Rows; ++m)
      for (int p = 0; p < kParts; ++p)
        tile.v[m][p] = Vec{};
    const float *cRows[Rows];
    for (int m = 0; m < Rows; ++m)
      cRows[m] = cT + (((bStart + m) * g.heads + h) * T + j) * T;
    for (int64_t i = causal ? j : 0; i < T; ++i) {
      float x[Rows][DH];
      const float *qRows = q + packedRow(g, i, h, bStart);
      for (int m = 0; m < Rows; ++m) {
        const float c = cRows[m][i];
        const float *qi = qRows + m * DH;
        for (int d = 0; d < DH; ++d)
          x[m][d] = c * qi[d];
      }
      addOuterProductsTo(tile, DH, &x[0][0], 1, DH, rel + (i * T + j) * DH * DH, DH);
    }
    float *out = dk + g.head(bStart, h) + j * g.D;
    for (int m = 0; m < Rows; ++m)
      std::memcpy(out + m * stride, tile.v[m], sizeof tile.v[m]);
  }

  STRINGRT_INLINE_INTO_CALLER static void dk(const AttentionGeometry &g, const float *rel,
                                             const float *q, const float *cT, int64_t j,
                                             int64_t h, int64_t b0, int64_t b1, bool causal,
                                             float *dkOut) {
    const int64_t n = b1 - b0;
    for (int64_t r = 0; r < n; r += n < kRows ? 1 : kRows)
      if (n < kRows)
        dkTile<1>(g, rel, q, cT, j, h, b0 + r, causal, dkOut);
      else
        dkTile<kRows>(g, rel, q, cT, j, h, b0 + tileStart(r, n, kRows), causal, dkOut);
  }

  // drel_ij rows [d0, d0 + Rows) = sum over the tasks, head-major, of
  // X[h][b][d] k_bj^T (X = c q of every task, [heads][B][DH]).
  template <int Rows>
  STRINGRT_INLINE_INTO_CALLER static void drelTile(const AttentionGeometry &g, const float *k,
                                                   const float *X, int64_t j, int64_t d0,
                                                   float *out) {
    Tile<Rows, Lanes, DH> tile;
    for (int m = 0; m < Rows; ++m)
      for (int p = 0; p < kParts; ++p)
        tile.v[m][p] = Vec{};
    for (int64_t h = 0; h < g.heads; ++h)
      addOuterProductsTo(tile, g.B, X + h * g.B * DH + d0, DH, 1, k + packedRow(g, j, h, 0), DH);
    for (int m = 0; m < Rows; ++m)
      std::memcpy(out + (d0 + m) * DH, tile.v[m], sizeof tile.v[m]);
  }

  // drel_ij = sum_tasks c[task, i, j] q_i k_j^T into out (overwritten);
  // X is scratch of heads x B x DH floats.
  STRINGRT_INLINE_INTO_CALLER static void drel(const AttentionGeometry &g, const float *q,
                                               const float *k, const float *c, int64_t i,
                                               int64_t j, float *X, float *out) {
    const int64_t T = g.T;
    for (int64_t h = 0; h < g.heads; ++h)
      for (int64_t b = 0; b < g.B; ++b) {
        const float ct = c[((b * g.heads + h) * T + i) * T + j];
        const float *qi = q + packedRow(g, i, h, b);
        float *x = X + (h * g.B + b) * DH;
        for (int d = 0; d < DH; ++d)
          x[d] = ct * qi[d];
      }
    static_assert(DH >= kDrelRows, "drel's tiles fit its rows");
    for (int64_t r = 0; r < DH; r += kDrelRows)
      drelTile<kDrelRows>(g, k, X, j, tileStart(r, DH, kDrelRows), out);
  }
};

#endif // __GNUC__

} // namespace stringrt::cpu::util::rel
