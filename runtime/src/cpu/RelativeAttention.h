// Fast attention with relative rotations, masks none and causal (private to
// src/cpu; called by ops/layer/Attention.cpp): passes over the pairs (i, j),
// each R_ij the shared operand of a register-tiled product over every batch
// and head (RelativeAttention.cpp, RelativeAttentionTiles.h).
#pragma once

#include "AttentionGeometry.h"
#include "RegisterTile.h"

#include <optional>

namespace stringrt::cpu::util {

// y = softmax(scale [q_i^T R_ij k_j]_ij) V per (batch, head), R_ij = rel[i, j]
// ([T, T, Dh, Dh]); causal: j <= i.
void relAttention(const AttentionGeometry &g, const float *q, const float *k, const float *v,
                  const float *rel, float scale, bool causal, float *y, float *lse = nullptr);

// Its gradients dq, dk, dv, and drel when not null (summed over every batch
// and head).
void relAttentionGrad(const AttentionGeometry &g, const float *q, const float *k,
                      const float *v, const float *dy, const float *rel, float scale,
                      bool causal, float *dq, float *dk, float *dv, float *drel);

// For tests: run the tiles built for `level` (one the CPU has) instead of
// the widest; nullopt undoes it.
void forceRelAttentionSimdLevel(std::optional<SimdLevel> level);

} // namespace stringrt::cpu::util
