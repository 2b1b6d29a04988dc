// Fast attention with relative rotations rel [T, T, Dh, Dh] (masks none and
// causal): s_ij = scale q_i^T R_ij k_j, R_ij = rel[i, j], the same R_ij for
// every batch and head.
//
// Every pass walks the pairs (i, j) outermost and the (batch, head) tasks
// innermost, so each R_ij (1 KiB at Dh 16) is read from memory once per pass
// (per chunk of tasks in the gradient's row pass) and used by all the tasks
// from L1, rather than the whole rel (2.5 MiB for ViT's 50 tokens) streaming
// through the cache once per task. The passes are threaded over whole query
// rows i (scores; the gradient's row pass) or key rows j (dk), each writing
// only its rows: no atomics, and every sum runs in the same order on any
// thread count:
//   scores  S[t, i, j] = scale q_i . w_tij,  w_tij = R_ij k_j (e ascending)
//   dq_i[d]     += c_tij w_tij[d]              over j, ascending
//   drel_ij     += c_tij q_i k_j^T              over t, ascending
//   dk_j[e]     += c_tij sum_d q_i[d] R_ij[d, e]   over i ascending, then d
// with c = scale dS. The rotation w = R k is the T^2 Dh^2 part (plain
// attention's scores are T^2 Dh), so the gradient computes it once: its row
// pass recomputes row i's scores for a chunk of tasks keeping every w_tij
// (T x chunk x Dh floats, ~100 KiB, in L2), takes the softmax and c of the
// row (dP_ij = dy_i . v_j), and then dq_i from the kept w and drel_ij:
// three T^2 Dh^2 passes in all (w, drel, dk) where a separate dq pass would
// rotate k again. dV = P^T dY is per task, as without rel.
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
      ct[b] = c[((task + b) * T + j) * T + i];
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

