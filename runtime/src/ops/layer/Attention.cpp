// pe.attention and its gradient pe.attention_grad (PELayerOps.td):
// multi-head scaled dot-product attention with the masks none / causal /
// skip and optional relative rotations rel[i, j]: the shape contract, the
// reference kernels, the fast kernels and the registration
// (ops/OpLibrary.h), with the attributes' readers the fused attention ops'
// adapters share (Executor.h). The kernels' declarations are in
// stringrt/ops/LayerOps.h; stringc's generated kernels of pe.attention are
// CpuGen's (docs/codegen.md), checked here before they run.
//
// The contract's checks are KernelChecks.h's checks::attention and
// checks::attentionGrad, whose first part, checks::attentionInputs,
// pe.rope_attention's contract (ops/fused/RopeAttention.cpp) calls too.
//
// Head h of token t owns columns h*Dh .. (h+1)*Dh - 1; rel[i, j] is a
// [Dh, Dh] matrix acting on k_j as a column vector:
//   (R_ij k_j)[d] = sum_e rel[i, j, d, e] k_j[e].
#include "../OpLibrary.h"

#include "../../cpu/AttentionGeometry.h"
#include "../../cpu/Gemm.h"
#include "../../cpu/KernelUtil.h"
#include "../../cpu/RelativeAttention.h"
#include "../../cpu/Softmax.h"
#include "../../reference/KernelChecks.h"
#include "../../reference/LayerKernelUtil.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/LayerOps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contract
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::AttentionMask;
using ref::OptionalInput;
using ref::OptionalOutput;
using ref::TensorRef;

