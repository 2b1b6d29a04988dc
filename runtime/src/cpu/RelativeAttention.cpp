// Fast attention with relative rotations rel [T, T, Dh, Dh] (masks none and
// causal): s_ij = scale q_i^T R_ij k_j, R_ij = rel[i, j], the same R_ij for
// every batch and head.
//
// The rotations are the T^2 Dh^2 part (plain attention's scores are
// T^2 Dh): for a pair (i, j) they are small GEMMs over the tasks with R_ij
// shared, run on the register tile of the GEMMs (RelativeAttentionTiles.h)
// for head dims 8, 16 and 32, and by plain loops for the others. The passes
// are threaded over whole query rows i (scores; the gradient's row pass) or
// key rows j (dk), each writing only its rows: no atomics, and every sum
// runs in the same order on any thread count:
//   scores  S[t, i, j] = scale q_i . w_tij,  w_tij = R_ij k_j
//   dq_i    = sum_j c_tij w_tij                 j ascending
//   drel_ij = sum_t c_tij q_i k_j^T             tasks head-major
//   dk_j    = sum_i (c_tij q_i)^T R_ij          i ascending
// with c = scale dS. The gradient's row pass takes, per query row i and
// block of batches of one head, the rotated keys w of every key j (kept:
// T x kBlockBatches x Dh floats, in L2), the scores, the softmax and c of
// the rows (from dP = dY V^T, a GEMM per task before), and dq from the
// kept w; then drel_ij for every j: three T^2 Dh^2 passes in all (w, drel,
// dk). dV = P^T dY is per task, as without rel.
#include "RelativeAttention.h"

#include "stringrt/cpu/ThreadPool.h"

#include "Gemm.h"
#include "RelativeAttentionTiles.h"
#include "Softmax.h"
#include "TargetClones.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

