// Softmax rows of the fast attention kernels (private to the runtime),
// shared by the attention op (ops/layer/Attention.cpp) and the fused RoPE
// attention (in the op library's fused family, ops/fused/).
#pragma once

#include <cstdint>

namespace stringrt::cpu::util {

// Softmax of the first `visible` scores of a row of `length`, in place; the
// hidden rest becomes exactly 0. Max-subtracted: every exp is <= 1, no
// overflow for large scores. `lse`, when given, gets the log-sum-exp of the
// visible scores (max + log of the sum of the exponentials).
void softmaxRow(float *row, int64_t visible, int64_t length, float *lse = nullptr);

// dS_ij = P_ij (dP_ij - sum_l P_il dP_il) in place over dP (row-major [T, T]).
void softmaxBackwardRows(int64_t T, const float *p, float *dS);

} // namespace stringrt::cpu::util
