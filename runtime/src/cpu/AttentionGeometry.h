// The shape of one multi-head attention call, and the q/k/v/heads checks
// the fused RoPE attention's fast kernels start with (private to the
// runtime; FusedAttention.cpp). The attention op (ops/layer/Attention.cpp)
// takes the geometry from its contract, KernelChecks.h's, the same checks
// with the same messages.
#pragma once

#include "KernelUtil.h"

#include <string>

namespace stringrt::cpu::util {

struct AttentionGeometry {
  int64_t B, T, D, heads, Dh;
  // Offset of head h of batch b's first row in a [B, T, D] tensor.
  int64_t head(int64_t b, int64_t h) const { return b * T * D + h * Dh; }
};

// q [B, T, D], k and v of q's shape, `heads` dividing D; throws naming
// `kernel` and the operand otherwise.
inline AttentionGeometry checkAttentionInputs(const std::string &kernel,
                                              const TensorRef<const float> &q,
                                              const TensorRef<const float> &k,
                                              const TensorRef<const float> &v, int64_t heads) {
  checkRank((kernel + ": q").c_str(), q, 3);
  checkShape((kernel + ": k").c_str(), k, q.shape);
  checkShape((kernel + ": v").c_str(), v, q.shape);
  AttentionGeometry g{q.dim(0), q.dim(1), q.dim(2), heads, 0};
  check(heads > 0 && g.D % heads == 0, kernel.c_str(),
        "heads " + std::to_string(heads) + " does not divide the width " + std::to_string(g.D));
  g.Dh = g.D / heads;
  return g;
}

} // namespace stringrt::cpu::util