namespace stringrt::cpu::util {

namespace {

using Geometry = AttentionGeometry;

// The first key hidden from query i (T without a mask).
int64_t visibleKeys(const Geometry &g, bool causal, int64_t i) { return causal ? i + 1 : g.T; }

// Task t (= b * heads + h)'s rows of a [B, T, D] tensor start at base + g.head(b, h).
int64_t taskOffset(const Geometry &g, int64_t task) { return g.head(task / g.heads, task % g.heads); }

// Batches per block of the row passes: the block's rotated keys
// (T x 24 x Dh floats: 77 KiB at T 50, Dh 16) stay in L2.
constexpr int64_t kBlockBatches = 24;

// RtRow[j] = rel[i, j]^T for every j (row i of rel, transposed per pair),
// so that R_ij k is a sum of RtRow[j]'s rows.
void transposeRow(const Geometry &g, const float *rel, int64_t i, float *RtRow) {
  const int64_t Dh = g.Dh;
  for (int64_t j = 0; j < g.T; ++j) {
    const float *R = rel + (i * g.T + j) * Dh * Dh;
    float *Rt = RtRow + j * Dh * Dh;
    for (int64_t d = 0; d < Dh; ++d)
      for (int64_t e = 0; e < Dh; ++e)
        Rt[e * Dh + d] = R[d * Dh + e];
  }
}

//===----------------------------------------------------------------------===//
// The three products, per instruction set and head dim
//===----------------------------------------------------------------------===//

// q and k come packed by task (rel::taskRow) to the scores and dk, by
// token (rel::tokenRow) to drel; dk goes out as [B, T, D].
// For batches [b0, b1) of head h at query i: S[task, i, j] and, when W is
// given, W[j][b - b0] = R_ij k_j (Dh floats), for every visible j.
using ScoresFn = void (*)(const Geometry &g, const float *RtRow, const float *q, const float *k,
                          int64_t i, int64_t visible, int64_t h, int64_t b0, int64_t b1,
                          float scale, float *S, float *W);
// dk rows j of batches [b0, b1) of head h (overwritten); cT[task, j, i] = c[task, i, j].
using DkFn = void (*)(const Geometry &g, const float *rel, const float *q, const float *cT,
                      int64_t j, int64_t h, int64_t b0, int64_t b1, bool causal, float *dk);
// out = drel_ij = sum over every task of c[task, i, j] q_i k_j^T; X is
// scratch of B x heads x Dh floats.
using DrelFn = void (*)(const Geometry &g, const float *q, const float *k, const float *c,
                        int64_t i, int64_t j, float *X, float *out);

struct PassKernels {
  ScoresFn scores;
  DkFn dk;
  DrelFn drel;
};

// Any head dim, plain loops (the sums in the tiles' orders).
void scoresPlain(const Geometry &g, const float *RtRow, const float *q, const float *k,
                 int64_t i, int64_t visible, int64_t h, int64_t b0, int64_t b1, float scale,
                 float *S, float *W) {
  const int64_t T = g.T, Dh = g.Dh;
  std::vector<float> local(static_cast<size_t>(Dh));
  for (int64_t j = 0; j < visible; ++j) {
    const float *Rt = RtRow + j * Dh * Dh;
    for (int64_t b = b0; b < b1; ++b) {
      float *w = W ? W + (j * (b1 - b0) + b - b0) * Dh : local.data();
      const float *kj = k + rel::taskRow(g, j, h, b), *qi = q + rel::taskRow(g, i, h, b);
      std::fill(w, w + Dh, 0.0f);
      for (int64_t e = 0; e < Dh; ++e)
        for (int64_t d = 0; d < Dh; ++d)
          w[d] += kj[e] * Rt[e * Dh + d];
      float s = 0.0f;
      for (int64_t d = 0; d < Dh; ++d)
        s += qi[d] * w[d];
      S[((b * g.heads + h) * T + i) * T + j] = scale * s;
    }
  }
}

void dkPlain(const Geometry &g, const float *rel, const float *q, const float *cT, int64_t j,
             int64_t h, int64_t b0, int64_t b1, bool causal, float *dk) {
  const int64_t T = g.T, Dh = g.Dh;
  for (int64_t b = b0; b < b1; ++b) {
    float *out = dk + g.head(b, h) + j * g.D;
    std::fill(out, out + Dh, 0.0f);
    const float *c = cT + ((b * g.heads + h) * T + j) * T;
    for (int64_t i = causal ? j : 0; i < T; ++i) {
      const float *qi = q + rel::taskRow(g, i, h, b), *R = rel + (i * T + j) * Dh * Dh;
      for (int64_t d = 0; d < Dh; ++d) {
        const float x = c[i] * qi[d];
        for (int64_t e = 0; e < Dh; ++e)
          out[e] += x * R[d * Dh + e];
      }
    }
  }
}

void drelPlain(const Geometry &g, const float *q, const float *k, const float *c, int64_t i,
               int64_t j, float *, float *out) {
  const int64_t T = g.T, Dh = g.Dh;
  std::fill(out, out + Dh * Dh, 0.0f);
  for (int64_t h = 0; h < g.heads; ++h)
    for (int64_t b = 0; b < g.B; ++b) {
      const float ct = c[((b * g.heads + h) * T + i) * T + j];
      const float *qi = q + rel::tokenRow(g, i, h, b), *kj = k + rel::tokenRow(g, j, h, b);
      for (int64_t d = 0; d < Dh; ++d) {
        const float x = ct * qi[d];
        for (int64_t e = 0; e < Dh; ++e)
          out[d * Dh + e] += x * kj[e];
      }
    }
}

#if defined(__GNUC__)
// The tiles built for one instruction set: Lanes its SIMD width in floats
// (capped at the head dim).
#define STRINGRT_REL_TILE_KERNELS(SUFFIX, ATTRIBUTES, LANES)                                    \
  template <int DH> ATTRIBUTES void scores##SUFFIX(                                             \
      const Geometry &g, const float *RtRow, const float *q, const float *k, int64_t i,         \
      int64_t visible, int64_t h, int64_t b0, int64_t b1, float scale, float *S, float *W) {    \
    rel::Tiles<std::min(LANES, DH), DH>::scores(g, RtRow, q, k, i, visible, h, b0, b1, scale,  \
                                                S, W);                                          \
  }                                                                                             \
  template <int DH> ATTRIBUTES void dk##SUFFIX(const Geometry &g, const float *rel,             \
                                               const float *q, const float *cT, int64_t j,      \
                                               int64_t h, int64_t b0, int64_t b1, bool causal,  \
                                               float *dk) {                                     \
    rel::Tiles<std::min(LANES, DH), DH>::dk(g, rel, q, cT, j, h, b0, b1, causal, dk);          \
  }                                                                                             \
  template <int DH> ATTRIBUTES void drel##SUFFIX(const Geometry &g, const float *q,             \
                                                 const float *k, const float *c, int64_t i,     \
                                                 int64_t j, float *X, float *out) {             \
    rel::Tiles<std::min(LANES, DH), DH>::drel(g, q, k, c, i, j, X, out);                       \
  }                                                                                             \
  template <int DH> PassKernels kernels##SUFFIX() {                                             \
    return {&scores##SUFFIX<DH>, &dk##SUFFIX<DH>, &drel##SUFFIX<DH>};                           \
  }

