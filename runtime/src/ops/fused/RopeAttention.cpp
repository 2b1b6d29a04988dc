// pe.rope_attention and its gradient pe.rope_attention_grad (PEFusedOps.td:
// attention(rope_apply(q, table), rope_apply(k, table), v), which
// pe-fuse-attention writes for pe.attention of two pe.rope_apply, with the
// masks none and causal; the gradient's dq and dk turned back by the
// table): the shape contracts, the fast kernels and the registration
// (ops/OpLibrary.h). The fast kernels' declarations are in
// stringrt/ops/FusedOps.h; stringc's generated kernels of both ops are
// CpuGen's (AttentionGen.cpp), checked here before they run.
//
// The reference kernels are the ops' compositions (ops/Compositions.cpp:
// rope_apply's and attention's reference kernels, ops/fused/RopeApply.cpp,
// ops/layer/Attention.cpp), rounding between them as the unfused ops do;
// the fast kernels fuse the rotation into the attention's loads
// (docs/passes.md, pe-fuse-attention).
#include "../OpLibrary.h"

#include "../../cpu/AttentionGeometry.h"
#include "../../cpu/Gemm.h"
#include "../../cpu/KernelUtil.h"
#include "../../cpu/RopeRow.h"
#include "../../cpu/Softmax.h"
#include "../../reference/KernelChecks.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"

#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// Shape contracts
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using ref::AttentionMask;
using ref::check;
using ref::checkShape;
using ref::OptionalInput;
using ref::OptionalOutput;
using ref::TensorRef;
using ref::checks::AttentionShape;

// Both ops: the mask none or causal; q, k, v [B, T, D] with `heads`
// dividing D (attention's checks, named after the op); the head width
// D / heads even (each head's tile rotates whole pairs, as the dialect's
// verifier requires); table [T, D/2, 2].
template <typename T>
AttentionShape ropeAttentionInputs(const char *op, const TensorRef<const T> &q,
                                   const TensorRef<const T> &k, const TensorRef<const T> &v,
                                   const TensorRef<const T> &table, int64_t heads,
                                   AttentionMask mask) {
  check(mask != AttentionMask::Skip, op, "mask 'skip' is not supported (use attention)");
  const AttentionShape g =
      ref::checks::attentionInputs<T>(op, q, k, v, OptionalInput<T>{}, heads, mask, 0);
  check(g.Dh % 2 == 0, op,
        "the head width must be even (interleaved pairs), got " + std::to_string(g.Dh));
  checkShape((std::string(op) + ": table").c_str(), table, {g.T, g.D / 2, 2});
  return g;
}

// rope_attention: the inputs above, the result [B, T, D], lse? [B, heads, T].
template <typename T>
AttentionShape ropeAttentionContract(const TensorRef<const T> &q, const TensorRef<const T> &k,
                                     const TensorRef<const T> &v,
                                     const TensorRef<const T> &table, int64_t heads,
                                     AttentionMask mask, const TensorRef<T> &y,
                                     const OptionalOutput<T> &lse) {
  const AttentionShape g = ropeAttentionInputs("rope_attention", q, k, v, table, heads, mask);
  checkShape("rope_attention: result", y, q.shape);
  if (lse)
    checkShape("rope_attention: lse", *lse, {g.B, g.heads, g.T});
  return g;
}

// rope_attention_grad: the inputs above, dy, dq, dk and dv [B, T, D].
template <typename T>
AttentionShape ropeAttentionGradContract(const TensorRef<const T> &q, const TensorRef<const T> &k,
                                         const TensorRef<const T> &v,
                                         const TensorRef<const T> &table,
                                         const TensorRef<const T> &dy, int64_t heads,
                                         AttentionMask mask, const TensorRef<T> &dq,
                                         const TensorRef<T> &dk, const TensorRef<T> &dv) {
  const AttentionShape g =
      ropeAttentionInputs("rope_attention_grad", q, k, v, table, heads, mask);
  checkShape("rope_attention_grad: dy", dy, q.shape);
  checkShape("rope_attention_grad: dq", dq, q.shape);
  checkShape("rope_attention_grad: dk", dk, q.shape);
  checkShape("rope_attention_grad: dv", dv, q.shape);
  return g;
}

} // namespace
} // namespace stringrt::ops

