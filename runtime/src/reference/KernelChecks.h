// The argument checks of pe.attention and pe.attention_grad, their
// contract's (ops/layer/Attention.cpp), whose first part, attentionInputs,
// the fused pe.rope_attention's contract (ops/fused/RopeAttention.cpp)
// calls with its own name. Every other op's contract is in its op file.
// Each kernel runs its op's contract before computing; the executor runs
// the same check before it calls a compiled kernel, which cannot check
// anything itself (ExecutorCompiledOps.cpp). Private to the runtime.
#pragma once

#include "LayerKernelUtil.h"

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

} // namespace stringrt::ref::checks