#if defined(__x86_64__) && defined(__linux__)
// AVX-512 and AVX2 contract each update to one FMA (RegisterTile.h).
STRINGRT_REL_TILE_KERNELS(Avx512, __attribute__((target("avx512f"))), 16)
STRINGRT_REL_TILE_KERNELS(Avx2, __attribute__((target("avx2,fma"))), 8)
#endif
STRINGRT_REL_TILE_KERNELS(Baseline, , 4)
#undef STRINGRT_REL_TILE_KERNELS

std::atomic<int> forcedLevel{-1}; // forceRelAttentionSimdLevel

template <int DH> PassKernels tiledKernels() {
  const int forced = forcedLevel.load(std::memory_order_relaxed);
  switch (forced >= 0 ? static_cast<SimdLevel>(forced) : widestSimdLevel()) {
#if defined(__x86_64__) && defined(__linux__)
  case SimdLevel::Avx512:
    return kernelsAvx512<DH>();
  case SimdLevel::Avx2:
    return kernelsAvx2<DH>();
#else
  case SimdLevel::Avx512:
  case SimdLevel::Avx2:
#endif
  case SimdLevel::Sse2:
    break;
  }
  return kernelsBaseline<DH>();
}
#endif

PassKernels passKernels(int64_t Dh) {
#if defined(__GNUC__)
  switch (Dh) {
  case 8:
    return tiledKernels<8>();
  case 16:
    return tiledKernels<16>();
  case 32:
    return tiledKernels<32>();
  default:
    break;
  }
#endif
  return {&scoresPlain, &dkPlain, &drelPlain};
}

//===----------------------------------------------------------------------===//
// The passes
//===----------------------------------------------------------------------===//

// n floats, not initialised (each pass writes what it later reads).
std::unique_ptr<float[]> scratch(int64_t n) {
  return std::unique_ptr<float[]>(new float[static_cast<size_t>(n)]);
}

// x [B, T, D] packed by task or by token (rel::taskRow, rel::tokenRow).
std::unique_ptr<float[]> packRows(const Geometry &g, const float *x, bool byToken) {
  const auto row = byToken ? &rel::tokenRow : &rel::taskRow;
  std::unique_ptr<float[]> packed = scratch(g.B * g.T * g.D);
  parallelFor(0, g.T, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t h = 0; h < g.heads; ++h)
        for (int64_t b = 0; b < g.B; ++b)
          std::copy_n(x + g.head(b, h) + r * g.D, g.Dh, packed.get() + row(g, r, h, b));
  });
  return packed;
}

