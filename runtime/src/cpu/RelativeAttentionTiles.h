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

// q and k reach the tiles packed (packRows in RelativeAttention.cpp) in
// one of two layouts, so that a tile reads whole cache lines in streams:
// by task, [heads][B][T][Dh], for the scores and dk (a tile walks the
// tokens of its batches: one stream per batch); by token,
// [T][heads][B][Dh], for drel (it walks every batch at one token).
inline int64_t taskRow(const AttentionGeometry &g, int64_t r, int64_t h, int64_t b) {
  return ((h * g.B + b) * g.T + r) * g.Dh;
}
inline int64_t tokenRow(const AttentionGeometry &g, int64_t r, int64_t h, int64_t b) {
  return ((r * g.heads + h) * g.B + b) * g.Dh;
}

// Tiles of `rows` over [0, n), n >= rows: for r = 0, rows, ... < n the
// tile at tileStart(r, n, rows), the last one overlapping the one before.
// (Loops, not a helper taking lambdas: a lambda would not be built for the
// caller's instruction set.)
inline int64_t tileStart(int64_t r, int64_t n, int64_t rows) { return std::min(r, n - rows); }

#if defined(__GNUC__)

// The sum of a SIMD value's lanes as a balanced tree of adjacent pairs,
// ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)) for 8 lanes: the
// order laneSums8 keeps, so that a row's score has the same bits in a tile
// of one row and of several.
template <int Lanes>
STRINGRT_INLINE_INTO_CALLER float laneSum(const typename SimdOf<Lanes>::type &v) {
  float x[Lanes];
  std::memcpy(x, &v, sizeof x);
  for (int n = Lanes; n > 1; n /= 2)
    for (int l = 0; l < n / 2; ++l)
      x[l] = x[2 * l] + x[2 * l + 1];
  return x[0];
}

#if defined(__clang__) || __GNUC__ >= 12
#define STRINGRT_REL_LANE_SUMS8 1
// laneSum<8> of eight values at once, sums[m] for v[m]: the
// same tree, each level one shuffle pair and an add for all eight rows
// (three levels against eight rows of three dependent adds each).
// (Operands by reference: a 32-byte vector by value in a function built
// without AVX draws GCC's ABI warning.)
STRINGRT_INLINE_INTO_CALLER void laneSums8(const SimdOf<8>::type (&v)[8], float (&sums)[8]) {
  using V8 = SimdOf<8>::type;
  V8 pairs[4], quads[2];
  for (int r = 0; r < 4; ++r) // [v0 01, v1 01, v0 23, v1 23, v0 45, ...]
    pairs[r] = __builtin_shufflevector(v[2 * r], v[2 * r + 1], 0, 8, 2, 10, 4, 12, 6, 14) +
               __builtin_shufflevector(v[2 * r], v[2 * r + 1], 1, 9, 3, 11, 5, 13, 7, 15);
  for (int r = 0; r < 2; ++r) // [v0 0-3, v1 0-3, v2 0-3, v3 0-3, v0 4-7, ...]
    quads[r] = __builtin_shufflevector(pairs[2 * r], pairs[2 * r + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
               __builtin_shufflevector(pairs[2 * r], pairs[2 * r + 1], 2, 3, 10, 11, 6, 7, 14, 15);
  const V8 all = __builtin_shufflevector(quads[0], quads[1], 0, 1, 2, 3, 8, 9, 10, 11) +
                 __builtin_shufflevector(quads[0], quads[1], 4, 5, 6, 7, 12, 13, 14, 15);
  std::memcpy(sums, &all, sizeof sums);
}
#endif

// The kernels for head dim DH on Lanes-wide SIMD values: tiles of kRows
// batches (12 accumulators), and of kDrelRows rows of drel.
template <int Lanes, int DH> struct Tiles {
  using Vec = typename SimdOf<Lanes>::type;
  static constexpr int kParts = DH / Lanes;
  static constexpr int kRows = kParts >= 12 ? 1 : 12 / kParts;
  static constexpr int kDrelRows = std::min(kRows, 8);

  // For the Rows batches from bStart (in the block [b0, b1)) of head h at
  // query i, every visible key j: S[task, i, j] = scale q . (R_ij k_j), and
  // W[j][b - b0] = R_ij k_j (Dh floats each) when W is given. RtRow holds
  // R_ij^T for every j.
  template <int Rows>
  STRINGRT_INLINE_INTO_CALLER static void scoreTile(const AttentionGeometry &g,
                                                    const float *RtRow, const float *q,
                                                    const float *k, int64_t i, int64_t visible,
                                                    int64_t h, int64_t b0, int64_t b1,
                                                    int64_t bStart, float scale, float *S,
                                                    float *W) {
    const int64_t T = g.T;
    const int64_t stride = T * DH; // between batches, by task
    const float *qRows = q + taskRow(g, i, h, bStart);
    for (int64_t j = 0; j < visible; ++j) {
      Tile<Rows, Lanes, DH> tile;
      for (int m = 0; m < Rows; ++m)
        for (int p = 0; p < kParts; ++p)
          tile.v[m][p] = Vec{};
      addOuterProductsTo(tile, DH, k + taskRow(g, j, h, bStart), 1, stride, RtRow + j * DH * DH,
                         DH);
      Vec dots[Rows];
      for (int m = 0; m < Rows; ++m) {
        Vec qv[kParts];
        std::memcpy(qv, qRows + m * stride, sizeof qv);
        dots[m] = qv[0] * tile.v[m][0];
        for (int p = 1; p < kParts; ++p)
          dots[m] += qv[p] * tile.v[m][p];
        if (W)
          std::memcpy(W + (j * (b1 - b0) + bStart + m - b0) * DH, tile.v[m], sizeof tile.v[m]);
      }
      float sums[Rows];
#if defined(STRINGRT_REL_LANE_SUMS8)
      if constexpr (Lanes == 8 && Rows > 1) {
        for (int m0 = 0; m0 < Rows; m0 += 8) {
          Vec eight[8] = {};
          for (int m = m0; m < std::min(Rows, m0 + 8); ++m)
            eight[m - m0] = dots[m];
          float r[8];
          laneSums8(eight, r);
          for (int m = m0; m < std::min(Rows, m0 + 8); ++m)
            sums[m] = r[m - m0];
        }
      } else
#endif
        for (int m = 0; m < Rows; ++m)
          sums[m] = laneSum<Lanes>(dots[m]);
      for (int m = 0; m < Rows; ++m)
        S[(((bStart + m) * g.heads + h) * T + i) * T + j] = scale * sums[m];
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
      const float *qRows = q + taskRow(g, i, h, bStart);
      for (int m = 0; m < Rows; ++m) {
        const float c = cRows[m][i];
        const float *qi = qRows + m * T * DH;
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
      addOuterProductsTo(tile, g.B, X + h * g.B * DH + d0, DH, 1, k + tokenRow(g, j, h, 0), DH);
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
        const float *qi = q + tokenRow(g, i, h, b);
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
