// Fast multi-head attention and its backward op, threaded over
// (batch, head) pairs: each pair owns its Dh-column slice of y / dq / dk / dv,
// so the tasks never write the same memory and need no reduction. With the
// relative rotations rel (masks none / causal) the scores are per-pair
// bilinear forms, in passes over the pairs (RelativeAttention.cpp).
//
// Head h of token t owns columns h*Dh .. (h+1)*Dh - 1, so a head's q, k, v,
// y are [T, Dh] matrices with row stride D, fed to the GEMMs in place.
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "Gemm.h"
#include "AttentionGeometry.h"
#include "KernelUtil.h"
#include "RelativeAttention.h"
#include "Softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

using Geometry = AttentionGeometry;

Geometry checkAttention(const std::string &kernel, const TensorRef<const float> &q,
                        const TensorRef<const float> &k, const TensorRef<const float> &v,
                        const OptionalInput<float> &rel, int64_t heads, AttentionMask mask,
                        int64_t skipBase) {
  Geometry g = checkAttentionInputs(kernel, q, k, v, heads);
  if (rel)
    checkShape((kernel + ": rel").c_str(), *rel, {g.T, g.T, g.Dh, g.Dh});
  if (mask == AttentionMask::Skip)
    check(skipBase >= 0, kernel.c_str(),
          "skip_base must be >= 0, got " + std::to_string(skipBase));
  return g;
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
  const Geometry g = checkAttention("attention", q, k, v, rel, heads, mask, skipBase);
  checkShape("attention: result", y, q.shape);
  if (lse)
    checkShape("attention: lse", *lse, {g.B, g.heads, g.T});
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
  const Geometry g = checkAttention("attention_grad", q, k, v, rel, heads, mask, skipBase);
  checkAttentionGradShapes(q, dy, rel, dq, dk, dv, drel);

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