// dq row = sum_{j < visible} c[j] W_j (j ascending), W_j at stride `stride`.
STRINGRT_TARGET_CLONES("avx512f", "fma", "default")
void dqFromRotated(const float *W, int64_t stride, const float *c, int64_t visible, int64_t Dh,
                   float *__restrict dqRow) {
  std::fill(dqRow, dqRow + Dh, 0.0f);
  for (int64_t j = 0; j < visible; ++j) {
    const float cj = c[j];
    const float *w = W + j * stride;
    for (int64_t d = 0; d < Dh; ++d)
      dqRow[d] += cj * w[d];
  }
}

// Row i of a task: P (scores in, probabilities out) and c = scale dS in
// place over dP (dP_ij = dy_i . v_j, the dP pre-pass), dS = P (dP - sum_l
// P_il dP_il) over the visible keys, 0 for the hidden ones.
void rowSoftmaxGrad(int64_t T, int64_t visible, float scale, float *p, float *c) {
  softmaxRow(p, visible, T);
  std::fill(c + visible, c + T, 0.0f);
  float pdp = 0.0f;
  for (int64_t j = 0; j < T; ++j)
    pdp += p[j] * c[j];
  for (int64_t j = 0; j < T; ++j)
    c[j] = scale * (p[j] * (c[j] - pdp));
}

// P = softmax of each task's score rows, in place (hidden keys 0); each
// row's log-sum-exp into lse[task * T + i] when lse is given.
void softmaxScores(const Geometry &g, bool causal, float *S, int64_t t0, int64_t t1,
                   float *lse = nullptr) {
  for (int64_t task = t0; task < t1; ++task)
    for (int64_t i = 0; i < g.T; ++i)
      softmaxRow(S + (task * g.T + i) * g.T, visibleKeys(g, causal, i), g.T,
                 lse ? lse + task * g.T + i : nullptr);
}


// S[t, i, j] = scale q_i^T R_ij k_j for the visible pairs, every task.
void relScores(const Geometry &g, const PassKernels &kernels, const float *q, const float *k,
               const float *rel, float scale, bool causal, float *S) {
  parallelFor(0, g.T, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> RtRow(static_cast<size_t>(g.T * g.Dh * g.Dh));
    for (int64_t i = i0; i < i1; ++i) {
      transposeRow(g, rel, i, RtRow.data());
      for (int64_t h = 0; h < g.heads; ++h)
        for (int64_t b0 = 0; b0 < g.B; b0 += kBlockBatches)
          kernels.scores(g, RtRow.data(), q, k, i, visibleKeys(g, causal, i), h, b0,
                         std::min(g.B, b0 + kBlockBatches), scale, S, nullptr);
    }
  });
}

} // namespace

void forceRelAttentionSimdLevel(std::optional<SimdLevel> level) {
#if defined(__GNUC__)
  forcedLevel.store(level ? static_cast<int>(*level) : -1, std::memory_order_relaxed);
#else
  (void)level;
#endif
}

void relAttention(const Geometry &g, const float *q, const float *k, const float *v,
                  const float *rel, float scale, bool causal, float *y, float *lse) {
  const int64_t T = g.T, tasks = g.B * g.heads;
  std::unique_ptr<float[]> P = scratch(tasks * T * T);
  relScores(g, passKernels(g.Dh), packRows(g, q, false).get(), packRows(g, k, false).get(), rel,
            scale, causal, P.get());
  parallelFor(0, tasks, 1, [&](int64_t t0, int64_t t1) {
    softmaxScores(g, causal, P.get(), t0, t1, lse);
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t off = taskOffset(g, task);
      // Y = P V  ([T, T] x [T, Dh])
      gemmSerial(Trans::No, Trans::No, T, g.Dh, T, 1.0f, P.get() + task * T * T, T, v + off,
                 g.D, 0.0f, y + off, g.D);
    }
  });
}

