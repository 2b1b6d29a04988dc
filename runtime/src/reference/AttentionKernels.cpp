// Reference kernels: multi-head attention (masks none / causal / skip,
// optional relative rotations rel[i, j]) and its backward op.
//
// Head h of token t owns columns h*Dh .. (h+1)*Dh - 1; rel[i, j] is a
// [Dh, Dh] matrix acting on k_j as a column vector:
//   (R_ij k_j)[d] = sum_e rel[i, j, d, e] k_j[e].
#include "stringrt/reference/LayerKernels.h"

#include "KernelChecks.h"
#include "LayerKernelUtil.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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
  const Geometry g = geometry(checks::attention(q, k, v, rel, heads, mask, skipBase, y));
  if (lse)
    checkShape("attention: lse", *lse, {g.B, g.heads, g.T});
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