// attention: q, k, v [B, T, D] with `heads` dividing D, rel? [T, T, Dh, Dh],
// skip_base >= 0 with mask skip, the result [B, T, D], lse? [B, heads, T].
template <typename T>
ref::checks::AttentionShape attentionContract(const TensorRef<const T> &q,
                                              const TensorRef<const T> &k,
                                              const TensorRef<const T> &v,
                                              const OptionalInput<T> &rel, int64_t heads,
                                              AttentionMask mask, int64_t skipBase,
                                              const TensorRef<T> &y, const OptionalOutput<T> &lse) {
  const ref::checks::AttentionShape g =
      ref::checks::attention(q, k, v, rel, heads, mask, skipBase, y);
  if (lse)
    ref::checkShape("attention: lse", *lse, {g.B, g.heads, g.T});
  return g;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Reference kernels: plain loops, sums in double, each result rounded once
//===----------------------------------------------------------------------===//

namespace stringrt::ref {

using layer::Acc;

namespace {

struct Geometry {
  int64_t B, T, D, heads, Dh;
  // Flat index of q/k/v/dy[b, t, h*Dh + d].
  int64_t at(int64_t b, int64_t t, int64_t h, int64_t d) const {
    return (b * T + t) * D + h * Dh + d;
  }
  // Flat index of rel[i, j, d, e].
  int64_t relAt(int64_t i, int64_t j, int64_t d, int64_t e) const {
    return ((i * T + j) * Dh + d) * Dh + e;
  }
};

Geometry geometry(const checks::AttentionShape &s) { return {s.B, s.T, s.D, s.heads, s.Dh}; }

// Whether query i of head h sees key j.
bool visible(AttentionMask mask, int64_t skipBase, int64_t h, int64_t i, int64_t j) {
  switch (mask) {
  case AttentionMask::None:
    return true;
  case AttentionMask::Causal:
    return j <= i;
  case AttentionMask::Skip:
    return j == i - (skipBase + h);
  }
  return false;
}

// The softmax row of query i (batch b, head h): p[j] = P_ij (0 where key j
// is hidden; all 0 when no key is visible), and rk[j*Dh + d] = (R_ij k_j)[d]
// for the visible keys j (k_j itself without rel). Returns the row's
// log-sum-exp, max + log(sum of the exponentials) (-inf without a visible key).
template <typename T>
Acc softmaxRow(const Geometry &g, const TensorRef<const T> &q, const TensorRef<const T> &k,
                const OptionalInput<T> &rel, double scale, AttentionMask mask, int64_t skipBase,
                int64_t b, int64_t h, int64_t i, std::vector<Acc> &p, std::vector<Acc> &rk) {
  Acc maxScore = -std::numeric_limits<Acc>::infinity();
  bool any = false;
  for (int64_t j = 0; j < g.T; ++j) {
    p[j] = 0;
    if (!visible(mask, skipBase, h, i, j))
      continue;
    Acc *rkj = rk.data() + j * g.Dh;
    for (int64_t d = 0; d < g.Dh; ++d) {
      if (!rel) {
        rkj[d] = k.data[g.at(b, j, h, d)];
        continue;
      }
      Acc s = 0;
      for (int64_t e = 0; e < g.Dh; ++e)
        s += Acc(rel->data[g.relAt(i, j, d, e)]) * Acc(k.data[g.at(b, j, h, e)]);
      rkj[d] = s;
    }
    Acc s = 0;
    for (int64_t d = 0; d < g.Dh; ++d)
      s += Acc(q.data[g.at(b, i, h, d)]) * rkj[d];
    p[j] = scale * s; // the score, until normalised below
    maxScore = any ? std::max(maxScore, p[j]) : p[j];
    any = true;
  }
  if (!any)
    return -std::numeric_limits<Acc>::infinity();
  Acc sum = 0;
  for (int64_t j = 0; j < g.T; ++j)
    if (visible(mask, skipBase, h, i, j)) {
      p[j] = std::exp(p[j] - maxScore);
      sum += p[j];
    }
  for (int64_t j = 0; j < g.T; ++j)
    p[j] /= sum;
  return maxScore + std::log(sum);
}

} // namespace

// y_i = sum_j P_ij v_j per batch and head.
template <typename T>
void attention(TensorRef<const T> q, TensorRef<const T> k, TensorRef<const T> v,
               OptionalInput<T> rel, int64_t heads, double scale, AttentionMask mask,
               int64_t skipBase, TensorRef<T> y, OptionalOutput<T> lse) {
  const Geometry g = geometry(ops::attentionContract(q, k, v, rel, heads, mask, skipBase, y, lse));
  std::vector<Acc> p(static_cast<size_t>(g.T)), rk(static_cast<size_t>(g.T * g.Dh));
  std::vector<Acc> out(static_cast<size_t>(g.Dh));
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.heads; ++h)
      for (int64_t i = 0; i < g.T; ++i) {
        const Acc rowLse = softmaxRow(g, q, k, rel, scale, mask, skipBase, b, h, i, p, rk);
        if (lse)
          lse->data[(b * g.heads + h) * g.T + i] = static_cast<T>(rowLse);
        std::fill(out.begin(), out.end(), Acc(0));
        for (int64_t j = 0; j < g.T; ++j) {
          if (p[j] == 0)
            continue;
          for (int64_t d = 0; d < g.Dh; ++d)
            out[d] += p[j] * Acc(v.data[g.at(b, j, h, d)]);
        }
        for (int64_t d = 0; d < g.Dh; ++d)
          y.data[g.at(b, i, h, d)] = static_cast<T>(out[d]);
      }
}

// Per query row i: dv_j += P_ij dy_i; dS_ij = P_ij (dy_i.v_j - sum_l P_il dy_i.v_l);
// dq_i += scale dS_ij R_ij k_j; dk_j += scale dS_ij R_ij^T q_i;
// drel[i, j] += scale dS_ij q_i k_j^T.
template <typename T>
void attentionGrad(TensorRef<const T> q, TensorRef<const T> k, TensorRef<const T> v,
                   TensorRef<const T> dy, OptionalInput<T> rel, int64_t heads, double scale,
                   AttentionMask mask, int64_t skipBase, TensorRef<T> dq, TensorRef<T> dk,
                   TensorRef<T> dv, OptionalOutput<T> drel) {
  const Geometry g = geometry(
      checks::attentionGrad(q, k, v, dy, rel, heads, mask, skipBase, dq, dk, dv, drel));

  const size_t n = static_cast<size_t>(q.numel());
  std::vector<Acc> dqAcc(n, 0), dkAcc(n, 0), dvAcc(n, 0);
  std::vector<Acc> drelAcc(drel ? static_cast<size_t>(drel->numel()) : 0, 0);
  std::vector<Acc> p(static_cast<size_t>(g.T)), rk(static_cast<size_t>(g.T * g.Dh));
  std::vector<Acc> dS(static_cast<size_t>(g.T));
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.heads; ++h)
      for (int64_t i = 0; i < g.T; ++i) {
        softmaxRow(g, q, k, rel, scale, mask, skipBase, b, h, i, p, rk);
        // dS_ij = P_ij (dP_ij - sum_l P_il dP_il), dP_ij = dy_i . v_j
        Acc pdp = 0;
        for (int64_t j = 0; j < g.T; ++j) {
          dS[j] = 0;
          if (p[j] == 0)
            continue;
          Acc dP = 0;
          for (int64_t d = 0; d < g.Dh; ++d)
            dP += Acc(dy.data[g.at(b, i, h, d)]) * Acc(v.data[g.at(b, j, h, d)]);
          dS[j] = dP;
          pdp += p[j] * dP;
        }
        for (int64_t j = 0; j < g.T; ++j) {
          if (p[j] == 0)
            continue;
          dS[j] = p[j] * (dS[j] - pdp);
          const Acc *rkj = rk.data() + j * g.Dh;
          for (int64_t d = 0; d < g.Dh; ++d) {
            dvAcc[g.at(b, j, h, d)] += p[j] * Acc(dy.data[g.at(b, i, h, d)]);
            dqAcc[g.at(b, i, h, d)] += scale * dS[j] * rkj[d];
          }
          for (int64_t e = 0; e < g.Dh; ++e) {
            // (R_ij^T q_i)[e] = sum_d rel[i, j, d, e] q_i[d]
            Acc rq = 0;
            if (!rel)
              rq = q.data[g.at(b, i, h, e)];
            else
              for (int64_t d = 0; d < g.Dh; ++d)
                rq += Acc(rel->data[g.relAt(i, j, d, e)]) * Acc(q.data[g.at(b, i, h, d)]);
            dkAcc[g.at(b, j, h, e)] += scale * dS[j] * rq;
          }
          if (drel)
            for (int64_t d = 0; d < g.Dh; ++d)
              for (int64_t e = 0; e < g.Dh; ++e)
                drelAcc[g.relAt(i, j, d, e)] += scale * dS[j] *
                                                Acc(q.data[g.at(b, i, h, d)]) *
                                                Acc(k.data[g.at(b, j, h, e)]);
        }
      }
  for (size_t j = 0; j < n; ++j) {
    dq.data[j] = static_cast<T>(dqAcc[j]);
    dk.data[j] = static_cast<T>(dkAcc[j]);
    dv.data[j] = static_cast<T>(dvAcc[j]);
  }
  for (size_t j = 0; j < drelAcc.size(); ++j)
    drel->data[j] = static_cast<T>(drelAcc[j]);
}

