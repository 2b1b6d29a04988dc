// Fast attention with relative rotations rel [T, T, Dh, Dh] (masks none and
// causal): s_ij = scale q_i^T R_ij k_j, R_ij = rel[i, j], the same R_ij for
// every batch and head.
//
// Every pass walks the pairs (i, j) outermost and the (batch, head) tasks
// innermost, so each R_ij (1 KiB at Dh 16) is read from memory once per pass
// and used by all B * H tasks from L1, rather than the whole rel (2.5 MiB
// for ViT's 50 tokens) streaming through the cache once per task. The
// passes are threaded over whole query rows i (scores, dq, drel) or key rows
// j (dk), each writing only its rows: no atomics, and every sum runs in the
// same order on any thread count:
//   scores  S[t, i, j] = scale sum_d q_i[d] (sum_e R_ij[d, e] k_j[e])
//   dq_i[d]     += c_tij (R_ij k_j)[d]            over j, ascending
//   drel_ij     += c_tij q_i k_j^T                 over t, ascending
//   dk_j[e]     += c_tij sum_d q_i[d] R_ij[d, e]   over i ascending, then d
// with c = scale dS. The softmax, dV = P^T dY and dS = dY V^T are per task,
// as without rel.
#include "RelativeAttention.h"

#include "stringrt/cpu/ThreadPool.h"

#include "Gemm.h"
#include "Softmax.h"
#include "TargetClones.h"

#include <algorithm>
#include <vector>

