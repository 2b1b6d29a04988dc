// Fast attention with RoPE in its prologue (pe.rope_attention) and its
// backward. Threaded over (batch, head) like cpu::attention; each task
// rotates its head's q and k tiles into thread-local [T, Dh] scratch as it
// loads them, so the rotated Q / K exist only there. The score / probability
// matrix P is a thread-local [T, T] tile too, as in cpu::attention; the
// backward recomputes the rotated tiles and P instead of storing them
// (docs/passes.md, pe-fuse-attention: the trade-off).
#include "stringrt/cpu/FusedKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include "Gemm.h"
#include "AttentionGeometry.h"
#include "KernelUtil.h"
#include "RopeRow.h"
#include "Softmax.h"

#include <string>
#include <vector>

namespace stringrt::cpu {

using namespace util;

namespace {

using Geometry = AttentionGeometry;

Geometry checkRopeAttention(const std::string &kernel, const TensorRef<const float> &q,
                            const TensorRef<const float> &k, const TensorRef<const float> &v,
                            const TensorRef<const float> &table, int64_t heads,
                            AttentionMask mask) {
  Geometry g = checkAttentionInputs(kernel, q, k, v, heads);
  check(g.Dh % 2 == 0, kernel.c_str(),
        "the head width must be even (interleaved pairs), got " + std::to_string(g.Dh));
  checkShape((kernel + ": table").c_str(), table, {g.T, g.D / 2, 2});
  check(mask != AttentionMask::Skip, kernel.c_str(),
        "mask 'skip' is not supported (use attention)");
  return g;
}

// The head-h tile of x (rows of stride D at `off`) rotated into `tile`
// [T, Dh]: token t's pairs h*Dh/2 .. turned by its table row.
void loadRotated(const Geometry &g, const float *x, const float *table, int64_t h, float *tile) {
  const int64_t pairs = g.Dh / 2;
  for (int64_t t = 0; t < g.T; ++t)
    rotateRow(x + t * g.D, table + 2 * (t * (g.D / 2) + h * pairs), pairs, 1.0f,
              tile + t * g.Dh);
}

// The inverse: tile [T, Dh] turned back (R^T) into the head-h rows of out.
void storeRotatedBack(const Geometry &g, const float *tile, const float *table, int64_t h,
                      float *out) {
  const int64_t pairs = g.Dh / 2;
  for (int64_t t = 0; t < g.T; ++t)
    rotateRow(tile + t * g.Dh, table + 2 * (t * (g.D / 2) + h * pairs), pairs, -1.0f,
              out + t * g.D);
}

// P = softmax(scale Qr Kr^T) for contiguous [T, Dh] tiles; each row's
// log-sum-exp into lse[i] when lse is not null.
void probs(const Geometry &g, const float *qr, const float *kr, float scale, bool causal,
           float *p, float *lse = nullptr) {
  gemmSerial(Trans::No, Trans::Yes, g.T, g.T, g.Dh, scale, qr, g.Dh, kr, g.Dh, 0.0f, p, g.T);
  for (int64_t i = 0; i < g.T; ++i)
    softmaxRow(p + i * g.T, causal ? i + 1 : g.T, g.T, lse ? lse + i : nullptr);
}

} // namespace

void ropeAttention(TensorRef<const float> q, TensorRef<const float> k, TensorRef<const float> v,
                   TensorRef<const float> table, int64_t heads, double scale, AttentionMask mask,
                   TensorRef<float> y, OptionalOutput<float> lse) {
  const Geometry g = checkRopeAttention("rope_attention", q, k, v, table, heads, mask);
  checkShape("rope_attention: result", y, q.shape);
  if (lse)
    checkShape("rope_attention: lse", *lse, {g.B, g.heads, g.T});
  float *lseData = lse ? lse->data : nullptr;
  const bool causal = mask == AttentionMask::Causal;
  parallelFor(0, g.B * g.heads, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> qr, kr, p;
    qr.resize(static_cast<size_t>(g.T * g.Dh));
    kr.resize(static_cast<size_t>(g.T * g.Dh));
    p.resize(static_cast<size_t>(g.T * g.T));
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t h = task % g.heads, off = g.head(task / g.heads, h);
      loadRotated(g, q.data + off, table.data, h, qr.data());
      loadRotated(g, k.data + off, table.data, h, kr.data());
      probs(g, qr.data(), kr.data(), static_cast<float>(scale), causal, p.data(),
            lseData ? lseData + task * g.T : nullptr);
      gemmSerial(Trans::No, Trans::No, g.T, g.Dh, g.T, 1.0f, p.data(), g.T, v.data + off, g.D,
                 0.0f, y.data + off, g.D);
    }
  });
}

void ropeAttentionGrad(TensorRef<const float> q, TensorRef<const float> k,
                       TensorRef<const float> v, TensorRef<const float> table,
                       TensorRef<const float> dy, int64_t heads, double scale,
                       AttentionMask mask, TensorRef<float> dq, TensorRef<float> dk,
                       TensorRef<float> dv) {
  const Geometry g = checkRopeAttention("rope_attention_grad", q, k, v, table, heads, mask);
  checkShape("rope_attention_grad: dy", dy, q.shape);
  checkShape("rope_attention_grad: dq", dq, q.shape);
  checkShape("rope_attention_grad: dk", dk, q.shape);
  checkShape("rope_attention_grad: dv", dv, q.shape);
  const bool causal = mask == AttentionMask::Causal;
  const float s = static_cast<float>(scale);
  parallelFor(0, g.B * g.heads, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> qr, kr, dqr, dkr, p, dS;
    for (auto *tile : {&qr, &kr, &dqr, &dkr})
      tile->resize(static_cast<size_t>(g.T * g.Dh));
    p.resize(static_cast<size_t>(g.T * g.T));
    dS.resize(static_cast<size_t>(g.T * g.T));
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t h = task % g.heads, off = g.head(task / g.heads, h);
      const float *vh = v.data + off, *dyh = dy.data + off;
      loadRotated(g, q.data + off, table.data, h, qr.data());
      loadRotated(g, k.data + off, table.data, h, kr.data());
      probs(g, qr.data(), kr.data(), s, causal, p.data());
      // dV = P^T dY, dP = dY V^T, then dS in place.
      gemmSerial(Trans::Yes, Trans::No, g.T, g.Dh, g.T, 1.0f, p.data(), g.T, dyh, g.D, 0.0f,
                 dv.data + off, g.D);
      gemmSerial(Trans::No, Trans::Yes, g.T, g.T, g.Dh, 1.0f, dyh, g.D, vh, g.D, 0.0f, dS.data(),
                 g.T);
      softmaxBackwardRows(g.T, p.data(), dS.data());
      // dQr = scale dS Kr, dKr = scale dS^T Qr, then turned back by R^T.
      gemmSerial(Trans::No, Trans::No, g.T, g.Dh, g.T, s, dS.data(), g.T, kr.data(), g.Dh, 0.0f,
                 dqr.data(), g.Dh);
      gemmSerial(Trans::Yes, Trans::No, g.T, g.Dh, g.T, s, dS.data(), g.T, qr.data(), g.Dh, 0.0f,
                 dkr.data(), g.Dh);
      storeRotatedBack(g, dqr.data(), table.data, h, dq.data + off);
      storeRotatedBack(g, dkr.data(), table.data, h, dk.data + off);
    }
  });
}

} // namespace stringrt::cpu