#define STRINGRT_INSTANTIATE(T)                                                              \
  template void attention<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>,     \
                             OptionalInput<T>, int64_t, double, AttentionMask, int64_t,      \
                             TensorRef<T>, OptionalOutput<T>);                               \
  template void attentionGrad<T>(TensorRef<const T>, TensorRef<const T>, TensorRef<const T>, \
                                 TensorRef<const T>, OptionalInput<T>, int64_t, double,      \
                                 AttentionMask, int64_t, TensorRef<T>, TensorRef<T>,         \
                                 TensorRef<T>, OptionalOutput<T>);

STRINGRT_INSTANTIATE(float)
STRINGRT_INSTANTIATE(double)
#undef STRINGRT_INSTANTIATE

} // namespace stringrt::ref

//===----------------------------------------------------------------------===//
// Fast kernels: threaded over (batch, head) pairs
//===----------------------------------------------------------------------===//
//
// Each pair owns its Dh-column slice of y / dq / dk / dv, so the tasks never
// write the same memory and need no reduction. A head's q, k, v, y are
// [T, Dh] matrices with row stride D, fed to the GEMMs in place. With the
// relative rotations rel (masks none / causal) the scores are per-pair
// bilinear forms, in passes over the pairs (cpu/RelativeAttention.cpp).

