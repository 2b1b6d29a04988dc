// The shape of one multi-head attention call for the fast attention
// kernels (private to the runtime): the attention op's
// (ops/layer/Attention.cpp, cpu/RelativeAttention.cpp) and the fused RoPE
// attention's (ops/fused/), each taking it from its op's contract.
#pragma once

#include <cstdint>

namespace stringrt::cpu::util {

struct AttentionGeometry {
  int64_t B, T, D, heads, Dh;
  // Offset of head h of batch b's first row in a [B, T, D] tensor.
  int64_t head(int64_t b, int64_t h) const { return b * T * D + h * Dh; }
};

} // namespace stringrt::cpu::util