//===----------------------------------------------------------------------===//
// Fast kernels: threaded over (batch, head), the rotation in the tiles' loads
//===----------------------------------------------------------------------===//
//
// Like cpu::attention, each (batch, head) task owns its Dh-column slice of
// the results. It rotates its head's q and k tiles into thread-local
// [T, Dh] scratch as it loads them, so the rotated Q / K exist only there;
// the score / probability matrix P is a thread-local [T, T] tile too (both
// L1/L2-sized for the models here). The backward recomputes the rotated
// tiles and P instead of storing them (docs/passes.md, pe-fuse-attention:
// the trade-off).

namespace stringrt::cpu {

using namespace util;

namespace {

using Geometry = AttentionGeometry;

Geometry geometry(const ref::checks::AttentionShape &s) {
  return {s.B, s.T, s.D, s.heads, s.Dh};
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

// S = scale Qr Kr^T, the softmax and Y = P V as per-head GEMMs.
void ropeAttention(TensorRef<const float> q, TensorRef<const float> k, TensorRef<const float> v,
                   TensorRef<const float> table, int64_t heads, double scale, AttentionMask mask,
                   TensorRef<float> y, OptionalOutput<float> lse) {
  const Geometry g =
      geometry(ops::ropeAttentionContract<float>(q, k, v, table, heads, mask, y, lse));
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

// Recomputes the rotated tiles and P per (batch, head), then dV = P^T dY,
// dS, dQr = scale dS Kr and dKr = scale dS^T Qr into scratch, and writes
// dq, dk rotated back (R^T) straight into the outputs.
void ropeAttentionGrad(TensorRef<const float> q, TensorRef<const float> k,
                       TensorRef<const float> v, TensorRef<const float> table,
                       TensorRef<const float> dy, int64_t heads, double scale,
                       AttentionMask mask, TensorRef<float> dq, TensorRef<float> dk,
                       TensorRef<float> dv) {
  const Geometry g = geometry(
      ops::ropeAttentionGradContract<float>(q, k, v, table, dy, heads, mask, dq, dk, dv));
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

//===----------------------------------------------------------------------===//
// Executor adapters and registration
//===----------------------------------------------------------------------===//

namespace stringrt::ops {
namespace {

using detail::attentionLse;
using detail::checkAttentionSaved;

// pe.rope_attention(_grad) take the mask of pe.attention, without skip.
AttentionMask fusedMask(const OpContext &c) {
  AttentionMask mask = detail::attentionMask(c);
  if (mask == AttentionMask::Skip)
    c.fail("mask 'skip' is not supported (use pe.attention)");
  return mask;
}

void runFastRopeAttention(const OpContext &c) {
  cpu::ropeAttention(c.in(0), c.in(1), c.in(2), c.in(3), c.op().getInt("heads"),
                     c.op().getFloat("scale"), fusedMask(c), c.out(0), attentionLse(c));
}

// The contract alone, run before a compiled kernel and before the
// composition (runComposition).
void checkRopeAttention(const OpContext &c) {
  ropeAttentionContract<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.op().getInt("heads"),
                               fusedMask(c), c.out(0), attentionLse(c));
}

// rope_attention_grad's operands: q, k, v, table, y, lse, dy. The CPU
// kernels recompute P from the rotated tiles: y and lse are checked, not
// read.
constexpr size_t kGradY = 4, kGradDy = 6;

void runFastRopeAttentionGrad(const OpContext &c) {
  checkAttentionSaved(c, kGradY);
  cpu::ropeAttentionGrad(c.in(0), c.in(1), c.in(2), c.in(3), c.in(kGradDy),
                         c.op().getInt("heads"), c.op().getFloat("scale"), fusedMask(c),
                         c.out(0), c.out(1), c.out(2));
}

void checkRopeAttentionGrad(const OpContext &c) {
  checkAttentionSaved(c, kGradY);
  ropeAttentionGradContract<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.in(kGradDy),
                                   c.op().getInt("heads"), fusedMask(c), c.out(0), c.out(1),
                                   c.out(2));
}

} // namespace

template <> void registerOps<OpCode::RopeAttention>(OpRegistry &registry) {
  registry.add(OpCode::RopeAttention, {nullptr, checkRopeAttention, runFastRopeAttention});
  registry.add(OpCode::RopeAttentionGrad,
               {nullptr, checkRopeAttentionGrad, runFastRopeAttentionGrad});
}

} // namespace stringrt::ops