void relAttentionGrad(const Geometry &g, const float *q, const float *k, const float *v,
                      const float *dy, const float *rel, float s, bool causal, float *dq,
                      float *dk, float *dv, float *drel) {
  const int64_t T = g.T, Dh = g.Dh, D = g.D, tasks = g.B * g.heads;
  const PassKernels kernels = passKernels(Dh);
  const std::unique_ptr<float[]> qByTask = packRows(g, q, false), kByTask = packRows(g, k, false),
                                 qByToken = packRows(g, q, true), kByToken = packRows(g, k, true);
  // P and c = scale dS of every task, filled by the row pass.
  std::unique_ptr<float[]> P = scratch(tasks * T * T), dS = scratch(tasks * T * T);

  // dP = dY V^T per task into dS (the row pass turns it into c in place).
  parallelFor(0, tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t off = taskOffset(g, task);
      gemmSerial(Trans::No, Trans::Yes, T, T, Dh, 1.0f, dy + off, D, v + off, D, 0.0f,
                 dS.get() + task * T * T, T);
    }
  });

  // The row pass: by query rows i, per block of batches of one head: the
  // rotated keys and the scores, the softmax and c of the rows, dq from
  // the kept rotations; then drel_ij from every task's c.
  parallelFor(0, T, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> RtRow(static_cast<size_t>(T * Dh * Dh));
    std::vector<float> W(static_cast<size_t>(T * std::min(kBlockBatches, g.B) * Dh));
    std::vector<float> X(static_cast<size_t>(tasks * Dh));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t visible = visibleKeys(g, causal, i);
      transposeRow(g, rel, i, RtRow.data());
      for (int64_t h = 0; h < g.heads; ++h)
        for (int64_t b0 = 0; b0 < g.B; b0 += kBlockBatches) {
          const int64_t b1 = std::min(g.B, b0 + kBlockBatches);
          kernels.scores(g, RtRow.data(), qByTask.get(), kByTask.get(), i, visible, h, b0, b1, s, P.get(), W.data());
          for (int64_t b = b0; b < b1; ++b) {
            const int64_t task = b * g.heads + h;
            float *p = P.get() + (task * T + i) * T, *c = dS.get() + (task * T + i) * T;
            rowSoftmaxGrad(T, visible, s, p, c);
            dqFromRotated(W.data() + (b - b0) * Dh, (b1 - b0) * Dh, c, visible, Dh,
                          dq + g.head(b, h) + i * D);
          }
        }
      if (drel) {
        float *drelRow = drel + i * T * Dh * Dh;
        for (int64_t j = 0; j < visible; ++j)
          kernels.drel(g, qByToken.get(), kByToken.get(), dS.get(), i, j, X.data(), drelRow + j * Dh * Dh);
        std::fill(drelRow + visible * Dh * Dh, drelRow + T * Dh * Dh, 0.0f);
      }
    }
  });

  // Per task: dV = P^T dY, then c transposed, cT[t, j, i], over the task's
  // P (read by nothing after dV), so that the dk pass reads each task's c
  // for key j contiguously (c[t, i, j] over i is T floats apart: a cache
  // line per entry).
  float *cT = P.get();
  parallelFor(0, tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t off = taskOffset(g, task);
      gemmSerial(Trans::Yes, Trans::No, T, Dh, T, 1.0f, P.get() + task * T * T, T, dy + off, D,
                 0.0f, dv + off, D);
      const float *c = dS.get() + task * T * T;
      float *out = cT + task * T * T;
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j)
          out[j * T + i] = c[i * T + j];
    }
  });

  // dk by key rows j: the queries that see key j, ascending.
  parallelFor(0, T, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t h = 0; h < g.heads; ++h)
        for (int64_t b0 = 0; b0 < g.B; b0 += kBlockBatches)
          kernels.dk(g, rel, qByTask.get(), cT, j, h, b0, std::min(g.B, b0 + kBlockBatches), causal,
                     dk);
  });
}

} // namespace stringrt::cpu::util