// dk_j += c sum_d q_i[d] R_ij[d, :] into dkRows (row j of every task); c is
// transposed here, cT[t, j, i] (the pass walks i for a fixed j).
STRINGRT_TARGET_CLONES("avx512f", "fma", "default")
void dkOfPair(const Geometry &g, const float *__restrict R, const float *q, const float *c,
              int64_t i, int64_t j, float *__restrict dkRows) {
  const int64_t T = g.T, Dh = g.Dh;
  int64_t task = Dh == 16   ? dkBlocked<16>(g, R, q, c, i, j, dkRows)
                 : Dh == 32 ? dkBlocked<32>(g, R, q, c, i, j, dkRows)
                            : 0;
  for (const int64_t tasks = g.B * g.heads; task < tasks; ++task) {
    const float ct = c[(task * T + j) * T + i];
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

// The tasks [t0, blocked) of rotateAndScore, in blocks.
template <int64_t DH>
[[gnu::always_inline]] inline int64_t rotateAndScoreBlocked(const Geometry &g, const float *Rt,
                                                            const float *q, const float *k,
                                                            int64_t i, int64_t j, int64_t t0,
                                                            int64_t t1, float scale, float *S,
                                                            float *__restrict W) {
  const int64_t T = g.T, blocked = t0 + (t1 - t0) / kBlock * kBlock;
  for (int64_t task = t0; task < blocked; task += kBlock) {
    float w[kBlock][DH];
    rotateBlock<DH>(Rt, taskRows(g, k, task, j), w);
    const TaskRows qi = taskRows(g, q, task, i);
    float s[kBlock] = {};
    for (int64_t d = 0; d < DH; ++d)
      for (int64_t b = 0; b < kBlock; ++b)
        s[b] += qi.at[b][d] * w[b][d];
    for (int64_t b = 0; b < kBlock; ++b) {
      S[((task + b) * T + i) * T + j] = scale * s[b];
      for (int64_t d = 0; d < DH; ++d)
        W[(task + b - t0) * DH + d] = w[b][d];
    }
  }
  return blocked;
}

// For the tasks [t0, t1): W[t - t0] = R_ij k_j (Dh each) and
// S[t, i, j] = scale q_i . W[t - t0], the bits scoresOfPair gives.
STRINGRT_TARGET_CLONES("avx512f", "fma", "default")
void rotateAndScore(const Geometry &g, const float *Rt, const float *q, const float *k,
                    int64_t i, int64_t j, int64_t t0, int64_t t1, float scale, float *S,
                    float *W) {
  const int64_t T = g.T, Dh = g.Dh;
  int64_t task = Dh == 16   ? rotateAndScoreBlocked<16>(g, Rt, q, k, i, j, t0, t1, scale, S, W)
                 : Dh == 32 ? rotateAndScoreBlocked<32>(g, Rt, q, k, i, j, t0, t1, scale, S, W)
                            : t0;
  for (; task < t1; ++task) {
    const int64_t off = taskOffset(g, task);
    float *w = W + (task - t0) * Dh;
    rotate(Rt, k + off + j * g.D, Dh, w);
    const float *qi = q + off + i * g.D;
    float s = 0.0f;
    for (int64_t d = 0; d < Dh; ++d)
      s += qi[d] * w[d];
    S[(task * T + i) * T + j] = scale * s;
  }
}

// The tasks [t0, blocked) of drelOfPair, in blocks of kBlock, drel_ij in
// a local block across them (registers with AVX-512; measured on an AVX2
// machine, this still beat four rows at a time in registers with every
// task's rows re-read per row block: attention_grad 3.7x against 5.7x the
// forward's time).
template <int64_t DH>
[[gnu::always_inline]] inline int64_t drelBlocked(const Geometry &g, const float *q,
                                                  const float *k, const float *c, int64_t i,
                                                  int64_t j, int64_t t0, int64_t t1,
                                                  float *__restrict out) {
  const int64_t T = g.T, blocked = t0 + (t1 - t0) / kBlock * kBlock;
  float rel[DH][DH];
  for (int64_t d = 0; d < DH; ++d)
    for (int64_t e = 0; e < DH; ++e)
      rel[d][e] = out[d * DH + e];
  for (int64_t task = t0; task < blocked; task += kBlock) {
    const TaskRows qi = taskRows(g, q, task, i), kj = taskRows(g, k, task, j);
    for (int64_t b = 0; b < kBlock; ++b) { // tasks ascending, as the plain loop
      const float ct = c[((task + b) * T + i) * T + j];
      for (int64_t d = 0; d < DH; ++d) {
        const float cq = ct * qi.at[b][d];
        for (int64_t e = 0; e < DH; ++e)
          rel[d][e] += cq * kj.at[b][e];
      }
    }
  }
  for (int64_t d = 0; d < DH; ++d)
    for (int64_t e = 0; e < DH; ++e)
      out[d * DH + e] = rel[d][e];
  return blocked;
}

// drel_ij += sum_{t in [t0, t1)} c_tij q_i k_j^T into `out`.
STRINGRT_TARGET_CLONES("avx512f", "fma", "default")
void drelOfPair(const Geometry &g, const float *q, const float *k, const float *c, int64_t i,
                int64_t j, int64_t t0, int64_t t1, float *__restrict out) {
  const int64_t T = g.T, Dh = g.Dh;
  int64_t task = Dh == 16   ? drelBlocked<16>(g, q, k, c, i, j, t0, t1, out)
                 : Dh == 32 ? drelBlocked<32>(g, q, k, c, i, j, t0, t1, out)
                            : t0;
  for (; task < t1; ++task) {
    const int64_t off = taskOffset(g, task);
    const float ct = c[(task * T + i) * T + j];
    const float *qi = q + off + i * g.D, *kj = k + off + j * g.D;
    for (int64_t d = 0; d < Dh; ++d) {
      const float cq = ct * qi[d];
      float *od = out + d * Dh;
      for (int64_t e = 0; e < Dh; ++e)
        od[e] += cq * kj[e];
    }
  }
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

// Row i of task t: P (scores in, probabilities out) and c = scale dS, with
// dP_ij = dy_i . v_j (d ascending) and dS = P (dP - sum_l P_il dP_il).
void rowSoftmaxGrad(const Geometry &g, const float *v, const float *dy, int64_t task, int64_t i,
                    int64_t visible, float scale, float *p, float *c) {
  const int64_t T = g.T, Dh = g.Dh, off = taskOffset(g, task);
  softmaxRow(p, visible, T);
  const float *dyi = dy + off + i * g.D;
  for (int64_t j = 0; j < visible; ++j) {
    const float *vj = v + off + j * g.D;
    float sum = 0.0f;
    for (int64_t d = 0; d < Dh; ++d)
      sum += dyi[d] * vj[d];
    c[j] = sum;
  }
  std::fill(c + visible, c + T, 0.0f);
  float pdp = 0.0f;
  for (int64_t j = 0; j < T; ++j)
    pdp += p[j] * c[j];
  for (int64_t j = 0; j < T; ++j)
    c[j] = scale * (p[j] * (c[j] - pdp));
}

// Tasks per chunk of the gradient's row pass: the chunk's rotated keys
// (T x chunk x Dh floats: 100 KiB at T 50, Dh 16) stay in L2.
constexpr int64_t kRowPassTasks = 32;

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

// P = softmax of each task's score rows, in place (hidden keys 0); each
// row's log-sum-exp into lse[task * T + i] when lse is given.
void softmaxScores(const Geometry &g, bool causal, float *S, int64_t t0, int64_t t1,
                   float *lse = nullptr) {
  for (int64_t task = t0; task < t1; ++task)
    for (int64_t i = 0; i < g.T; ++i)
      softmaxRow(S + (task * g.T + i) * g.T, visibleKeys(g, causal, i), g.T,
                 lse ? lse + task * g.T + i : nullptr);
}

} // namespace

void relAttention(const Geometry &g, const float *q, const float *k, const float *v,
                  const float *rel, float scale, bool causal, float *y, float *lse) {
  const int64_t T = g.T, tasks = g.B * g.heads;
  std::vector<float> P(static_cast<size_t>(tasks * T * T));
  relScores(g, q, k, rel, scale, causal, P.data());
  parallelFor(0, tasks, 1, [&](int64_t t0, int64_t t1) {
    softmaxScores(g, causal, P.data(), t0, t1, lse);
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
  // P and c = scale dS of every task, filled by the row pass.
  std::vector<float> P(static_cast<size_t>(tasks * T * T)), dS(P.size());

  // The row pass: by query rows i, per chunk of tasks: the rotated keys and
  // the scores, the softmax and c of the rows, dq from the kept rotations,
  // then drel (tasks ascending over the chunks).
  parallelFor(0, T, 1, [&](int64_t i0, int64_t i1) {
    const int64_t chunk = std::min(kRowPassTasks, tasks);
    std::vector<float> Rt(static_cast<size_t>(Dh * Dh));
    std::vector<float> W(static_cast<size_t>(T * chunk * Dh)); // [j][task - t0][Dh]
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t visible = visibleKeys(g, causal, i);
      float *drelRow = drel ? drel + i * T * Dh * Dh : nullptr;
      if (drelRow)
        std::fill(drelRow, drelRow + T * Dh * Dh, 0.0f);
      for (int64_t t0 = 0; t0 < tasks; t0 += chunk) {
        const int64_t t1 = std::min(tasks, t0 + chunk);
        for (int64_t j = 0; j < visible; ++j) {
          transpose(relPair(g, rel, i, j), Dh, Rt.data());
          rotateAndScore(g, Rt.data(), q, k, i, j, t0, t1, s, P.data(),
                         W.data() + j * chunk * Dh);
        }
        for (int64_t task = t0; task < t1; ++task) {
          float *p = P.data() + (task * T + i) * T, *c = dS.data() + (task * T + i) * T;
          rowSoftmaxGrad(g, v, dy, task, i, visible, s, p, c);
          dqFromRotated(W.data() + (task - t0) * Dh, chunk * Dh, c, visible, Dh,
                        dq + taskOffset(g, task) + i * D);
        }
        if (drelRow)
          for (int64_t j = 0; j < visible; ++j)
            drelOfPair(g, q, k, dS.data(), i, j, t0, t1, drelRow + j * Dh * Dh);
      }
    }
  });

  // dV = P^T dY per task.
  parallelFor(0, tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t off = taskOffset(g, task);
      gemmSerial(Trans::Yes, Trans::No, T, Dh, T, 1.0f, P.data() + task * T * T, T, dy + off, D,
                 0.0f, dv + off, D);
    }
  });

  // c transposed per task, cT[t, j, i], so that the dk pass reads each
  // task's c for key j contiguously (c[t, i, j] over i is T floats apart:
  // a cache line per entry).
  std::vector<float> &cT = P; // P is read by nothing after dV
  parallelFor(0, tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const float *c = dS.data() + task * T * T;
      float *out = cT.data() + task * T * T;
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j)
          out[j * T + i] = c[i * T + j];
    }
  });

  // dk by key rows j: the queries that see key j, ascending.
  parallelFor(0, T, 1, [&](int64_t j0, int64_t j1) {
    std::vector<float> dkRows(static_cast<size_t>(tasks * Dh)); // row j of every task
    for (int64_t j = j0; j < j1; ++j) {
      std::fill(dkRows.begin(), dkRows.end(), 0.0f);
      for (int64_t i = causal ? j : 0; i < T; ++i)
        dkOfPair(g, relPair(g, rel, i, j), q, cT.data(), i, j, dkRows.data());
      for (int64_t task = 0; task < tasks; ++task)
        std::copy_n(dkRows.data() + task * Dh, Dh, dk + taskOffset(g, task) + j * D);
    }
  });
}

} // namespace stringrt::cpu::util