namespace stringrt::cpu {

using namespace util;

namespace {

using Geometry = AttentionGeometry;

Geometry geometry(const ref::checks::AttentionShape &s) {
  return {s.B, s.T, s.D, s.heads, s.Dh};
}

// P = softmax(scale Q K^T) of one (batch, head), [T, T] row-major, row i
// over the visible keys (j <= i when causal, all otherwise); hidden entries
// are exact zeros.
// Without rel, none and causal always leave key 0 visible: no empty rows.
// Each row's log-sum-exp into lse[i] when lse is not null.
void attentionProbs(const Geometry &g, const float *qh, const float *kh, float scale,
                    bool causal, float *p, float *lse = nullptr) {
  gemmSerial(Trans::No, Trans::Yes, g.T, g.T, g.Dh, scale, qh, g.D, kh, g.D, 0.0f, p, g.T);
  for (int64_t i = 0; i < g.T; ++i) {
    float *row = p + i * g.T;
    const int64_t visible = causal ? i + 1 : g.T;
    softmaxRow(row, visible, g.T, lse ? lse + i : nullptr);
  }
}

// The key query i of head h sees under the skip mask (negative: none).
int64_t skipKey(int64_t skipBase, int64_t h, int64_t i) { return i - (skipBase + h); }

// Skip forward: y_i = v_{i - (skipBase + h)}, or 0 without a key. A softmax
// over a single score is exactly 1 whatever the score (and rel) is.
void skipAttention(const Geometry &g, const float *v, int64_t skipBase, float *y) {
  parallelFor(0, g.B * g.heads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t b = task / g.heads, h = task % g.heads, off = g.head(b, h);
      for (int64_t i = 0; i < g.T; ++i) {
        const int64_t j = skipKey(skipBase, h, i);
        float *out = y + off + i * g.D;
        if (j >= 0)
          std::copy(v + off + j * g.D, v + off + j * g.D + g.Dh, out);
        else
          std::fill(out, out + g.Dh, 0.0f);
      }
    }
  });
}

// Skip log-sum-exp: the one score, scale q_i . k_j (q_i^T R_ij k_j with
// rel) for j = i - (skipBase + h), or -inf for a query without a key (the
// log of an empty sum).
void skipLse(const Geometry &g, const float *q, const float *k, const float *rel, float scale,
             int64_t skipBase, float *lse) {
  parallelFor(0, g.B * g.heads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t b = task / g.heads, h = task % g.heads, off = g.head(b, h);
      for (int64_t i = 0; i < g.T; ++i) {
        const int64_t j = skipKey(skipBase, h, i);
        float s = -std::numeric_limits<float>::infinity();
        if (j >= 0) {
          float dot = 0.0f;
          for (int64_t d = 0; d < g.Dh; ++d) {
            float rk = k[off + j * g.D + d]; // (R_ij k_j)[d]
            if (rel) {
              rk = 0.0f;
              const float *row = rel + ((i * g.T + j) * g.Dh + d) * g.Dh;
              for (int64_t e = 0; e < g.Dh; ++e)
                rk += row[e] * k[off + j * g.D + e];
            }
            dot += q[off + i * g.D + d] * rk;
          }
          s = scale * dot;
        }
        lse[task * g.T + i] = s;
      }
    }
  });
}

// Skip backward: dv_j = dy_{j + skipBase + h} (0 past the end); dq = dk = 0,
// the gradient of a one-key softmax (dS = P (dP - P dP) = 0 with P = 1).
void skipAttentionGrad(const Geometry &g, const float *dy, int64_t skipBase, float *dq,
                       float *dk, float *dv) {
  const int64_t n = g.B * g.T * g.D;
  std::fill(dq, dq + n, 0.0f);
  std::fill(dk, dk + n, 0.0f);
  parallelFor(0, g.B * g.heads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t b = task / g.heads, h = task % g.heads, off = g.head(b, h);
      for (int64_t j = 0; j < g.T; ++j) {
        const int64_t i = j + skipBase + h; // the query that sees key j
        float *out = dv + off + j * g.D;
        if (i < g.T)
          std::copy(dy + off + i * g.D, dy + off + i * g.D + g.Dh, out);
        else
          std::fill(out, out + g.Dh, 0.0f);
      }
    }
  });
}

} // namespace

void attention(TensorRef<const float> q, TensorRef<const float> k, TensorRef<const float> v,
               OptionalInput<float> rel, int64_t heads, double scale, AttentionMask mask,
               int64_t skipBase, TensorRef<float> y, OptionalOutput<float> lse) {
  const Geometry g =
      geometry(ops::attentionContract<float>(q, k, v, rel, heads, mask, skipBase, y, lse));
  float *lseData = lse ? lse->data : nullptr;
  if (mask == AttentionMask::Skip) {
    skipAttention(g, v.data, skipBase, y.data);
    if (lseData)
      skipLse(g, q.data, k.data, rel ? rel->data : nullptr, static_cast<float>(scale), skipBase,
              lseData);
    return;
  }
  const bool causal = mask == AttentionMask::Causal;
  if (rel) {
    relAttention(g, q.data, k.data, v.data, rel->data, static_cast<float>(scale), causal,
                 y.data, lseData);
    return;
  }
  parallelFor(0, g.B * g.heads, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> p;
    p.resize(static_cast<size_t>(g.T * g.T));
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t off = g.head(task / g.heads, task % g.heads);
      attentionProbs(g, q.data + off, k.data + off, static_cast<float>(scale), causal,
                     p.data(), lseData ? lseData + task * g.T : nullptr);
      // Y = P V  ([T, T] x [T, Dh])
      gemmSerial(Trans::No, Trans::No, g.T, g.Dh, g.T, 1.0f, p.data(), g.T, v.data + off, g.D,
                 0.0f, y.data + off, g.D);
    }
  });
}