namespace stringrt::cpu::util {

namespace {

using Geometry = AttentionGeometry;

// rel[i, j] as a row-major [Dh, Dh] matrix.
const float *relPair(const Geometry &g, const float *rel, int64_t i, int64_t j) {
  return rel + (i * g.T + j) * g.Dh * g.Dh;
}

// The first key hidden from query i (T without a mask).
int64_t visibleKeys(const Geometry &g, bool causal, int64_t i) { return causal ? i + 1 : g.T; }

// Rt = R^T, so that R k is a sum of Rt's rows (vectorised over d).
void transpose(const float *R, int64_t Dh, float *Rt) {
  for (int64_t d = 0; d < Dh; ++d)
    for (int64_t e = 0; e < Dh; ++e)
      Rt[e * Dh + d] = R[d * Dh + e];
}

// w = R k: w[d] = sum_e R[d, e] k[e], e ascending, from Rt = R^T.
inline void rotate(const float *__restrict Rt, const float *__restrict k, int64_t Dh,
                   float *__restrict w) {
  std::fill(w, w + Dh, 0.0f);
  for (int64_t e = 0; e < Dh; ++e) {
    const float ke = k[e];
    const float *row = Rt + e * Dh;
    for (int64_t d = 0; d < Dh; ++d)
      w[d] += row[d] * ke;
  }
}

// Task t's rows of a [B, T, D] tensor start at base + g.head(b, h).
int64_t taskOffset(const Geometry &g, int64_t task) { return g.head(task / g.heads, task % g.heads); }

// The per-pair work of each pass, over every task: the hot loops, built
// for AVX-512 and AVX2 + FMA as well (TargetClones.h). For the head dims
// 16 and 32 the tasks go in blocks of kBlock with the block's vectors in
// registers, so that kBlock independent chains of multiply-adds overlap
// (one task's sums are chains: each term waits for the previous one). Each
// task's sums keep their order; the two loops can still differ in the last
// bit where the compiler fuses a multiply and an add in one and not in the
// other (measured: within 6e-7 of the largest gradient). `w` holds Dh floats.
constexpr int64_t kBlock = 4;

// Row r of a [B, T, D] tensor for each task of a block.
struct TaskRows {
  const float *at[kBlock];
};

// (A function, not a constructor: Clang does not emit an inline
// constructor called only from target_clones copies.)
[[gnu::always_inline]] inline TaskRows taskRows(const Geometry &g, const float *x, int64_t task,
                                                int64_t r) {
  TaskRows rows;
  for (int64_t b = 0; b < kBlock; ++b)
    rows.at[b] = x + taskOffset(g, task + b) + r * g.D;
  return rows;
}

// w_b = R k_b for the block's tasks (sums over e ascending).
template <int64_t DH>
[[gnu::always_inline]] inline void rotateBlock(const float *__restrict Rt, const TaskRows &k,
                                               float (&w)[kBlock][DH]) {
  for (int64_t b = 0; b < kBlock; ++b)
    for (int64_t d = 0; d < DH; ++d)
      w[b][d] = 0.0f;
  for (int64_t e = 0; e < DH; ++e)
    for (int64_t b = 0; b < kBlock; ++b) {
      const float ke = k.at[b][e];
      for (int64_t d = 0; d < DH; ++d)
        w[b][d] += Rt[e * DH + d] * ke;
    }
}

// The tasks [0, blocked) of scoresOfPair, in blocks.
template <int64_t DH>
[[gnu::always_inline]] inline int64_t scoresBlocked(const Geometry &g, const float *Rt,
                                                     const float *q, const float *k, int64_t i,
                                                     int64_t j, float scale, float *S) {
  const int64_t T = g.T, blocked = g.B * g.heads / kBlock * kBlock;
  for (int64_t task = 0; task < blocked; task += kBlock) {
    float w[kBlock][DH];
    rotateBlock<DH>(Rt, taskRows(g, k, task, j), w);
    const TaskRows qi = taskRows(g, q, task, i);
    float s[kBlock] = {};
    for (int64_t d = 0; d < DH; ++d)
      for (int64_t b = 0; b < kBlock; ++b)
        s[b] += qi.at[b][d] * w[b][d];
    for (int64_t b = 0; b < kBlock; ++b)
      S[((task + b) * T + i) * T + j] = scale * s[b];
  }
  return blocked;
}

// S[t, i, j] = scale q_i^T (R_ij k_j).
STRINGRT_TARGET_CLONES("avx512f", "fma", "default")
void scoresOfPair(const Geometry &g, const float *Rt, const float *q, const float *k, int64_t i,
                  int64_t j, float scale, float *S, float *w) {
  const int64_t T = g.T, Dh = g.Dh;
  int64_t task = Dh == 16   ? scoresBlocked<16>(g, Rt, q, k, i, j, scale, S)
                 : Dh == 32 ? scoresBlocked<32>(g, Rt, q, k, i, j, scale, S)
                            : 0;
  for (const int64_t tasks = g.B * g.heads; task < tasks; ++task) {
    const int64_t off = taskOffset(g, task);
    rotate(Rt, k + off + j * g.D, Dh, w);
    const float *qi = q + off + i * g.D;
    float s = 0.0f;
    for (int64_t d = 0; d < Dh; ++d)
      s += qi[d] * w[d];
    S[(task * T + i) * T + j] = scale * s;
  }
}

// The tasks [0, blocked) of dqAndDrelOfPair, in blocks.
template <int64_t DH>
[[gnu::always_inline]] inline int64_t dqAndDrelBlocked(const Geometry &g, const float *Rt,
                                                        const float *q, const float *k,
                                                        const float *c, int64_t i, int64_t j,
                                                        float *__restrict dqRows,
                                                        float *__restrict out) {
  const int64_t T = g.T, blocked = g.B * g.heads / kBlock * kBlock;
  // drel_ij summed in a local block (registers at DH 16) across the tasks.
  float rel[DH][DH];
  if (out)
    for (int64_t d = 0; d < DH; ++d)
      for (int64_t e = 0; e < DH; ++e)
        rel[d][e] = out[d * DH + e];
  for (int64_t task = 0; task < blocked; task += kBlock) {
    const TaskRows kj = taskRows(g, k, task, j);
    float w[kBlock][DH];
    rotateBlock<DH>(Rt, kj, w);
    float ct[kBlock];
    for (int64_t b = 0; b < kBlock; ++b) {
      ct[b] = c[((task + b) * T + i) * T + j];
      float *dqRow = dqRows + (task + b) * DH;
      for (int64_t d = 0; d < DH; ++d)
        dqRow[d] += ct[b] * w[b][d];
    }
    if (!out)
      continue;
    const TaskRows qi = taskRows(g, q, task, i);
    for (int64_t b = 0; b < kBlock; ++b) // tasks ascending, as the plain loop
      for (int64_t d = 0; d < DH; ++d) {
        const float cq = ct[b] * qi.at[b][d];
        for (int64_t e = 0; e < DH; ++e)
          rel[d][e] += cq * kj.at[b][e];
      }
  }
  if (out)
    for (int64_t d = 0; d < DH; ++d)
      for (int64_t e = 0; e < DH; ++e)
        out[d * DH + e] = rel[d][e];
  return blocked;
}

// dq_i += c R_ij k_j into dqRows (row i of every task, Dh each), and
// drel_ij = sum_t c q_i k_j^T into `out` when not null.
STRINGRT_TARGET_CLONES("avx512f", "fma", "default")
void dqAndDrelOfPair(const Geometry &g, const float *Rt, const float *q, const float *k,
                     const float *c, int64_t i, int64_t j, float *__restrict dqRows,
                     float *__restrict out, float *w) {
  const int64_t T = g.T, Dh = g.Dh;
  int64_t task = Dh == 16   ? dqAndDrelBlocked<16>(g, Rt, q, k, c, i, j, dqRows, out)
                 : Dh == 32 ? dqAndDrelBlocked<32>(g, Rt, q, k, c, i, j, dqRows, out)
                            : 0;
  for (const int64_t tasks = g.B * g.heads; task < tasks; ++task) {
    const int64_t off = taskOffset(g, task);
    const float ct = c[(task * T + i) * T + j];
    const float *kj = k + off + j * g.D;
    rotate(Rt, kj, Dh, w);
    float *dqRow = dqRows + task * Dh;
    for (int64_t d = 0; d < Dh; ++d)
      dqRow[d] += ct * w[d];
    if (!out)
      continue;
    const float *qi = q + off + i * g.D;
    for (int64_t d = 0; d < Dh; ++d) {
      const float cq = ct * qi[d];
      float *od = out + d * Dh;
      for (int64_t e = 0; e < Dh; ++e)
        od[e] += cq * kj[e];
    }
  }
}

// The tasks [0, blocked) of dkOfPair, in blocks.
template <int64_t DH>
[[gnu::always_inline]] inline int64_t dkBlocked(const Geometry &g, const float *__restrict R,
                                                 const float *q, const float *c, int64_t i,
                                                 int64_t j, float *__restrict dkRows) {
  const int64_t T = g.T, blocked = g.B * g.heads / kBlock * kBlock;
  for (int64_t task = 0; task < blocked; task += kBlock) {
    const TaskRows qi = taskRows(g, q, task, i);
    float ct[kBlock], acc[kBlock][DH];
    for (int64_t b = 0; b < kBlock; ++b) {
      ct[b] = c[((task + b) * T + i) * T + j];
      for (int64_t e = 0; e < DH; ++e)
        acc[b][e] = dkRows[(task + b) * DH + e];
    }
    for (int64_t d = 0; d < DH; ++d)
      for (int64_t b = 0; b < kBlock; ++b) {
        const float cq = ct[b] * qi.at[b][d];
        for (int64_t e = 0; e < DH; ++e)
          acc[b][e] += cq * R[d * DH + e];
      }
    for (int64_t b = 0; b < kBlock; ++b)
      for (int64_t e = 0; e < DH; ++e)
        dkRows[(task + b) * DH + e] = acc[b][e];
  }
  return blocked;
}

// dk_j += c sum_d q_i[d] R_ij[d, :] into dkRows (row j of every task).
STRINGRT_TARGET_CLONES("avx512f", "fma", "default")
void dkOfPair(const Geometry &g, const float *__restrict R, const float *q, const float *c,
              int64_t i, int64_t j, float *__restrict dkRows) {
  const int64_t T = g.T, Dh = g.Dh;
  int64_t task = Dh == 16   ? dkBlocked<16>(g, R, q, c, i, j, dkRows)
                 : Dh == 32 ? dkBlocked<32>(g, R, q, c, i, j, dkRows)
                            : 0;
  for (const int64_t tasks = g.B * g.heads; task < tasks; ++task) {
    const float ct = c[(task * T + i) * T + j];
    const float *qi = q + taskOffset(g, task) + i * g.D;
    float *dkRow = dkRows + task * Dh;
    for (int64_t d = 0; d < Dh; ++d) {
      const float cq = ct * qi[d];
      const float *Rd = R + d * Dh;
      for (int64_t e = 0; e < Dh; ++e)
        dkRow[e] += cq * Rd[e];
    }
  }
}

// S[t, i, j] = scale q_i^T R_ij k_j for the visible pairs, every task.
void relScores(const Geometry &g, const float *q, const float *k, const float *rel, float scale,
               bool causal, float *S) {
  const int64_t Dh = g.Dh;
  parallelFor(0, g.T, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> Rt(static_cast<size_t>(Dh * Dh)), w(static_cast<size_t>(Dh));
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = 0; j < visibleKeys(g, causal, i); ++j) {
        transpose(relPair(g, rel, i, j), Dh, Rt.data());
        scoresOfPair(g, Rt.data(), q, k, i, j, scale, S, w.data());
      }
  });
}

