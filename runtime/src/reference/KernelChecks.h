// The argument checks of the reference kernels of the ops that also run on
// compiled kernels (docs/codegen.md, "What is generated"): shapes,
// attributes and index operands, with the reference kernels' messages.
// Each reference kernel runs its check before computing; the executor runs
// the same check before it calls a compiled kernel, which cannot check
// anything itself (ExecutorCompiledOps.cpp). Private to the runtime.
#pragma once

#include "LayerKernelUtil.h"
#include "PositionUtil.h"

#include "stringrt/reference/LayerKernels.h"
#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt::ref::checks {

// Attention's q, k, v [B, T, D] with `heads` dividing D, rel [T, T, Dh,
// Dh] when given, skip_base >= 0 with mask skip.
struct AttentionShape {
  int64_t B, T, D, heads, Dh;
};

template <typename T>
AttentionShape attentionInputs(const char *kernel, const TensorRef<const T> &q,
                               const TensorRef<const T> &k, const TensorRef<const T> &v,
                               const OptionalInput<T> &rel, int64_t heads, AttentionMask mask,
                               int64_t skipBase) {
  const std::string name(kernel);
  checkRank((name + ": q").c_str(), q, 3);
  checkShape((name + ": k").c_str(), k, q.shape);
  checkShape((name + ": v").c_str(), v, q.shape);
  AttentionShape g{q.dim(0), q.dim(1), q.dim(2), heads, 0};
  check(heads > 0 && g.D % heads == 0, kernel,
        "heads " + std::to_string(heads) + " does not divide the width " + std::to_string(g.D));
  g.Dh = g.D / heads;
  if (rel)
    checkShape((name + ": rel").c_str(), *rel, {g.T, g.T, g.Dh, g.Dh});
  if (mask == AttentionMask::Skip)
    check(skipBase >= 0, kernel, "skip_base must be >= 0, got " + std::to_string(skipBase));
  return g;
}

template <typename T>
AttentionShape attention(const TensorRef<const T> &q, const TensorRef<const T> &k,
                         const TensorRef<const T> &v, const OptionalInput<T> &rel, int64_t heads,
                         AttentionMask mask, int64_t skipBase, const TensorRef<T> &y) {
  const AttentionShape g = attentionInputs("attention", q, k, v, rel, heads, mask, skipBase);
  checkShape("attention: result", y, q.shape);
  return g;
}

template <typename T>
AttentionShape attentionGrad(const TensorRef<const T> &q, const TensorRef<const T> &k,
                             const TensorRef<const T> &v, const TensorRef<const T> &dy,
                             const OptionalInput<T> &rel, int64_t heads, AttentionMask mask,
                             int64_t skipBase, const TensorRef<T> &dq, const TensorRef<T> &dk,
                             const TensorRef<T> &dv, const OptionalOutput<T> &drel) {
  const AttentionShape g =
      attentionInputs("attention_grad", q, k, v, rel, heads, mask, skipBase);
  layer::checkAttentionGradShapes(q, dy, rel, dq, dk, dv, drel);
  return g;
}

// x [..., T, D] (D even) against table [T, D/2, 2]; returns the leading
// count. The first part of rope_apply's contract (ops/fused/RopeApply.cpp),
// which rope_attention's checks call for q and k.
template <typename T>
int64_t ropeTableFits(const char *what, const TensorRef<const T> &x,
                      const TensorRef<const T> &table) {
  check(x.rank() >= 2, what, "'x' must be [..., T, D], got " + shapeToString(x.shape));
  const int64_t tokens = x.dim(-2), width = x.dim(-1);
  check(width % 2 == 0, what,
        "the last dimension of 'x' must be even (interleaved pairs), got " +
            std::to_string(width));
  checkShape((std::string(what) + ": 'table'").c_str(), table, {tokens, width / 2, 2});
  return position::leadingCount(x.shape, 2);
}

inline void fusedMask(const char *what, AttentionMask mask) {
  check(mask != AttentionMask::Skip, what, "mask 'skip' is not supported (use attention)");
}

// rope_attention: rope_apply's checks of q and k, then attention's.
template <typename T>
void ropeAttention(const TensorRef<const T> &q, const TensorRef<const T> &k,
                   const TensorRef<const T> &v, const TensorRef<const T> &table, int64_t heads,
                   AttentionMask mask, const TensorRef<T> &y) {
  fusedMask("rope_attention", mask);
  ropeTableFits("rope_apply", q, table);
  ropeTableFits("rope_apply", k, table);
  attention<T>(q, k, v, std::nullopt, heads, mask, 0, y);
}

template <typename T>
void ropeAttentionGrad(const TensorRef<const T> &q, const TensorRef<const T> &k,
                       const TensorRef<const T> &v, const TensorRef<const T> &table,
                       const TensorRef<const T> &dy, int64_t heads, AttentionMask mask,
                       const TensorRef<T> &dq, const TensorRef<T> &dk, const TensorRef<T> &dv) {
  fusedMask("rope_attention_grad", mask);
  checkShape("rope_attention_grad: dq", dq, q.shape);
  checkShape("rope_attention_grad: dk", dk, q.shape);
  ropeTableFits("rope_apply", q, table);
  ropeTableFits("rope_apply", k, table);
  attentionGrad<T>(q, k, v, dy, std::nullopt, heads, mask, 0, dq, dk, dv, std::nullopt);
}

} // namespace stringrt::ref::checks