void attentionGrad(TensorRef<const float> q, TensorRef<const float> k,
                   TensorRef<const float> v, TensorRef<const float> dy,
                   OptionalInput<float> rel, int64_t heads, double scale, AttentionMask mask,
                   int64_t skipBase, TensorRef<float> dq, TensorRef<float> dk,
                   TensorRef<float> dv, OptionalOutput<float> drel) {
  const Geometry g = geometry(
      ref::checks::attentionGrad(q, k, v, dy, rel, heads, mask, skipBase, dq, dk, dv, drel));

  if (mask == AttentionMask::Skip) {
    skipAttentionGrad(g, dy.data, skipBase, dq.data, dk.data, dv.data);
    if (drel) // drel = scale sum dS q k^T with dS = 0
      std::fill(drel->data, drel->data + drel->numel(), 0.0f);
    return;
  }
  const bool causal = mask == AttentionMask::Causal;
  const float s = static_cast<float>(scale);
  if (rel) {
    relAttentionGrad(g, q.data, k.data, v.data, dy.data, rel->data, s, causal, dq.data, dk.data,
                     dv.data, drel ? drel->data : nullptr);
    return;
  }
  parallelFor(0, g.B * g.heads, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> p, dS;
    p.resize(static_cast<size_t>(g.T * g.T));
    dS.resize(static_cast<size_t>(g.T * g.T));
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t off = g.head(task / g.heads, task % g.heads);
      const float *qh = q.data + off, *kh = k.data + off, *vh = v.data + off;
      const float *dyh = dy.data + off;
      attentionProbs(g, qh, kh, s, causal, p.data());
      // dV = P^T dY  ([T, T]^T x [T, Dh])
      gemmSerial(Trans::Yes, Trans::No, g.T, g.Dh, g.T, 1.0f, p.data(), g.T, dyh, g.D, 0.0f,
                 dv.data + off, g.D);
      // dP = dY V^T  ([T, Dh] x [Dh, T]), then in place
      // dS_ij = P_ij (dP_ij - sum_l P_il dP_il)   (0 where P_ij = 0: hidden keys)
      gemmSerial(Trans::No, Trans::Yes, g.T, g.T, g.Dh, 1.0f, dyh, g.D, vh, g.D, 0.0f, dS.data(),
                 g.T);
      softmaxBackwardRows(g.T, p.data(), dS.data());
      // dQ = scale dS K,  dK = scale dS^T Q  ([T, T] x [T, Dh])
      gemmSerial(Trans::No, Trans::No, g.T, g.Dh, g.T, s, dS.data(), g.T, kh, g.D, 0.0f,
                 dq.data + off, g.D);
      gemmSerial(Trans::Yes, Trans::No, g.T, g.Dh, g.T, s, dS.data(), g.T, qh, g.D, 0.0f,
                 dk.data + off, g.D);
    }
  });
}

} // namespace stringrt::cpu

//===----------------------------------------------------------------------===//
// The attributes' readers (Executor.h; the fused attention ops' adapters
// read theirs with them too)
//===----------------------------------------------------------------------===//

namespace stringrt::detail {

// The `mask` attribute of pe.attention / pe.attention_grad.
ref::AttentionMask attentionMask(const OpContext &c) {
  const std::string &mask = c.op().getString("mask");
  if (mask == "none")
    return ref::AttentionMask::None;
  if (mask == "causal")
    return ref::AttentionMask::Causal;
  if (mask == "skip")
    return ref::AttentionMask::Skip;
  c.fail("unknown mask '" + mask + "' (none, causal or skip)");
}

// `skip_base`: required with mask skip, absent otherwise.
int64_t attentionSkipBase(const OpContext &c, ref::AttentionMask mask) {
  std::optional<int64_t> skipBase = c.op().getOptionalInt("skip_base");
  if ((mask == ref::AttentionMask::Skip) != skipBase.has_value())
    c.fail("skip_base goes with mask skip, and only with it");
  return skipBase.value_or(0);
}

ref::OptionalOutput<float> attentionLse(const OpContext &c) {
  ref::OptionalOutput<float> lse;
  if (c.numResults() == 2)
    lse = c.out(1);
  return lse;
}

void checkAttentionSaved(const OpContext &c, size_t yIndex) {
  const ref::TensorRef<const float> q = c.in(0), y = c.in(yIndex), lse = c.in(yIndex + 1);
  ref::checkShape("attention_grad: y", y, q.shape);
  if (q.rank() == 3)
    ref::checkShape("attention_grad: lse", lse, {q.dim(0), c.op().getInt("heads"), q.dim(1)});
}

} // namespace stringrt::detail

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using detail::attentionLse;
using detail::attentionMask;
using detail::attentionSkipBase;
using detail::checkAttentionSaved;