// P = softmax of each task's score rows, in place (hidden keys 0).
void softmaxScores(const Geometry &g, bool causal, float *S, int64_t t0, int64_t t1) {
  for (int64_t task = t0; task < t1; ++task)
    for (int64_t i = 0; i < g.T; ++i)
      softmaxRow(S + (task * g.T + i) * g.T, visibleKeys(g, causal, i), g.T);
}

} // namespace

void relAttention(const Geometry &g, const float *q, const float *k, const float *v,
                  const float *rel, float scale, bool causal, float *y) {
  const int64_t T = g.T, tasks = g.B * g.heads;
  std::vector<float> P(static_cast<size_t>(tasks * T * T));
  relScores(g, q, k, rel, scale, causal, P.data());
  parallelFor(0, tasks, 1, [&](int64_t t0, int64_t t1) {
    softmaxScores(g, causal, P.data(), t0, t1);
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t off = taskOffset(g, task);
      // Y = P V  ([T, T] x [T, Dh])
      gemmSerial(Trans::No, Trans::No, T, g.Dh, T, 1.0f, P.data() + task * T * T, T, v + off,
                 g.D, 0.0f, y + off, g.D);
    }
  });
}

void relAttentionGrad(const Geometry &g, const float *q, const float *k, const float *v,
                      const float *dy, const float *rel, float s, bool causal, float *dq,
                      float *dk, float *dv, float *drel) {
  const int64_t T = g.T, Dh = g.Dh, D = g.D, tasks = g.B * g.heads;
  // P, then c = scale dS, of every task.
  std::vector<float> P(static_cast<size_t>(tasks * T * T)), dS(P.size());
  relScores(g, q, k, rel, s, causal, P.data());
  parallelFor(0, tasks, 1, [&](int64_t t0, int64_t t1) {
    softmaxScores(g, causal, P.data(), t0, t1);
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t off = taskOffset(g, task);
      const float *p = P.data() + task * T * T;
      float *dSt = dS.data() + task * T * T;
      // dV = P^T dY, dP = dY V^T, then dS_ij = P_ij (dP_ij - sum_l P_il dP_il)
      gemmSerial(Trans::Yes, Trans::No, T, Dh, T, 1.0f, p, T, dy + off, D, 0.0f, dv + off, D);
      gemmSerial(Trans::No, Trans::Yes, T, T, Dh, 1.0f, dy + off, D, v + off, D, 0.0f, dSt, T);
      softmaxBackwardRows(T, p, dSt);
      for (int64_t e = 0; e < T * T; ++e) // c = scale dS, while the rows are in cache
        dSt[e] *= s;
    }
  });

  // dq (and drel) by query rows i.
  parallelFor(0, T, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> Rt(static_cast<size_t>(Dh * Dh)), w(static_cast<size_t>(Dh));
    std::vector<float> dqRows(static_cast<size_t>(tasks * Dh)); // row i of every task
    for (int64_t i = i0; i < i1; ++i) {
      std::fill(dqRows.begin(), dqRows.end(), 0.0f);
      float *drelRow = drel ? drel + i * T * Dh * Dh : nullptr;
      if (drelRow)
        std::fill(drelRow, drelRow + T * Dh * Dh, 0.0f);
      for (int64_t j = 0; j < visibleKeys(g, causal, i); ++j) {
        transpose(relPair(g, rel, i, j), Dh, Rt.data());
        dqAndDrelOfPair(g, Rt.data(), q, k, dS.data(), i, j, dqRows.data(),
                        drelRow ? drelRow + j * Dh * Dh : nullptr, w.data());
      }
      for (int64_t task = 0; task < tasks; ++task)
        std::copy_n(dqRows.data() + task * Dh, Dh, dq + taskOffset(g, task) + i * D);
    }
  });

  // dk by key rows j: the queries that see key j, ascending.
  parallelFor(0, T, 1, [&](int64_t j0, int64_t j1) {
    std::vector<float> dkRows(static_cast<size_t>(tasks * Dh)); // row j of every task
    for (int64_t j = j0; j < j1; ++j) {
      std::fill(dkRows.begin(), dkRows.end(), 0.0f);
      for (int64_t i = causal ? j : 0; i < T; ++i)
        dkOfPair(g, relPair(g, rel, i, j), q, dS.data(), i, j, dkRows.data());
      for (int64_t task = 0; task < tasks; ++task)
        std::copy_n(dkRows.data() + task * Dh, Dh, dk + taskOffset(g, task) + j * D);
    }
  });
}

} // namespace stringrt::cpu::util