void runAttention(const OpContext &c) {
  AttentionMask mask = attentionMask(c);
  ref::attention<float>(c.in(0), c.in(1), c.in(2), c.optIn(3), c.op().getInt("heads"),
                        c.op().getFloat("scale"), mask, attentionSkipBase(c, mask), c.out(0),
                        attentionLse(c));
}

void runFastAttention(const OpContext &c) {
  AttentionMask mask = attentionMask(c);
  cpu::attention(c.in(0), c.in(1), c.in(2), c.optIn(3), c.op().getInt("heads"),
                 c.op().getFloat("scale"), mask, attentionSkipBase(c, mask), c.out(0),
                 attentionLse(c));
}

// The contract alone, run before a compiled kernel.
void checkAttention(const OpContext &c) {
  AttentionMask mask = attentionMask(c);
  attentionContract<float>(c.in(0), c.in(1), c.in(2), c.optIn(3), c.op().getInt("heads"), mask,
                           attentionSkipBase(c, mask), c.out(0), attentionLse(c));
}

// attention_grad's operands: q, k, v, y, lse, dy, rel?. y and lse are
// checked, not read: both kernels recompute P.
constexpr size_t kGradY = 3, kGradDy = 5, kGradRel = 6;

// attention_grad's drel: result 3, exactly when rel (operand 6) is given.
OptionalOutput<float> attentionGradDrel(const OpContext &c) {
  bool hasRel = c.numOperands() == kGradRel + 1;
  if (c.numResults() != (hasRel ? 4u : 3u))
    c.fail(std::to_string(c.numResults()) + " results for " + std::to_string(c.numOperands()) +
           " operands (drel exactly when rel is given)");
  OptionalOutput<float> drel;
  if (hasRel)
    drel = c.out(3);
  return drel;
}

void runAttentionGrad(const OpContext &c) {
  OptionalOutput<float> drel = attentionGradDrel(c);
  AttentionMask mask = attentionMask(c);
  checkAttentionSaved(c, kGradY);
  ref::attentionGrad<float>(c.in(0), c.in(1), c.in(2), c.in(kGradDy), c.optIn(kGradRel),
                            c.op().getInt("heads"), c.op().getFloat("scale"), mask,
                            attentionSkipBase(c, mask), c.out(0), c.out(1), c.out(2), drel);
}

void runFastAttentionGrad(const OpContext &c) {
  OptionalOutput<float> drel = attentionGradDrel(c);
  AttentionMask mask = attentionMask(c);
  checkAttentionSaved(c, kGradY);
  cpu::attentionGrad(c.in(0), c.in(1), c.in(2), c.in(kGradDy), c.optIn(kGradRel),
                     c.op().getInt("heads"), c.op().getFloat("scale"), mask,
                     attentionSkipBase(c, mask), c.out(0), c.out(1), c.out(2), drel);
}

void checkAttentionGrad(const OpContext &c) {
  OptionalOutput<float> drel = attentionGradDrel(c);
  AttentionMask mask = attentionMask(c);
  checkAttentionSaved(c, kGradY);
  ref::checks::attentionGrad<float>(c.in(0), c.in(1), c.in(2), c.in(kGradDy), c.optIn(kGradRel),
                                    c.op().getInt("heads"), mask, attentionSkipBase(c, mask),
                                    c.out(0), c.out(1), c.out(2), drel);
}

} // namespace

template <> void registerOps<OpCode::Attention>(OpRegistry &registry) {
  registry.add(OpCode::Attention, {runAttention, checkAttention, runFastAttention});
  registry.add(OpCode::AttentionGrad, {runAttentionGrad, checkAttentionGrad, runFastAttentionGrad});
}

} // namespace stringrt::ops
